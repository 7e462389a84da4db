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
	if len(xs) == 0 || resamples < 1 {
		return Interval{Low: math.NaN(), High: math.NaN(), Level: level}
	}
	rng := rand.New(rand.NewPCG(seed, 0x3ea7_b007))
	means := make([]float64, resamples)
	n := len(xs)
	for i := range means {
		sum := 0.0
		for range n {
			sum += xs[rng.IntN(n)]
		}
		means[i] = sum / float64(n)
	}
	sort.Float64s(means)
	alpha := (1 - level) / 2
	return Interval{Low: Quantile(means, alpha), High: Quantile(means, 1-alpha), Level: level}
}
