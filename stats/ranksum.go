package stats

import (
	"math"
	"sort"
)

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
