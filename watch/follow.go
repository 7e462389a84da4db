package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
)

// FollowOptions are a watch as slowstart watch runs it.
type FollowOptions struct {
	// StorePath is the store to append to (made when missing).
	StorePath string
	// Probe configures each probe (its URL is the one watched).
	Probe probe.Options
	// Every and Count: see Config (Every positive, Count 0 or more).
	Every time.Duration
	Count int
	Label string
	// MetricsListen, when set, serves the metrics there (ServeMetrics).
	MetricsListen string
	// Version and Commit are the build's, for slowstart_build_info.
	Version, Commit string
}

// Follow probes o.Probe.URL every o.Every into the store, printing each probe
// on a line of out, until o.Count probes are done or ctx ends; errOut gets
// the metrics' address and the count stored. Its errors are marked where the
// kind is known (bad values, the store, a signal); a probe's error that stops
// the watch (Config.Fatal) is returned as the probe gave it.
func Follow(ctx context.Context, o FollowOptions, out, errOut io.Writer) error {
	exact.CleanStale(ctx, o.Probe.Netns, errOut)
	store, err := OpenStore(o.StorePath, false)
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	defer store.Close()
	metrics := NewMetrics(o.Version, o.Commit)
	if o.MetricsListen != "" {
		stopServer, addr, err := ServeMetrics(o.MetricsListen, metrics)
		if err != nil {
			return fault.Usagef("--metrics-listen %s: %w", o.MetricsListen, err)
		}
		defer stopServer()
		fmt.Fprintf(errOut, "metrics: http://%s/metrics\n", addr)
	}
	stored := 0
	err = Run(ctx, Config{Probe: o.Probe, Every: o.Every, Count: o.Count, Store: store, Metrics: metrics, Label: o.Label,
		Fatal: stopsWatch,
		OnProbe: func(r Row) {
			stored++
			fmt.Fprintln(out, FormatRow(r))
		}})
	probes := report.Count(stored, "probe", "probes")
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return fault.Interruptedf("interrupted; %s stored in %s", probes, o.StorePath)
	default:
		return err
	}
	fmt.Fprintf(errOut, "%s stored in %s\n", probes, o.StorePath)
	return nil
}

// stopsWatch tells the probe errors no later probe would do better at: a
// malformed URL, missing privileges, a missing interface.
func stopsWatch(err error) bool {
	switch probe.KindOf(err) {
	case probe.KindURL, probe.KindPermission, probe.KindInterface:
		return true
	}
	return false
}

// FormatRow prints a stored probe on one line.
func FormatRow(r Row) string {
	name := textsafe.Escape(r.URL)
	if r.Label != "" {
		name = textsafe.Escape(r.Label)
	}
	s := r.Time.Local().Format("2006-01-02 15:04:05") + "  " + name
	if r.Error != "" && r.Status == nil {
		return s + "  error: " + textsafe.Escape(r.Error)
	}
	if r.Status != nil {
		s += fmt.Sprintf("  HTTP %d", *r.Status)
	}
	if text := r.IW.Text(); text != "" {
		s += fmt.Sprintf("  IW %s (%s)", text, r.IW.Verdict)
	} else if r.IW.Verdict != "" {
		s += fmt.Sprintf("  IW ? (%s)", r.IW.Verdict)
	} else {
		s += "  IW ?"
	}
	ms := func(label string, v *float64) {
		if v != nil {
			s += fmt.Sprintf("  %s %s ms", label, strconv.FormatFloat(*v, 'f', decimals(*v), 64))
		}
	}
	ms("rtt", r.HandshakeRTTMs)
	ms("tls", r.TLSMs)
	ms("first byte", r.FirstByteMs)
	ms("last byte", r.LastByteMs)
	if r.RoundTrips != nil {
		s += "  " + report.Count(*r.RoundTrips, "round trip", "round trips")
	}
	if r.BodyBytes != nil {
		s += fmt.Sprintf("  %d bytes", *r.BodyBytes)
	}
	if r.Error != "" {
		s += "  error: " + textsafe.Escape(r.Error)
	}
	return s
}

// decimals gives milliseconds three significant digits, at least one decimal.
func decimals(ms float64) int {
	switch {
	case ms < 1:
		return 3
	case ms < 10:
		return 2
	}
	return 1
}

// List prints the rows of the store at path (of url only, when given) as a
// table, or as JSON (ListOutput).
func List(ctx context.Context, out io.Writer, path, url string, asJSON bool) error {
	store, err := OpenStore(path, true)
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	defer store.Close()
	rows, err := store.Rows(ctx, Query{URL: url})
	if err != nil {
		return fault.Mark(fault.File, err)
	}
	if asJSON {
		if rows == nil {
			rows = []Row{}
		}
		return jsonout.Write(out, ListOutput{Schema: Schema, Rows: rows})
	}
	if len(rows) == 0 {
		fmt.Fprintf(out, "%s holds no probes\n", path)
		return nil
	}
	if err := listTable(rows).Write(out); err != nil {
		return err
	}
	urls, err := store.URLs(ctx)
	if err == nil && url == "" && len(urls) > 0 {
		fmt.Fprintf(out, "%s of %s\n", report.Count(len(rows), "probe", "probes"), report.Count(len(urls), "URL", "URLs"))
	}
	return nil
}

func listTable(rows []Row) *texttable.Table {
	tb := texttable.New("", texttable.R("id"), texttable.L("time (UTC)"), texttable.L("url"), texttable.R("status"), texttable.R("IW"),
		texttable.L("verdict"), texttable.R("RTT ms"), texttable.R("TLS ms"), texttable.R("first byte ms"), texttable.R("last byte ms"),
		texttable.R("round trips"), texttable.R("bytes"), texttable.L("error"))
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	n := func(v *int) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	}
	for _, r := range rows {
		body := "-"
		if r.BodyBytes != nil {
			body = fmt.Sprint(*r.BodyBytes)
		}
		tb.Row(strconv.FormatInt(r.ID, 10), r.Time.UTC().Format("2006-01-02 15:04:05"), textsafe.Escape(r.URL),
			n(r.Status), dash(r.IW.Text()), dash(r.IW.Verdict), f(r.HandshakeRTTMs), f(r.TLSMs), f(r.FirstByteMs), f(r.LastByteMs),
			n(r.RoundTrips), body, textsafe.Escape(r.Error))
	}
	return tb
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
