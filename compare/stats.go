package compare

import (
	"github.com/slowstart/slowstart/stats"
)

// Summary describes one sample, as compare's JSON shows it (package stats
// computes it).
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

// Summarize computes the Summary of xs (xs is not modified).
func Summarize(xs []float64) Summary {
	s := stats.Summarize(xs)
	return Summary{N: s.N, Min: s.Min, Median: s.Median, P90: s.P90, P99: s.P99, Max: s.Max, Mean: s.Mean}
}

// Interval is a confidence interval (stats.Interval).
type Interval = stats.Interval

// RankSum is the result of a Mann-Whitney U test (stats.RankSum).
type RankSum = stats.RankSum
