package watch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
)

// fakeResult is a probe result with one connection, as probe.Run returns.
func fakeResult(url string, lastByteMs float64, iw int) *probe.Result {
	rtt := 40.0
	tlsMs := 80.0
	rep := &report.Report{Schema: report.Schema, Connections: []report.Connection{{
		Index: 1, HandshakeRTTMs: &rtt,
		InitialWindow: &report.InitialWindow{Segments: iw, Verdict: report.VerdictExact},
		RoundTrips:    report.RoundTrips{TCP: 1, TLS: 2, HTTP: 3, Total: 6},
		ClientTiming: &report.ClientTiming{Run: 1, Hop: 1, URL: url, Status: 200, TLSMs: &tlsMs,
			FirstByteAtMs: lastByteMs / 2, LastByteAtMs: lastByteMs, BodyBytes: 5000},
	}}}
	return &probe.Result{Report: rep, Runs: [][]int{{0}}}
}

func TestRunStoresEveryProbeAndGoesOnAfterErrors(t *testing.T) {
	s, _ := openTemp(t)
	m := NewMetrics("test", "c0ffee")
	calls := 0
	prober := func(_ context.Context, o probe.Options) (*probe.Result, error) {
		calls++
		if o.Runs != 1 {
			t.Errorf("probe asked for %d runs, want 1", o.Runs)
		}
		if calls == 2 {
			return nil, &probe.Error{Kind: probe.KindTimeout, Err: errors.New("the server did not answer in time")}
		}
		return fakeResult(o.URL, 100*float64(calls), 10), nil
	}
	var seen []Row
	err := Run(context.Background(), Config{Probe: probe.Options{URL: "https://a.example/", Runs: 5}, Every: time.Millisecond,
		Count: 4, Store: s, Metrics: m, Prober: prober, OnProbe: func(r Row) { seen = append(seen, r) }})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Rows(context.Background(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 || len(rows) != 4 || len(seen) != 4 {
		t.Fatalf("%d probes, %d rows, %d seen; want 4 each", calls, len(rows), len(seen))
	}
	if rows[1].Error == "" || rows[1].LastByteMs != nil {
		t.Errorf("the failed probe was stored as %+v", rows[1])
	}
	if *rows[3].LastByteMs != 400 || *rows[3].IW.Segments != 10 || *rows[3].RoundTrips != 6 || *rows[3].TLSMs != 80 || *rows[3].BodyBytes != 5000 {
		t.Errorf("the last probe was stored as %+v", rows[3])
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].Time.Before(rows[i-1].Time) {
			t.Errorf("row %d is older than row %d", i, i-1)
		}
	}
	values := scrape(t, m)
	if values[`slowstart_watch_probes_total{url="https://a.example/"}`] != 4 || values[`slowstart_watch_errors_total{url="https://a.example/"}`] != 1 {
		t.Errorf("counters: %v", values)
	}
	// Every successful probe is in the histograms, however few scrapes there
	// were: probes 1, 3 and 4 took 0.1, 0.3 and 0.4 s to their last byte.
	if n, sum := values[`slowstart_watch_last_byte_seconds_count{url="https://a.example/"}`], values[`slowstart_watch_last_byte_seconds_sum{url="https://a.example/"}`]; n != 3 || sum < 0.8-1e-9 || sum > 0.8+1e-9 {
		t.Errorf("last byte histogram: %v probes, %v s in all; want 3 and 0.8", n, sum)
	}
	if got := values[`slowstart_watch_last_byte_seconds_bucket{url="https://a.example/",le="0.16"}`]; got != 1 {
		t.Errorf("last byte histogram: %v probes at or under 0.16 s, want 1 (0.1 s)", got)
	}
	if got := values[`slowstart_watch_round_trips_bucket{url="https://a.example/",le="6"}`]; got != 3 {
		t.Errorf("round trips histogram: %v probes at or under 6, want 3", got)
	}
	if values[`slowstart_watch_up`] != 1 || values[`slowstart_build_info{commit="c0ffee",goversion="`+runtime.Version()+`",version="test"}`] != 1 {
		t.Errorf("no up or build info: %v", values)
	}
}

func TestRunStopsOnCancelAndFatalErrors(t *testing.T) {
	s, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	// The second probe is interrupted (as by Ctrl-C while it runs): it must not be
	// stored, and Run must return at once.
	prober := func(ctx context.Context, o probe.Options) (*probe.Result, error) {
		calls++
		if calls == 2 {
			cancel()
			return nil, ctx.Err()
		}
		return fakeResult(o.URL, 100, 10), nil
	}
	err := Run(ctx, Config{Probe: probe.Options{URL: "http://a.example/"}, Every: time.Millisecond, Store: s, Prober: prober})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	rows, _ := s.Rows(context.Background(), Query{})
	if calls != 2 || len(rows) != 1 {
		t.Errorf("%d probes, %d rows; want 2 and 1", calls, len(rows))
	}

	// Cancelled while waiting for the next probe: returns without waiting an hour.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx2, Config{Probe: probe.Options{URL: "http://b.example/"}, Every: time.Hour, Store: s,
			Prober:  func(_ context.Context, o probe.Options) (*probe.Result, error) { return fakeResult(o.URL, 1, 10), nil },
			OnProbe: func(Row) { cancel2() }})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop when its context ended")
	}

	perm := &probe.Error{Kind: probe.KindPermission, Err: errors.New("capturing needs CAP_NET_RAW")}
	err = Run(context.Background(), Config{Probe: probe.Options{URL: "http://c.example/"}, Every: time.Millisecond, Count: 3, Store: s,
		Prober: func(context.Context, probe.Options) (*probe.Result, error) { return nil, perm },
		Fatal:  func(err error) bool { return probe.KindOf(err) == probe.KindPermission }})
	if !errors.Is(err, perm) {
		t.Errorf("a fatal error gave %v", err)
	}
	if rows, _ := s.Rows(context.Background(), Query{URL: "http://c.example/"}); len(rows) != 0 {
		t.Errorf("a fatal error was stored: %+v", rows)
	}
}

