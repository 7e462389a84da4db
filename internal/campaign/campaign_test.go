package campaign

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/hoststeal"
)

// suiteSeed and suiteTrials are the fixed sample the suite runs: the same trials
// every run (bench/truth runs the thousands with other seeds).
const (
	suiteSeed   = 20261127
	suiteTrials = 240
)

// TestCampaign runs the fixed sample of the truth campaign: every reading, from
// both ends of every trial, holds the server kernel's own initial window (an exact
// reading equal to it, a lower bound at most it, a range around it). A trial with
// a wrong reading keeps its captures in $SLOWSTART_KEEP (or the test's log says
// how to run it again).
func TestCampaign(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the lab needs root")
	}
	meter := hoststeal.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	keepDir := os.Getenv("SLOWSTART_KEEP")
	if keepDir == "" {
		keepDir = t.TempDir()
	}
	tally, results, err := Run(ctx, Options{Seed: suiteSeed, Trials: suiteTrials, Parallel: 4, KeepDir: keepDir})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	tally.Write(&out)
	t.Logf("steal %s\n%s", meter.Read(), out.String())
	for _, r := range results {
		for _, x := range r.Readings {
			if x.Wrong != "" {
				t.Errorf("%s (truth %d from the %s; go run ./bench/truth -seed %d -first %d -trials 1): %s %s reading: %s",
					r.Name, r.TruthIW, r.TruthSource, suiteSeed, r.Index, x.Vantage, x.Source, x.Wrong)
			}
		}
	}
	// The sample must be a sample: most trials run through, and the readings span
	// the verdicts (a campaign whose trials all failed, or that reads nothing
	// exact, checks nothing).
	if tally.Failed > tally.Trials/10 {
		t.Errorf("%d of %d trials did not run through", tally.Failed, tally.Trials)
		for _, r := range results {
			if r.Error != "" {
				t.Logf("%s: %s", r.Name, r.Error)
			}
		}
	}
	if tally.ExactRight == 0 || tally.BoundHolds == 0 || tally.RangeHolds == 0 {
		t.Errorf("the sample read %d exact, %d bounds and %d ranges: it covers too little", tally.ExactRight, tally.BoundHolds, tally.RangeHolds)
	}
}

// TestDrawIsReproducible: a trial is its seed and index: the same pair draws the
// same spec, another index another one, and every drawn spec is one the lab runs.
func TestDrawIsReproducible(t *testing.T) {
	seen := map[string]bool{}
	for i := range 500 {
		a, b := Draw(7, i), Draw(7, i)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("trial %d drawn twice differs:\n%+v\n%+v", i, a, b)
		}
		s := a
		if err := s.Normalize(); err != nil {
			t.Errorf("trial %d: %+v: %v", i, a, err)
		}
		seen[s.Label()+s.Server+s.Client+s.CC] = true
	}
	if len(seen) < 400 {
		t.Errorf("500 trials drew only %d distinct specs", len(seen))
	}
	// The space is covered: each dimension takes each of its values somewhere.
	var servers, ccs, tls = map[string]bool{}, map[string]bool{}, map[string]bool{}
	var advmss, ipv6, noTS, writes, loss, reorder bool
	for i := range 500 {
		s := Draw(7, i)
		servers[s.Server], ccs[s.CC], tls[s.TLS] = true, true, true
		advmss = advmss || s.ServerAdvMSS > 0
		ipv6 = ipv6 || s.IPv6
		noTS = noTS || s.NoTimestamps
		writes = writes || s.WriteChunkBytes > 0
		loss = loss || s.LossRate > 0
		reorder = reorder || s.Reorder
	}
	if len(servers) != 4 || len(ccs) != 3 || len(tls) != 3 || !advmss || !ipv6 || !noTS || !writes || !loss || !reorder {
		t.Errorf("500 trials miss part of the space: servers %v, cc %v, TLS %v, advmss %v, IPv6 %v, no timestamps %v, writes %v, loss %v, reorder %v",
			servers, ccs, tls, advmss, ipv6, noTS, writes, loss, reorder)
	}
}
