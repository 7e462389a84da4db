package field

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/tune"
)

// feedInterval runs synthetic connections through a tracker into the
// runner's aggregator: n per client address, of size bytes under IW iw.
func feedInterval(t *testing.T, r *runner, clients []string, n, iw, size int, startNs int64) {
	t.Helper()
	base := time.Unix(1_800_000_000, 0).UnixNano() // the monotonic clock's 0 on the wall clock
	tr := newTracker(1000, 1, int64(time.Second), int64(time.Minute), func(ns int64) int64 { return base + ns }, r.emit)
	cookie := uint64(startNs)
	for _, client := range clients {
		for i := range n {
			cookie++
			sc := synthetic(cookie, iw, size)
			sc.Client = netip.MustParseAddrPort(client)
			sc.StartNs = startNs + int64(i)*1e6
			for _, ev := range sc.Events(nil) {
				tr.feed(&ev)
			}
		}
	}
	if tr.open() != 0 {
		t.Fatalf("%d connections still open", tr.open())
	}
}

func testRunner(t *testing.T, store *Store) *runner {
	t.Helper()
	opts := Options{Ports: []uint16{443}, Prefix4: 24, SamplesPerNetwork: 8, MarksFile: "-"}
	if err := opts.normalize(); err != nil {
		t.Fatal(err)
	}
	nets, _ := NewNetworks(24, 48, nil)
	r := &runner{opts: opts, networks: nets, store: store, source: SourceKernel, from: time.Unix(1000, 0)}
	r.agg = newAggregator(opts.MaxNetworks, opts.SampleSize, opts.SamplesPerNetwork, 1)
	r.metrics = newMetrics(opts.MetricsNetworks, opts.IWs, r.statusCopy)
	r.rng = rand.New(rand.NewPCG(1, 0x5eed))
	return r
}

// TestStoreBeforeAfter writes two intervals of two networks to a store, the
// first under IW 4 and the second under IW 32 with a mark between them, reads
// them back and compares them: round trips per 30,000-byte response go from 3
// to 1 (IW 4: 4 + 8 + 16 segments; IW 32: all 21 at once), a difference whose
// interval excludes 0, in each network. Each network sent 40 connections an
// interval and the store kept 8 of each, each standing for 5.
func TestStoreBeforeAfter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "field.db")
	st, err := OpenStore(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !IsStore(path) || IsStore(filepath.Join(t.TempDir(), "none")) {
		t.Error("IsStore does not tell the store")
	}
	r := testRunner(t, st)
	clients := []string{"198.51.100.7:40000", "203.0.113.9:40000"}
	t0 := time.Unix(1_800_000_000, 0)
	r.intervalAt = t0
	feedInterval(t, r, clients, 40, 4, 30000, 1e9)
	r.writeInterval(ctx, t0.Add(time.Minute))
	mark := tune.Mark{Schema: tune.MarkSchema, Time: t0.Add(time.Minute), Action: "apply",
		Routes: []tune.MarkRoute{{Route: "default", InitCwndBefore: 4, InitCwndAfter: 32}}}
	if n, err := st.AddMarks(ctx, []tune.Mark{mark, mark}); err != nil || n != 1 {
		t.Fatalf("AddMarks: %d, %v (want the mark once)", n, err)
	}
	r.intervalAt = t0.Add(time.Minute)
	feedInterval(t, r, clients, 40, 32, 30000, 100e9)
	r.writeInterval(ctx, t0.Add(2*time.Minute))

	rows, err := st.samples(ctx, Query{})
	if err != nil || len(rows) != 32 {
		t.Fatalf("%d rows kept (%v), want 8 per network and interval", len(rows), err)
	}
	for _, row := range rows {
		if row.weight != 5 {
			t.Fatalf("a row weighs %v, want 5 (40 connections, 8 kept)", row.weight)
		}
	}
	rep, err := Report(ctx, st, ReportOptions{IWs: []int{32}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Connections != 160 || len(rep.Networks) != 2 || rep.Networks[0].Connections != 80 || len(rep.Marks) != 1 {
		t.Fatalf("report: %d connections, %d networks, %d marks", rep.All.Connections, len(rep.Networks), len(rep.Marks))
	}
	// Half the responses took 3 round trips, half 1: IW 32 saves 2 on the
	// first half and nothing on the second, 1 on average.
	if sv := rep.All.Savings[0]; sv.RoundTrips != 1 || !sv.RoundTripsCI.Contains(1) {
		t.Errorf("IW 32 saves %+v, want 1 round trip on average", sv)
	}
	before, after, err := AroundMark(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	res, err := CompareNetworks(ctx, st, CompareOptions{Before: Query{From: before.From, To: before.To},
		After: Query{From: after.From, To: after.To}, Compare: compare.Options{Resamples: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d comparisons, want all networks and the two", len(res))
	}
	for _, nc := range res {
		rt := nc.RoundTrips
		if rt.Before.Median != 3 || rt.After.Median != 1 || rt.CI.Contains(0) || rt.CI.High >= 0 {
			t.Errorf("%q: round trips %v → %v, CI %+v: want 3 → 1 with an interval below 0", nc.Network, rt.Before.Median, rt.After.Median, rt.CI)
		}
	}
	var b strings.Builder
	if err := WriteComparison(&b, before, after, res); err != nil || !strings.Contains(b.String(), "198.51.100.0/24") {
		t.Errorf("comparison text: %v\n%s", err, b.String())
	}
}

// TestMetrics: each connection lands in its network's histograms; past
// MetricsNetworks networks, series are pooled under "other".
func TestMetrics(t *testing.T) {
	m := newMetrics(1, []int{32}, func() statusCounts { return statusCounts{followed: 7, eventsLost: 2} })
	s := sample{rttUs: 50000, mss: 1448, iw: 4, cwndAtRequest: 4, bytes: 30000, round1Bytes: 5792, roundTrips: 3, responseMs: 150}
	m.observe("a", &s)
	m.observe("a", &s)
	m.observe("b", &s)
	if got := testutil.ToFloat64(m.connections.WithLabelValues("a")); got != 2 {
		t.Errorf("network a: %v connections", got)
	}
	if got := testutil.ToFloat64(m.connections.WithLabelValues(MetricsOtherNetwork)); got != 1 {
		t.Errorf("network b, past the bound: %v connections under other", got)
	}
	// IW 32 saves 2 round trips of 50 ms on each.
	if got := testutil.ToFloat64(m.savedRounds.WithLabelValues("a", "32")); got != 4 {
		t.Errorf("saved round trips %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.savedTime.WithLabelValues("a", "32")); got < 0.1999 || got > 0.2001 {
		t.Errorf("saved seconds %v, want 0.2", got)
	}
	n, err := testutil.GatherAndCount(m.registry, "slowstart_field_round_trips", "slowstart_field_events_lost_total")
	if err != nil || n != 3 {
		t.Errorf("%d series (%v), want the round trips of a and other, and the events lost", n, err)
	}
	expected := `
# HELP slowstart_field_events_lost_total Kernel events lost: the ring buffer was full.
# TYPE slowstart_field_events_lost_total counter
slowstart_field_events_lost_total 2
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(expected), "slowstart_field_events_lost_total"); err != nil {
		t.Error(err)
	}
}
