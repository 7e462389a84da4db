package lab

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/golden"
)

// fixedRows are made-up trials of specs: deterministic inputs for the text, JSON
// and CSV renderings (no live run).
func fixedRows(specs []Spec, trials int) []Row {
	var rows []Row
	for t := 1; t <= trials; t++ {
		for i, s := range specs {
			base := 100 + 10*float64(i) + float64(s.RTTNs)/1e6
			r := TrialResult{Trial: t, ConnectMs: float64(s.RTTNs) / 1e6, FirstByteMs: base, LastByteMs: base + 3.5*float64(t),
				FCTPaperMs: 3.5 * float64(t), FCTUserMs: base + 3.5*float64(t), Bytes: s.SizeBytes, Protocol: "HTTP/1.1"}
			if s.HTTP3 {
				r.Protocol = ProtocolHTTP3
			}
			if t == 2 && s.RateBitsPerSecond > 0 { // a full bottleneck queue
				r.DataPacketsLost, r.DataPacketsDroppedQueue = 2, 2
			}
			if t == 3 && i == 0 {
				r.AckPacketsLost, r.AckPacketsDroppedLoss = 1, 1
			}
			r.PathCheck = &PathCheck{HandshakeRTTMs: r.ConnectMs, ExpectedHandshakeMs: float64(s.RTTNs) / 1e6, ToleranceMs: 3}
			if s.HTTP3 { // its handshake holds TLS's: not compared
				r.PathCheck.HandshakeRTTMs, r.PathCheck.ExpectedHandshakeMs = 0, 0
			}
			if t == 1 && i == 0 { // a trial the host distorted, clean when run again
				r.Reruns, r.DistortedBy = 1, fmt.Sprintf("its TCP handshake took %.1f ms where the path gives %.1f ms, 3.0 ms allowed", r.ConnectMs+58.6, r.ConnectMs)
			}
			if t == 4 && i == 0 && trials > 4 { // one still distorted after its reruns
				r.PathCheck.HandshakeRTTMs, r.PathCheck.Distorted = r.ConnectMs+28.5, true
				r.PathCheck.Reason = fmt.Sprintf("its TCP handshake took %.1f ms where the path gives %.1f ms, 3.5 ms allowed", r.ConnectMs+28.5, r.ConnectMs)
				r.Reruns, r.Excluded, r.DistortedBy = 2, true, fmt.Sprintf("its TCP handshake took %.1f ms where the path gives %.1f ms, 3.5 ms allowed", r.ConnectMs+42, r.ConnectMs)
			}
			if t == trials && trials > 3 && i == 0 {
				r = TrialResult{Trial: t, Error: "fetch: connection reset by peer"}
			}
			if s.HTTP3 || len(specs) == 2 && specs[1].HTTP3 {
				if r.Error == "" {
					r.RoundTrips = &TrialRoundTrips{Handshake: 2 - i, Data: 3, Total: 5 - i}
				}
			}
			rows = append(rows, NewRow(s, r))
		}
	}
	return rows
}

func mustSpecs(t *testing.T, g Grid) []Spec {
	t.Helper()
	specs, err := g.Specs()
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

// defaultGrid is lab run's defaults.
func defaultGrid() Grid {
	return Grid{RTT: "70ms", Rate: "0", IW: "10", Size: "42KB", Loss: "0", TLS: "none", Chain: "4KB", Server: ServerBuiltin,
		Client: ClientBuiltin, CC: "cubic", Think: "0", ThinkAfter: "0", Seed: 1, Trials: 5}
}

// TestRunTextGolden: lab run's and lab sweep's text, JSON and CSV for fixed rows,
// against testdata/golden (go test -update rewrites them after a deliberate change).
func TestRunTextGolden(t *testing.T) {
	run := defaultGrid()
	run.Rate, run.Loss = "1.2mbit", "1%"
	http3 := defaultGrid()
	http3.RTT, http3.Rate, http3.Size, http3.Chain, http3.HTTP3, http3.Trials = "100ms", "10mbit", "160KB", "9KB", true, 3
	sweep := defaultGrid()
	sweep.RTT, sweep.IW, sweep.Size, sweep.Trials = "20ms,150ms", "3,10", "10KB", 4
	busy := HostSteal{StolenSeconds: 4.2, ElapsedSeconds: 10, Share: 0.21, TooBusy: true}
	cases := []struct {
		name  string
		grid  Grid
		steal HostSteal
		sweep bool
	}{
		{"run", run, HostSteal{ElapsedSeconds: 10}, false},
		{"run-http3", http3, busy, false},
		{"sweep", sweep, HostSteal{ElapsedSeconds: 10}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := mustSpecs(t, tc.grid)
			rows := fixedRows(specs, tc.grid.Trials)
			var text bytes.Buffer
			write := WriteRunText
			if tc.sweep {
				write = WriteSweepText
			}
			if err := write(&text, specs, rows, tc.steal); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tc.name+".txt", text.Bytes())
			var csv bytes.Buffer
			if err := WriteCSV(&csv, rows); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tc.name+".csv", csv.Bytes())
			if !tc.sweep {
				out := NewRunOutput(specs, rows, tc.steal)
				if out.Schema != Schema || out.Summary.Point != specs[0].Label() || len(out.Trials) != len(rows) {
					t.Errorf("run output: schema %q, point %q, %d trials; want %q, %q, %d", out.Schema, out.Summary.Point, len(out.Trials), Schema, specs[0].Label(), len(rows))
				}
				if tc.grid.HTTP3 != (out.HTTP3 != nil && out.Comparison != nil) {
					t.Errorf("--http3 %v, but the output's HTTP/3 summary %v and comparison %v", tc.grid.HTTP3, out.HTTP3 != nil, out.Comparison != nil)
				}
			}
		})
	}
}

// TestGridErrors: a bad value names the flag it came from.
func TestGridErrors(t *testing.T) {
	cases := []struct {
		change func(*Grid)
		want   string
	}{
		{func(g *Grid) { g.RTT = "" }, "--rtt: give at least one value"},
		{func(g *Grid) { g.IW = "10,0" }, `--iw: "0" is not a number of segments`},
		{func(g *Grid) { g.Size = "12parsecs" }, "--size"},
		{func(g *Grid) { g.Queue = "0p" }, "--queue"},
		{func(g *Grid) { g.HTTP3, g.TLS, g.TLSGiven = true, "none", true }, "--http3 compares HTTP/3 with HTTPS over TCP"},
		{func(g *Grid) { g.Trials = 0 }, "--runs must be 1 or more"},
	}
	for _, tc := range cases {
		g := defaultGrid()
		tc.change(&g)
		if _, err := g.Specs(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one with %q", err, tc.want)
		}
	}
	g := defaultGrid()
	g.RTT, g.IW, g.Size = "20ms,70ms", "3,10,32", "10KB,100KB"
	specs := mustSpecs(t, g)
	if len(specs) != 12 || len(g.Jobs(specs)) != 12*g.Trials {
		t.Errorf("%d points and %d jobs, want 12 and %d", len(specs), len(g.Jobs(specs)), 12*g.Trials)
	}
	g.HTTP3 = true
	specs = mustSpecs(t, g)
	if len(specs) != 24 || !specs[1].HTTP3 || specs[0].HTTP3 || specs[0].TLS != "1.3" || !specs[0].HTTP2 {
		t.Errorf("with HTTP/3: %d points, the first two %+v, %+v", len(specs), specs[0], specs[1])
	}
}
