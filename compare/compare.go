// Package compare tells whether two sets of measurements of page load times
// differ: a "before" and an "after" sample (probe runs, lab trials or windows of a
// watch store), summarized by median and tail quantiles, with the difference of
// medians, its bootstrap confidence interval and a Mann-Whitney U (rank-sum) test.
// Latency samples are skewed and have outliers, so everything here rests on
// medians and ranks, never on means and t-tests.
//
// It reads the files that slowstart writes (Load) and draws CDF plots (WriteCDF);
// it does not measure anything itself, and it does not read the watch store (the
// command line does, through package watch).
package compare

import (
	"fmt"
	"math"

	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/stats"
)

// Options control a comparison.
type Options struct {
	// Resamples of the bootstrap; 10000 when 0.
	Resamples int
	// Level of the confidence interval; 0.95 when 0.
	Level float64
	// Alpha is the significance level of the test; 0.05 when 0.
	Alpha float64
	// Seed of the bootstrap; the same seed gives the same interval.
	Seed uint64
}

func (o Options) normalized() Options {
	if o.Resamples <= 0 {
		o.Resamples = 10000
	}
	if o.Level <= 0 || o.Level >= 1 {
		o.Level = 0.95
	}
	if o.Alpha <= 0 || o.Alpha >= 1 {
		o.Alpha = 0.05
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Verdicts of a comparison.
const (
	VerdictImprovement  = "improvement"     // after is lower (faster), significantly
	VerdictRegression   = "regression"      // after is higher (slower), significantly
	VerdictNoDifference = "no_difference"   // no significant difference
	VerdictInconclusive = "inconclusive"    // the test and the interval disagree, or too few values
	VerdictDifferent    = "different"       // a significant difference of a metric that is not a time
	VerdictEmpty        = "not_enough_data" // a sample is empty
)

// Schema names the JSON form of a Result (docs/schemas/compare.json).
const Schema = "slowstart.compare/v1"

// Result is a comparison of two samples.
type Result struct {
	Schema string  `json:"schema"` // Schema
	Metric string  `json:"metric"`
	Unit   string  `json:"unit"`
	Before Summary `json:"before"`
	After  Summary `json:"after"`
	// BeforeSource and AfterSource say what each sample was read from.
	BeforeSource string `json:"before_source"`
	AfterSource  string `json:"after_source"`
	// MedianDiff is median(after) - median(before): negative when after is lower.
	MedianDiff float64 `json:"median_diff"`
	// RelativeDiff is MedianDiff / median(before).
	RelativeDiff float64  `json:"relative_diff"`
	CI           Interval `json:"ci"`
	Resamples    int      `json:"bootstrap_resamples"`
	Seed         uint64   `json:"bootstrap_seed"`
	Test         RankSum  `json:"mann_whitney"`
	Alpha        float64  `json:"alpha"`
	Significant  bool     `json:"significant"`
	Verdict      string   `json:"verdict"`
	Sentence     string   `json:"sentence"`
	Notes        []string `json:"notes"`
	// BeforeDrops and AfterDrops are the lab samples' packet drops; absent for
	// probes and stores.
	BeforeDrops *Drops `json:"before_drops,omitempty"`
	AfterDrops  *Drops `json:"after_drops,omitempty"`
}

// Compare compares the after sample with the before sample.
func Compare(before, after *Sample, opts Options) *Result {
	o := opts.normalized()
	r := &Result{Schema: Schema, Metric: after.Metric, Unit: after.Unit, Before: Summarize(before.Values), After: Summarize(after.Values),
		BeforeSource: before.Source, AfterSource: after.Source, Resamples: o.Resamples, Seed: o.Seed, Alpha: o.Alpha,
		Notes: []string{}}
	r.Notes = append(r.Notes, before.Notes...)
	r.Notes = append(r.Notes, after.Notes...)
	if before.Metric != after.Metric {
		r.Notes = append(r.Notes, fmt.Sprintf("the samples measure different things: %s (before) and %s (after)", before.Metric, after.Metric))
	}
	if len(before.Values) == 0 || len(after.Values) == 0 {
		r.Verdict = VerdictEmpty
		r.MedianDiff, r.RelativeDiff = math.NaN(), math.NaN()
		r.CI = Interval{Low: math.NaN(), High: math.NaN(), Level: o.Level}
		r.Test = RankSum{U: math.NaN(), P: math.NaN(), ProbabilityGreater: math.NaN()}
		r.Sentence = "Not enough data: a sample has no values."
		return r
	}
	r.MedianDiff = r.After.Median - r.Before.Median
	if r.Before.Median != 0 {
		r.RelativeDiff = r.MedianDiff / r.Before.Median
	}
	r.CI = stats.BootstrapMedianDiff(before.Values, after.Values, o.Resamples, o.Level, o.Seed)
	r.Test = stats.MannWhitney(after.Values, before.Values)
	ciExcludesZero := !r.CI.Contains(0)
	r.Significant = r.Test.P < o.Alpha && ciExcludesZero
	few := min(len(before.Values), len(after.Values)) < 5
	if few {
		r.Notes = append(r.Notes, "fewer than 5 values in a sample: the test can hardly reach significance; collect more")
	}
	// A metric where less is better (report.Metrics) gets an improvement or a
	// regression; another a difference.
	lowerIsBetter := r.Unit == "ms"
	if m, ok := report.MetricNamed(r.Metric); ok {
		lowerIsBetter = m.Better == report.Lower
	}
	timeMetric := r.Unit == "ms"
	switch {
	case r.Significant && !lowerIsBetter:
		r.Verdict = VerdictDifferent
	case r.Significant && r.MedianDiff < 0:
		r.Verdict = VerdictImprovement
	case r.Significant && r.MedianDiff > 0:
		r.Verdict = VerdictRegression
	case r.Significant: // medians equal, yet the ranks differ: the shapes differ
		r.Verdict = VerdictInconclusive
	case r.Test.P < o.Alpha || ciExcludesZero:
		r.Verdict = VerdictInconclusive
	default:
		r.Verdict = VerdictNoDifference
	}
	r.Sentence = sentence(r, timeMetric)
	r.BeforeDrops, r.AfterDrops = before.Drops, after.Drops
	if d := dropsSentence(r); d != "" {
		r.Sentence += " " + d
	}
	return r
}

// dropsSentence says when the lab samples lost packets on their path, and, when
// one lost clearly more than the other, that the difference comes with those drops:
// the retransmissions' cost is not the change's own (a shallow bottleneck queue
// dropping a larger initial window, say).
func dropsSentence(r *Result) string {
	b, a := r.BeforeDrops, r.AfterDrops
	if b == nil || a == nil || b.Total()+a.Total() == 0 {
		return ""
	}
	describe := func(name string, d *Drops) string {
		s := fmt.Sprintf("%s lost data packets in %d of %d trials (%.1f per trial", name, d.TrialsWithDrops, d.Trials, d.PerTrial())
		if d.Queue > 0 {
			s += fmt.Sprintf("; %d by the full bottleneck queue", d.Queue)
		}
		if d.Loss > 0 {
			s += fmt.Sprintf("; %d by the random loss", d.Loss)
		}
		return s + ")"
	}
	text := fmt.Sprintf("Drops: %s, %s.", describe("BEFORE", b), describe("AFTER", a))
	more, less := "AFTER", "BEFORE"
	if b.PerTrial() > a.PerTrial() {
		more, less = less, more
	}
	moreDrops, lessDrops := a, b
	if more == "BEFORE" {
		moreDrops, lessDrops = b, a
	}
	if moreDrops.PerTrial() >= 2*lessDrops.PerTrial()+0.5 {
		text += fmt.Sprintf(" %s lost clearly more than %s: the difference comes with those drops and their retransmissions, not from the change alone", more, less)
		if moreDrops.Queue > 0 {
			text += " (a deeper --queue shows the path without the queue's)"
		}
		text += "."
	}
	return text
}

// FormatP writes a p-value as people read it: "p < 0.001", "p = 0.03".
func FormatP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "p = n/a"
	case p < 0.001:
		return "p < 0.001"
	case p < 0.01:
		return fmt.Sprintf("p = %.3f", p)
	default:
		return fmt.Sprintf("p = %.2f", p)
	}
}

