package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Interval is a confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// Level is the coverage asked for, e.g. 0.95.
	Level float64 `json:"level"`
}

// Contains reports whether x lies in the interval (bounds included).
func (iv Interval) Contains(x float64) bool { return iv.Low <= x && x <= iv.High }

// BootstrapMedianDiff estimates a confidence interval of median(after) -
// median(before) by the percentile bootstrap: each sample is resampled with
// replacement (independently, keeping its size) resamples times and the
// difference of the resamples' medians is taken each time; the interval is the
// (1-level)/2 and (1+level)/2 quantiles of those differences. The same seed gives
// the same interval.
func BootstrapMedianDiff(before, after []float64, resamples int, level float64, seed uint64) Interval {
	if len(before) == 0 || len(after) == 0 || resamples < 1 {
		return Interval{Low: math.NaN(), High: math.NaN(), Level: level}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5b0c_57a7))
	diffs := make([]float64, resamples)
	bufB := make([]float64, len(before))
	bufA := make([]float64, len(after))
	for i := range diffs {
		diffs[i] = resampledMedian(rng, after, bufA) - resampledMedian(rng, before, bufB)
	}
	sort.Float64s(diffs)
	alpha := (1 - level) / 2
	return Interval{Low: Quantile(diffs, alpha), High: Quantile(diffs, 1-alpha), Level: level}
}

func resampledMedian(rng *rand.Rand, xs, buf []float64) float64 {
	for i := range buf {
		buf[i] = xs[rng.IntN(len(xs))]
	}
	return MedianInPlace(buf)
}

// MeanCI95 is the half-width of the 95% confidence interval of the mean of a
// sample summarized by s (Student's t with N-1 degrees of freedom); 0 for fewer
// than two values.
func MeanCI95(s Summary) float64 {
	if s.N < 2 {
		return 0
	}
	return TQuantile975(s.N-1) * s.Stddev / math.Sqrt(float64(s.N))
}

// TQuantile975 is the 97.5% quantile of Student's t with df degrees of freedom:
// a t table's value up to 20, 2.05 from 21 to 29 (the true values run from 2.080
// down to 2.045) and the normal's 1.96 from 30 on.
func TQuantile975(df int) float64 {
	table := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086}
	if df < len(table) {
		return table[df]
	}
	if df < 30 {
		return 2.05
	}
	return 1.96
}