// scrape parses the text exposition format into "name{labels}" -> value, and
// checks that every sample's family was announced with HELP and TYPE.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	var b strings.Builder
	if err := m.Write(&b); err != nil {
		t.Fatal(err)
	}
	return parseExposition(t, b.String())
}

func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	// Prometheus's own parser (prometheus/common/expfmt) reads the text: it
	// refuses a sample whose family has no TYPE, a malformed line, a label
	// badly escaped.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, text)
	}
	out := map[string]float64{}
	key := func(name string, pairs []*dto.LabelPair, more ...string) string {
		var labels []string
		for _, p := range pairs {
			labels = append(labels, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
		}
		sort.Strings(labels)
		labels = append(labels, more...)
		if len(labels) == 0 {
			return name
		}
		return name + "{" + strings.Join(labels, ",") + "}"
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(name, m.GetLabel())] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(name, m.GetLabel())] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[key(name+"_count", m.GetLabel())] = float64(h.GetSampleCount())
				out[key(name+"_sum", m.GetLabel())] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key(name+"_bucket", m.GetLabel(), fmt.Sprintf("le=%q", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))] = float64(b.GetCumulativeCount())
				}
			default:
				out[key(name, m.GetLabel())] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func TestMetricsEscapesLabels(t *testing.T) {
	m := NewMetrics("test", "c0ffee")
	m.Observe(Row{Time: time.Unix(1700000000, 0), URL: "http://a.example/", Label: "a \"x\"\\", Error: "boom"})
	values := scrape(t, m)
	if values[`slowstart_watch_errors_total{label="a \"x\"\\"}`] != 1 {
		t.Errorf("escaped label not found in %v", values)
	}
	for k := range values {
		if strings.Contains(k, `label="a \"x\"\\"`) && !strings.HasPrefix(k, "slowstart_watch_probes_total") &&
			!strings.HasPrefix(k, "slowstart_watch_errors_total") && !strings.HasPrefix(k, "slowstart_watch_last_probe_timestamp_seconds") {
			t.Errorf("%s: a value of a watch with no successful probe", k)
		}
	}
}
