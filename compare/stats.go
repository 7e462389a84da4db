package compare

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/slowstart/slowstart/lab"
)

// Summary describes one sample.
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
	if len(xs) == 0 {
		return Summary{}
	}
	s := sortedCopy(xs)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{N: len(s), Min: s[0], Median: lab.Quantile(s, 0.5), P90: lab.Quantile(s, 0.9), P99: lab.Quantile(s, 0.99),
		Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// Median of xs (xs is not modified).
func Median(xs []float64) float64 { return lab.Quantile(sortedCopy(xs), 0.5) }

func sortedCopy(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

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
	return Interval{Low: lab.Quantile(diffs, alpha), High: lab.Quantile(diffs, 1-alpha), Level: level}
}

func resampledMedian(rng *rand.Rand, xs, buf []float64) float64 {
	for i := range buf {
		buf[i] = xs[rng.IntN(len(xs))]
	}
	return medianInPlace(buf)
}

// medianInPlace is Median by selection (expected linear time, where sorting
// takes n log n): it reorders xs. Stores of months of probes make samples of
// thousands, resampled ten thousand times.
func medianInPlace(xs []float64) float64 {
	n := len(xs)
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

// RankSum is the result of a Mann-Whitney U (Wilcoxon rank-sum) test.
type RankSum struct {
	// U is the statistic of the first sample: the number of pairs (x, y) with
	// x > y, ties counting one half.
	U float64 `json:"u"`
	// Z is the standardized statistic (normal approximation, tie-corrected, with
	// continuity correction); 0 when Exact.
	Z float64 `json:"z"`
	// P is the two-sided p-value: the chance of a difference at least this large
	// in rank if both samples came from the same distribution.
	P float64 `json:"p"`
	// Exact: P comes from the exact distribution of U (small samples without ties).
	Exact bool `json:"exact"`
	// ProbabilityGreater is U/(n1*n2): the chance that a value of the first sample
	// exceeds one of the second (the common-language effect size).
	ProbabilityGreater float64 `json:"probability_greater"`
}

// exactLimit: below this many pairs (n1*n2) and without ties, the p-value is exact.
const exactLimit = 400

// MannWhitney tests whether x and y come from the same distribution against the
// alternative that one tends to be larger (two-sided). Without ties and with
// n1*n2 < 400 the p-value is exact; otherwise it uses the normal approximation
// with the tie correction of the variance and a continuity correction.
func MannWhitney(x, y []float64) RankSum {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return RankSum{P: math.NaN(), U: math.NaN(), ProbabilityGreater: math.NaN()}
	}
	type obs struct {
		v     float64
		first bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	n := float64(n1 + n2)
	var rankSum1, tieTerm float64
	ties := false
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1 .. j
		for k := i; k < j; k++ {
			if all[k].first {
				rankSum1 += rank
			}
		}
		if t := float64(j - i); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		i = j
	}
	f1, f2 := float64(n1), float64(n2)
	u := rankSum1 - f1*(f1+1)/2
	res := RankSum{U: u, ProbabilityGreater: u / (f1 * f2)}
	if !ties && n1*n2 < exactLimit {
		res.P, res.Exact = exactP(n1, n2, u), true
		return res
	}
	mean := f1 * f2 / 2
	variance := f1 * f2 / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if variance <= 0 { // every value equal
		res.P = 1
		return res
	}
	d := math.Abs(u - mean)
	d = math.Max(d-0.5, 0)
	res.Z = math.Copysign(d/math.Sqrt(variance), u-mean)
	res.P = math.Min(1, math.Erfc(d/math.Sqrt(variance)/math.Sqrt2))
	return res
}

// exactP is the two-sided p-value of U for samples of n1 and n2 without ties:
// twice the tail of the exact distribution of U beyond the observed value.
func exactP(n1, n2 int, u float64) float64 {
	// counts[k] = number of arrangements with U = k, by the recurrence
	// f(n1, n2, k) = f(n1-1, n2, k-n2) + f(n1, n2-1, k).
	maxU := n1 * n2
	prev := make([][]float64, n2+1) // prev[j] is f(i-1, j, .)
	for j := range prev {
		prev[j] = make([]float64, maxU+1)
		prev[j][0] = 1 // f(0, j, 0) = 1
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		for j := 0; j <= n2; j++ {
			cur[j] = make([]float64, maxU+1)
			for k := 0; k <= i*j; k++ {
				var v float64
				if k-j >= 0 {
					v += prev[j][k-j]
				}
				if j > 0 {
					v += cur[j-1][k]
				}
				cur[j][k] = v
			}
		}
		prev = cur
	}
	dist := prev[n2]
	var total float64
	for _, c := range dist {
		total += c
	}
	uHigh := math.Max(u, float64(maxU)-u) // the distribution is symmetric
	var tail float64
	for k := int(math.Ceil(uHigh - 1e-9)); k <= maxU; k++ {
		tail += dist[k]
	}
	return math.Min(1, 2*tail/total)
}
