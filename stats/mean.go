package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// BootstrapMean estimates a confidence interval of the mean of xs by the
// percentile bootstrap: xs is resampled with replacement (keeping its size)
// resamples times and the mean of each resample taken; the interval is the
// (1-level)/2 and (1+level)/2 quantiles of those means. The same seed gives the
// same interval. For a share, pass 0s and 1s.
func BootstrapMean(xs []float64, resamples int, level float64, seed uint64) Interval {
	return BootstrapWeightedMean(xs, nil, resamples, level, seed)
}

// WeightedMean is the mean of xs weighted by ws (nil: equal weights); NaN when
// the weights sum to 0.
func WeightedMean(xs, ws []float64) float64 {
	if ws == nil {
		if len(xs) == 0 {
			return math.NaN()
		}
		return Mean(xs)
	}
	var sum, total float64
	for i, x := range xs {
		sum += x * ws[i]
		total += ws[i]
	}
	if total <= 0 {
		return math.NaN()
	}
	return sum / total
}

// BootstrapWeightedMean is BootstrapMean of a sample whose values stand for
// different numbers of observations (ws[i] for xs[i], e.g. a row kept of a
// busier hour stands for more connections): each resample draws len(xs)
// values with probabilities proportional to their weights, and its mean is
// the plain mean of the draws. With ws nil every value weighs the same.
func BootstrapWeightedMean(xs, ws []float64, resamples int, level float64, seed uint64) Interval {
	if len(xs) == 0 || resamples < 1 || (ws != nil && len(ws) != len(xs)) {
		return Interval{Low: math.NaN(), High: math.NaN(), Level: level}
	}
	var cumulative []float64 // the running sum of the weights, to draw from
	if ws != nil {
		cumulative = make([]float64, len(ws))
		total := 0.0
		for i, w := range ws {
			total += max(w, 0)
			cumulative[i] = total
		}
		if total <= 0 {
			return Interval{Low: math.NaN(), High: math.NaN(), Level: level}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x3ea7_b007))
	means := make([]float64, resamples)
	n := len(xs)
	for i := range means {
		sum := 0.0
		for range n {
			j := 0
			if cumulative == nil {
				j = rng.IntN(n)
			} else {
				u := rng.Float64() * cumulative[n-1]
				j = min(sort.SearchFloat64s(cumulative, u), n-1)
				// SearchFloat64s finds the first total >= u; a weight of 0 is never drawn.
				for j+1 < n && cumulative[j] == u {
					j++
				}
			}
			sum += xs[j]
		}
		means[i] = sum / float64(n)
	}
	sort.Float64s(means)
	alpha := (1 - level) / 2
	return Interval{Low: Quantile(means, alpha), High: Quantile(means, 1-alpha), Level: level}
}
