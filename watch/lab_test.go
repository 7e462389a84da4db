package watch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/probe"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces and a live capture")
}

// TestWatchLabServer watches an emulated far-away server (RTT 60 ms, IW 4) with
// real probes every 200 ms, three times, and checks the rows, their spacing, and
// the metrics served over HTTP.
func TestWatchLabServer(t *testing.T) {
	requireRoot(t)
	t.Cleanup(func() { netlab.CloseAll() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := labserver.Start(ctx, labserver.Config{RTT: 60 * time.Millisecond, IW: 4})
	if err != nil {
		t.Fatalf("starting the lab server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the lab server: %v", err)
		}
	})
	store, _ := openTemp(t)
	metrics := NewMetrics("test", "c0ffee")
	url := srv.URL("/bytes/30000")
	every := 200 * time.Millisecond
	err = Run(ctx, Config{Probe: probe.Options{URL: url, Netns: srv.Netns, Resolve: srv.Resolve(), Timeout: 20 * time.Second},
		Every: every, Count: 3, Store: store, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := store.Rows(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, r := range rows {
		t.Logf("row %d: %s", i+1, describe(r))
		if r.Error != "" {
			t.Errorf("probe %d failed: %s", i+1, r.Error)
			continue
		}
		if r.URL != url || r.IW.Segments == nil || *r.IW.Segments != 4 || r.IW.Verdict != "exact" {
			t.Errorf("probe %d: url %q, IW %v %q; want IW 4 exact", i+1, r.URL, r.IW.Segments, r.IW.Verdict)
		}
		if r.HandshakeRTTMs == nil || *r.HandshakeRTTMs < 58 || *r.HandshakeRTTMs > 80 {
			t.Errorf("probe %d: handshake RTT %v ms, want about 60", i+1, r.HandshakeRTTMs)
		}
		// 30000 bytes (21 segments) from IW 4: rounds of 4, 8, 16 after the request,
		// so at least the handshake and 3 rounds: 4 RTTs.
		if r.LastByteMs == nil || *r.LastByteMs < 4*60 || *r.FirstByteMs >= *r.LastByteMs {
			t.Errorf("probe %d: first byte %v, last byte %v ms", i+1, r.FirstByteMs, r.LastByteMs)
		}
		if r.BodyBytes == nil || *r.BodyBytes != 30000 || r.RoundTrips == nil || *r.RoundTrips < 4 {
			t.Errorf("probe %d: body %v bytes, %v round trips", i+1, r.BodyBytes, r.RoundTrips)
		}
		if i > 0 && r.Time.Sub(rows[i-1].Time) < every-5*time.Millisecond {
			t.Errorf("probes %d and %d started %v apart, want at least %v", i, i+1, r.Time.Sub(rows[i-1].Time), every)
		}
	}

	hs := httptest.NewServer(metrics)
	defer hs.Close()
	resp, err := http.Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	values := parseExposition(t, string(body))
	label := fmt.Sprintf("{url=%q}", url)
	var lastByte, handshake float64
	for _, r := range rows {
		lastByte += *r.LastByteMs / 1000
		handshake += *r.HandshakeRTTMs / 1000
	}
	checks := map[string]float64{
		"slowstart_watch_probes_total" + label:                3,
		"slowstart_watch_errors_total" + label:                0,
		"slowstart_watch_initial_window_segments" + label:     4,
		"slowstart_watch_last_byte_seconds_count" + label:     3,
		"slowstart_watch_last_byte_seconds_sum" + label:       lastByte,
		"slowstart_watch_handshake_rtt_seconds_count" + label: 3,
		"slowstart_watch_handshake_rtt_seconds_sum" + label:   handshake,
		"slowstart_watch_body_bytes" + label:                  30000,
	}
	for k, want := range checks {
		if got, ok := values[k]; !ok || got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
}

func describe(r Row) string {
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	iw := "-"
	if r.IW.Segments != nil {
		iw = fmt.Sprintf("%d %s", *r.IW.Segments, r.IW.Verdict)
	}
	return fmt.Sprintf("%s IW %s, rtt %s ms, first %s ms, last %s ms, err %q", r.Time.Format(time.RFC3339Nano), iw,
		f(r.HandshakeRTTMs), f(r.FirstByteMs), f(r.LastByteMs), r.Error)
}
