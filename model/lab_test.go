package model_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/model"
)

// gridPoint is one point of the no-loss grid the model is checked on.
type gridPoint struct {
	rttMs, rateMbps float64
	segments, iw    int
}

// labGrid spreads about 58 points over RTT 20-300 ms, 1-100 Mbit/s, 3-300 segments and
// IW 3-64: every 7th point of the full product, so each value of each axis meets many
// values of the others.
func labGrid() []gridPoint {
	rtts := []float64{20, 50, 100, 200, 300}
	rates := []float64{1, 5, 20, 100}
	sizes := []int{3, 10, 30, 100, 300}
	iws := []int{3, 10, 32, 64}
	var all []gridPoint
	for _, r := range rtts {
		for _, c := range rates {
			for _, s := range sizes {
				for _, w := range iws {
					all = append(all, gridPoint{r, c, s, w})
				}
			}
		}
	}
	var out []gridPoint
	for i := 0; i < len(all); i += 7 {
		out = append(out, all[i])
	}
	return out
}

func (g gridPoint) spec() lab.Spec {
	return lab.Spec{
		RTTNs:             int64(g.rttMs * 1e6),
		RateBitsPerSecond: int64(g.rateMbps * 1e6),
		QueueBytes:        8 << 20, // no loss: the test is about the no-loss model
		IW:                g.iw,
		SizeBytes:         int64(g.segments) * model.DefaultMSS,
	}
}

func (g gridPoint) params() model.Params {
	s := g.spec()
	return model.Params{
		RTTNs: s.RTTNs, RateBitsPerSecond: s.RateBitsPerSecond, IW: s.IW,
		SizeBytes:   s.SizeBytes + model.LabHeaderBytes(s.SizeBytes),
		HostDelayNs: model.LabHostDelayNs, ServerDelayNs: model.LabServerDelayNs,
	}
}

// within reports whether got is within 5% or 2 ms of want.
func within(got, want float64) bool {
	return math.Abs(got-want) <= max(0.05*want, 2)
}