func formatValue(x float64, unit string) string {
	a := math.Abs(x)
	var s string
	switch {
	case a >= 100 || a == math.Trunc(a):
		s = fmt.Sprintf("%.0f", x)
	case a >= 10:
		s = fmt.Sprintf("%.1f", x)
	default:
		s = fmt.Sprintf("%.2f", x)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func sentence(r *Result, timeMetric bool) string {
	unit := r.Unit
	mag := math.Abs(r.MedianDiff)
	// The interval is the difference's (Result.CI), said once beside it; the
	// sentence gives the verdict, the size and the test.
	stats := fmt.Sprintf("(%s)", FormatP(r.Test.P))
	word := "lower"
	if r.MedianDiff > 0 {
		word = "higher"
	}
	if timeMetric {
		word = "faster"
		if r.MedianDiff > 0 {
			word = "slower"
		}
	}
	rel := ""
	if r.RelativeDiff != 0 && !math.IsNaN(r.RelativeDiff) {
		rel = fmt.Sprintf(", %.0f%%", math.Abs(r.RelativeDiff)*100)
	}
	switch r.Verdict {
	case VerdictImprovement:
		return fmt.Sprintf("AFTER is %s by %s%s %s: a real improvement.", word, formatValue(mag, unit), rel, stats)
	case VerdictRegression:
		return fmt.Sprintf("AFTER is %s by %s%s %s: a real regression.", word, formatValue(mag, unit), rel, stats)
	case VerdictDifferent:
		return fmt.Sprintf("AFTER is %s by %s%s %s: a real difference.", word, formatValue(mag, unit), rel, stats)
	case VerdictInconclusive:
		if r.MedianDiff == 0 {
			return fmt.Sprintf("The medians are equal but the distributions differ %s: look at the CDF plot.", stats)
		}
		return fmt.Sprintf("AFTER looks %s by %s %s, but the test and the interval disagree: inconclusive; collect more samples.", word, formatValue(mag, unit), stats)
	}
	if r.MedianDiff == 0 {
		return fmt.Sprintf("No significant difference: the medians are equal %s.", stats)
	}
	return fmt.Sprintf("No significant difference: AFTER's median is %s by %s, within the noise %s.", word, formatValue(mag, unit), stats)
}
