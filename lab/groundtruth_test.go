package lab

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/report"
)

func needRoot(t *testing.T) { t.Helper(); testroot.Require(t, "network namespaces") }

// TestGroundTruthInitialWindow: for every IW on the route and two path lengths, a real
// Linux transfer through the emulator, captured at both ends, analyzes to exactly
// that IW.
func TestGroundTruthInitialWindow(t *testing.T) {
	needRoot(t)
	var jobs []Job
	for _, rttMs := range []int64{20, 150} {
		for _, iw := range []int{1, 2, 3, 4, 10, 16, 32, 64} {
			size := max(int64(3*iw*1448), 30_000) // at least twice the IW, so round 1 is cut
			jobs = append(jobs, Job{Spec: Spec{RTTNs: rttMs * 1e6, IW: iw, InitRwnd: 200, SizeBytes: size}, Trial: 1})
		}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, err := NewEnv().RunJobs(ctx, jobs, RunOptions{Parallel: 8, CaptureDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows {
		spec := jobs[i].Spec
		t.Run(spec.Label(), func(t *testing.T) {
			if row.Error != "" {
				t.Fatalf("trial failed: %s", row.Error)
			}
			if row.Bytes != spec.SizeBytes {
				t.Errorf("received %d bytes, want %d", row.Bytes, spec.SizeBytes)
			}
			for _, side := range []struct{ vantage, path string }{{"client", row.ClientPcap}, {"server", row.ServerPcap}} {
				rep, err := analysis.File(ctx, side.path, analysis.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Connections) != 1 {
					t.Fatalf("%s capture: %d connections", side.vantage, len(rep.Connections))
				}
				c := rep.Connections[0]
				if c.Vantage != side.vantage {
					t.Errorf("%s capture: vantage %q", side.vantage, c.Vantage)
				}
				if iw := c.InitialWindow; iw.Verdict != report.VerdictExact || iw.Segments != spec.IW {
					t.Errorf("%s capture (%s): IW %d %s (%s), want %d exact", side.vantage, filepath.Base(side.path), iw.Segments, iw.Verdict, iw.Reason, spec.IW)
				}
				if c.HandshakeRTTMs == nil {
					t.Errorf("%s capture: no handshake RTT", side.vantage)
				} else if rtt := *c.HandshakeRTTMs; rtt < float64(spec.RTTNs)/1e6 || rtt > float64(spec.RTTNs)/1e6*1.5+5 {
					// Loose: trials start while others are being set up on two cores;
					// the emulator's accuracy is measured in bench/.
					t.Errorf("%s capture: handshake RTT %.3f ms, want %d ms", side.vantage, rtt, spec.RTTNs/1e6)
				}
			}
		})
	}
}