// TestModelMatchesLab runs the grid in the lab (3 or 5 trials a point, client- and
// server-side captures) and checks at every point that the model's flow completion
// times are within 5% (or 2 ms) of the lab's medians and that its number of HTTP
// rounds is the one the analysis finds in the server-side capture.
func TestModelMatchesLab(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 210 lab trials")
	}
	testroot.Require(t, "network namespaces")
	meter := hoststeal.Start()
	// Short transfers run two at a time, the others eight: a trial's time can be
	// inflated by several ms while the machine sets up other trials' namespaces (the
	// emulator shares two cores with that kernel work), which matters only where 2 ms is
	// a large part of the time.
	grid := labGrid()
	type batch struct {
		parallel int
		jobs     []lab.Job
		points   []int
	}
	short, long := &batch{parallel: 2}, &batch{parallel: 8}
	for i, g := range grid {
		b, trials := long, 3
		if isShort(t, g) {
			b, trials = short, 5
		}
		b.points = append(b.points, i)
		for trial := 1; trial <= trials; trial++ {
			b.jobs = append(b.jobs, lab.Job{Spec: g.spec(), Trial: trial})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := lab.NewEnv()
	pointRows := make([][]lab.Row, len(grid))
	for _, b := range []*batch{long, short} {
		rows, err := env.RunJobs(ctx, b.jobs, lab.RunOptions{Parallel: b.parallel, CaptureDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for k, row := range rows {
			for _, i := range b.points {
				if grid[i].spec().Label() == b.jobs[k].Spec.Label() {
					pointRows[i] = append(pointRows[i], row)
				}
			}
		}
	}
	// A busy host only makes lab trials slower (a stalled server or a late release)
	// or smears their rounds, while a wrong model stays wrong on another look: points
	// that miss are run again, at most three times, with seven fresh trials two at a
	// time (a median and a most common count that a few disturbed trials do not
	// move), and judged on those.
	const retryTrials = 7
	firstProblems := map[int][]string{}
	for attempt := 1; attempt <= 3; attempt++ {
		var retry []lab.Job
		var missed []int
		for gi, g := range grid {
			problems, _, _ := checkModelPoint(ctx, g, pointRows[gi])
			if len(problems) == 0 {
				continue
			}
			missed = append(missed, gi)
			if _, seen := firstProblems[gi]; !seen {
				firstProblems[gi] = problems
			}
			for trial := 1; trial <= retryTrials; trial++ {
				retry = append(retry, lab.Job{Spec: g.spec(), Trial: trial + 10*attempt})
			}
		}
		if len(retry) == 0 {
			break
		}
		rows, err := env.RunJobs(ctx, retry, lab.RunOptions{Parallel: 2, CaptureDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, gi := range missed {
			pointRows[gi] = nil
			for k, row := range rows {
				if retry[k].Spec.Label() == grid[gi].spec().Label() {
					pointRows[gi] = append(pointRows[gi], row)
				}
			}
		}
	}
	// Times and round counts that still miss while the hypervisor took more than
	// hoststeal.NoisyShare of the machine are not checkable here; a failed trial is
	// a failure whatever the host did.
	steal := meter.Read()
	var notCheckable int
	var table strings.Builder
	fmt.Fprintf(&table, "%-40s %9s %9s %9s %9s %6s %6s\n", "point", "paper lab", "model", "user lab", "model", "rounds", "model")
	for gi, g := range grid {
		t.Run(g.spec().Label(), func(t *testing.T) {
			if first, ok := firstProblems[gi]; ok {
				t.Logf("first trials missed (run again): %s", strings.Join(first, "; "))
			}
			problems, line, failed := checkModelPoint(ctx, g, pointRows[gi])
			table.WriteString(line)
			if failed {
				for _, problem := range problems {
					t.Error(problem)
				}
				return
			}
			notCheckable += steal.Check(t, problems)
		})
	}
	t.Logf("model against lab medians:\n%s", table.String())
	steal.SkipIfNotCheckable(t, notCheckable)
}

// checkModelPoint compares the model with a point's lab trials: what disagrees, the
// point's line of the summary table, and whether a trial failed (not a matter of
// timing).
func checkModelPoint(ctx context.Context, g gridPoint, rows []lab.Row) (problems []string, line string, failed bool) {
	spec := g.spec()
	pred, err := model.Simulate(g.params())
	if err != nil {
		return []string{err.Error()}, "", true
	}
	var paper, user []float64
	roundCounts := map[int]int{}
	for _, row := range rows {
		if row.Error != "" {
			return []string{fmt.Sprintf("trial %d failed: %s", row.Trial, row.Error)}, "", true
		}
		paper, user = append(paper, row.FCTPaperMs), append(user, row.FCTUserMs)
		rep, err := analysis.File(ctx, row.ServerPcap, analysis.Options{})
		if err != nil {
			return []string{err.Error()}, "", true
		}
		if len(rep.Connections) != 1 {
			return []string{fmt.Sprintf("trial %d: %d connections in %s", row.Trial, len(rep.Connections), row.ServerPcap)}, "", true
		}
		roundCounts[rep.Connections[0].RoundTrips.HTTP]++
	}
	paperMs, userMs := lab.Summarize(paper).Median, lab.Summarize(user).Median
	labRounds := mostCommon(roundCounts)
	modelRounds := strconv.Itoa(pred.RoundTrips.HTTP)
	if pred.HTTPRoundsMin != pred.HTTPRoundsMax {
		modelRounds = fmt.Sprintf("%d-%d", pred.HTTPRoundsMin, pred.HTTPRoundsMax)
	}
	line = fmt.Sprintf("%-40s %9.1f %9.1f %9.1f %9.1f %6d %6s\n", spec.Label(), paperMs, pred.FCTPaperMs, userMs, pred.FCTUserMs, labRounds, modelRounds)
	if !within(pred.FCTPaperMs, paperMs) {
		problems = append(problems, fmt.Sprintf("FCT (paper): model %.1f ms, lab median %.1f ms (trials %v)", pred.FCTPaperMs, paperMs, paper))
	}
	if !within(pred.FCTUserMs, userMs) {
		problems = append(problems, fmt.Sprintf("FCT (user): model %.1f ms, lab median %.1f ms (trials %v)", pred.FCTUserMs, userMs, user))
	}
	// The model's count, or where it says timing decides (a tail of a few segments
	// after a large round), one of the counts it allows.
	if labRounds < pred.HTTPRoundsMin || labRounds > pred.HTTPRoundsMax {
		problems = append(problems, fmt.Sprintf("HTTP rounds: model %d (%d-%d), lab %d (trials: %v)", pred.RoundTrips.HTTP, pred.HTTPRoundsMin, pred.HTTPRoundsMax, labRounds, roundCounts))
	}
	return problems, line, false
}

// isShort tells the points whose user-felt FCT is under 300 ms.
func isShort(t *testing.T, g gridPoint) bool {
	t.Helper()
	pred, err := model.Simulate(g.params())
	if err != nil {
		t.Fatal(err)
	}
	return pred.FCTUserMs < 300
}

// mostCommon returns the most common key (the smallest on a tie).
func mostCommon(counts map[int]int) int {
	keys := make([]int, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	best := -1
	for _, k := range keys {
		if best < 0 || counts[k] > counts[best] {
			best = k
		}
	}
	return best
}
