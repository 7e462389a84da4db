package probe

import (
	"fmt"
	"slices"

	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/stats"
)

// summarizeRuns sums up the runs of res: the IW of each run's final connection,
// its spread, and the flags for windows that grow from run to run or disagree.
func summarizeRuns(res *Result) *report.RunSummary {
	s := &report.RunSummary{Runs: len(res.Runs), IWSegments: []int{}, IWVerdicts: []string{}, Notes: []string{}}
	var rtts, firsts, lasts []float64
	for run := range res.Runs {
		c := res.Final(run)
		iw, verdict := 0, report.VerdictNone
		if c.InitialWindow != nil {
			iw, verdict = c.InitialWindow.Segments, c.InitialWindow.Verdict
		}
		s.IWSegments = append(s.IWSegments, iw)
		s.IWVerdicts = append(s.IWVerdicts, verdict)
		if c.HandshakeRTTMs != nil {
			rtts = append(rtts, *c.HandshakeRTTMs)
		}
		if t := c.ClientTiming; t != nil {
			firsts = append(firsts, t.FirstByteAtMs)
			lasts = append(lasts, t.LastByteAtMs)
		}
	}
	s.HandshakeRTTMs, s.FirstByteMs, s.LastByteMs = spread(rtts), spread(firsts), spread(lasts)
	summarizeWindows(s)
	return s
}

// summarizeWindows fills the IW statistics and flags from s.IWSegments and
// s.IWVerdicts. Only exact readings count toward growth and disagreement: lower
// bounds of different sizes are no evidence of different windows.
func summarizeWindows(s *report.RunSummary) {
	var all, exact []int
	for i, n := range s.IWSegments {
		if n > 0 {
			all = append(all, n)
		}
		if n > 0 && s.IWVerdicts[i] == report.VerdictExact {
			exact = append(exact, n)
		}
	}
	if len(all) == 0 {
		return
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	s.IWMin = sorted[0]
	s.IWSpread = sorted[len(sorted)-1] - sorted[0]
	windows := make([]float64, len(sorted))
	for i, n := range sorted {
		windows[i] = float64(n)
	}
	s.IWMedian = stats.Median(windows)
	s.IWMode = mode(sorted)
	if len(exact) < 2 || slices.Min(exact) == slices.Max(exact) {
		return
	}
	nonDecreasing := true
	for i := 1; i < len(exact); i++ {
		if exact[i] < exact[i-1] {
			nonDecreasing = false
		}
	}
	if nonDecreasing {
		s.Growing = true
		s.Notes = append(s.Notes, fmt.Sprintf("the window grew from run to run (%d to %d segments): the server caches route metrics between connections (net.ipv4.tcp_no_metrics_save=0), so only the first run is a first visit; %d is the IW a new visitor gets",
			exact[0], exact[len(exact)-1], exact[0]))
		return
	}
	s.Disagree = true
	s.Notes = append(s.Notes, fmt.Sprintf("runs saw different windows (%s segments) with no trend: the name leads to several servers with mixed settings (a fleet behind a load balancer, or anycast)", joinInts(distinct(exact))))
}

// mode is the most frequent value of sorted xs; the smallest one on a tie.
func mode(sorted []int) int {
	best, bestCount := sorted[0], 0
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		if j-i > bestCount {
			best, bestCount = sorted[i], j-i
		}
		i = j
	}
	return best
}

func distinct(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func joinInts(xs []int) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(x)
	}
	return s
}

// spread summarizes xs.
func spread(xs []float64) report.Spread {
	if len(xs) == 0 {
		return report.Spread{}
	}
	return report.Spread{N: len(xs), Min: slices.Min(xs), Max: slices.Max(xs), Median: stats.Median(xs), Stddev: stats.Stddev(xs)}
}
