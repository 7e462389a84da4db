// Package stats holds the statistics slowstart reports: quantiles and summaries of
// a sample, a bootstrap confidence interval of a difference of medians, the
// t-interval of a mean, and the Mann-Whitney rank-sum test. The lab's point
// summaries, compare's before/after verdicts and the probe's run spreads all
// compute their numbers here, so that one sample gives one median everywhere.
//
// It knows nothing of packets, reports or lab rows: callers pass plain float64
// samples. It draws no plots and renders no text.
package stats

import (
	"math"
	"slices"
	"sort"
)

// Summary describes one sample.
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	P10    float64 `json:"p10"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	// Stddev is the sample standard deviation (n-1 in the denominator); 0 for one value.
	Stddev float64 `json:"stddev"`
}

// Summarize computes the Summary of xs; xs is not modified. The quantiles are
// Quantile's (R's type 7).
func Summarize(xs []float64) Summary {
	return SummarizeSorted(sortedCopy(xs))
}

// SummarizeSorted is Summarize of a sample already sorted in increasing order
// (it saves the copy and the sort).
func SummarizeSorted(sorted []float64) Summary {
	if len(sorted) == 0 {
		return Summary{}
	}
	mean := Mean(sorted)
	return Summary{N: len(sorted), Min: sorted[0], P10: Quantile(sorted, 0.1), Median: Quantile(sorted, 0.5),
		P90: Quantile(sorted, 0.9), P99: Quantile(sorted, 0.99), Max: sorted[len(sorted)-1],
		Mean: mean, Stddev: stddevAround(sorted, mean)}
}

// Mean of xs; NaN for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Stddev is the sample standard deviation of xs (n-1 in the denominator); 0 for
// fewer than two values.
func Stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	return stddevAround(xs, Mean(xs))
}

func stddevAround(xs []float64, mean float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// Quantile of sorted xs at q in [0, 1], by linear interpolation between order
// statistics (R's type 7, numpy's default); NaN for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Median of xs (not modified): the middle value, or the mean of the two middle
// values; NaN for none. It equals Quantile(sorted, 0.5) up to the last bit of
// rounding (the two interpolate the same two values differently).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return MedianInPlace(slices.Clone(xs))
}

// MedianInPlace is Median by selection (expected linear time, where sorting takes
// n log n): it reorders xs. Stores of months of probes make samples of thousands,
// resampled ten thousand times.
func MedianInPlace(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	k := n / 2
	selectKth(xs, k)
	if n%2 == 1 {
		return xs[k]
	}
	lower := xs[0]
	for _, x := range xs[1:k] {
		lower = math.Max(lower, x)
	}
	return (lower + xs[k]) / 2
}

// selectKth reorders xs so that xs[k] is the k-th smallest, with nothing larger
// before it and nothing smaller after it (Hoare's selection, middle pivot).
func selectKth(xs []float64, k int) {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		pivot := xs[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s
}
