package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/hoststeal"
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
	meter := hoststeal.Start()
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
	env := NewEnv()
	rows, err := env.RunJobs(ctx, jobs, RunOptions{Parallel: 8, CaptureDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// A trial that only the host's timing upset (a first round cut short by a stalled
	// server or a late release: a lower bound at exactly the configured IW; or a
	// handshake slowed by a stall) is run again, at most twice. A wrong answer is
	// never retried.
	for attempt := 2; attempt <= 3; attempt++ {
		var retry []int
		for i, row := range rows {
			if wrong, timing := checkGroundTruth(ctx, jobs[i].Spec, row); len(wrong) == 0 && len(timing) > 0 {
				retry = append(retry, i)
			}
		}
		if len(retry) == 0 {
			break
		}
		var again []Job
		for _, i := range retry {
			t.Logf("%s: upset by the host's timing; trial %d", jobs[i].Spec.Label(), attempt)
			again = append(again, Job{Spec: jobs[i].Spec, Trial: attempt})
		}
		retried, err := env.RunJobs(ctx, again, RunOptions{Parallel: 8, CaptureDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range retry {
			rows[i] = retried[k]
		}
	}
	// What still misses by timing while the hypervisor took more than
	// hoststeal.NoisyShare of the machine is not checkable here.
	steal := meter.Read()
	var notCheckable int
	for i, row := range rows {
		spec := jobs[i].Spec
		t.Run(spec.Label(), func(t *testing.T) {
			wrong, timing := checkGroundTruth(ctx, spec, row)
			for _, problem := range wrong {
				t.Error(problem)
			}
			notCheckable += steal.Check(t, timing)
		})
	}
	steal.SkipIfNotCheckable(t, notCheckable)
}

// checkGroundTruth lists what is wrong with a ground-truth trial: wrong, the answers
// that are wrong whatever the host did, and timing, what a busy host can cause (a
// lower bound at exactly the configured IW, a handshake RTT out of range).
func checkGroundTruth(ctx context.Context, spec Spec, row Row) (wrong, timing []string) {
	if row.Error != "" {
		return []string{"trial failed: " + row.Error}, nil
	}
	if row.Bytes != spec.SizeBytes {
		wrong = append(wrong, fmt.Sprintf("received %d bytes, want %d", row.Bytes, spec.SizeBytes))
	}
	for _, side := range []struct{ vantage, path string }{{"client", row.ClientPcap}, {"server", row.ServerPcap}} {
		rep, err := analysis.File(ctx, side.path, analysis.Options{})
		if err != nil {
			return append(wrong, err.Error()), timing
		}
		if len(rep.Connections) != 1 {
			return append(wrong, fmt.Sprintf("%s capture: %d connections", side.vantage, len(rep.Connections))), timing
		}
		c := rep.Connections[0]
		if c.Vantage != side.vantage {
			wrong = append(wrong, fmt.Sprintf("%s capture: vantage %q", side.vantage, c.Vantage))
		}
		if iw := c.InitialWindow; iw.Verdict != report.VerdictExact || iw.Segments != spec.IW {
			problem := fmt.Sprintf("%s capture (%s): IW %d %s (%s), want %d exact", side.vantage, filepath.Base(side.path), iw.Segments, iw.Verdict, iw.Reason, spec.IW)
			if iw.Verdict == report.VerdictLowerBound && iw.Segments == spec.IW {
				timing = append(timing, problem)
			} else {
				wrong = append(wrong, problem)
			}
		}
		if c.HandshakeRTTMs == nil {
			wrong = append(wrong, fmt.Sprintf("%s capture: no handshake RTT", side.vantage))
		} else if rtt := *c.HandshakeRTTMs; rtt < float64(spec.RTTNs)/1e6 {
			wrong = append(wrong, fmt.Sprintf("%s capture: handshake RTT %.3f ms, shorter than the %d ms path", side.vantage, rtt, spec.RTTNs/1e6))
		} else if rtt > float64(spec.RTTNs)/1e6*1.5+5 {
			// Loose: trials start while others are being set up on two cores;
			// the emulator's accuracy is measured in bench/.
			timing = append(timing, fmt.Sprintf("%s capture: handshake RTT %.3f ms, want %d ms", side.vantage, rtt, spec.RTTNs/1e6))
		}
	}
	return wrong, timing
}
