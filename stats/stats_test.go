package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMannWhitneyTextbook checks the classic example (SciPy's documentation of
// mannwhitneyu, from Conover): ages of 5 men and 4 women, U = 17, exact two-sided
// p = 14/126 = 0.1111, asymptotic p (continuity-corrected) = 0.11135.
func TestMannWhitneyTextbook(t *testing.T) {
	males := []float64{19, 22, 16, 29, 24}
	females := []float64{20, 11, 17, 12}
	r := MannWhitney(males, females)
	if r.U != 17 || !r.Exact {
		t.Fatalf("U = %v exact %v, want 17 exact", r.U, r.Exact)
	}
	if math.Abs(r.P-14.0/126) > 1e-12 {
		t.Errorf("exact p = %.6f, want %.6f", r.P, 14.0/126)
	}
	// The other way round: U' = n1*n2 - U, same p.
	if r2 := MannWhitney(females, males); r2.U != 3 || math.Abs(r2.P-r.P) > 1e-12 {
		t.Errorf("swapped: U = %v p = %v", r2.U, r2.P)
	}
	// A tie forces the normal approximation.
	tied := append([]float64{}, males...)
	tied[0] = 20 // ties with a female's 20
	rt := MannWhitney(tied, females)
	if rt.Exact {
		t.Fatal("with a tie the p-value should come from the normal approximation")
	}
	if want := pairsU(tied, females); rt.U != want {
		t.Errorf("tied U = %v, want %v by counting pairs", rt.U, want)
	}
}

// pairsU counts the pairs x > y, ties as one half: U by its definition.
func pairsU(x, y []float64) float64 {
	var u float64
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	return u
}

// TestMannWhitneyAsymptotic checks the normal approximation against values
// computed by hand: for the textbook example without ties, mean 10, variance
// 5*4*10/12, z = (17-10-0.5)/sqrt(16.667) = 1.5922, p = 0.11135 (SciPy's
// method="asymptotic" gives 0.11134688653314041).
func TestMannWhitneyAsymptotic(t *testing.T) {
	x := make([]float64, 0, 25)
	y := make([]float64, 0, 20)
	// Large enough for the approximation (n1*n2 >= 400): two shifted grids.
	for i := range 25 {
		x = append(x, float64(i)+0.25)
	}
	for i := range 20 {
		y = append(y, float64(i)+3.5)
	}
	r := MannWhitney(x, y)
	if r.Exact {
		t.Fatal("n1*n2 = 500 should use the normal approximation")
	}
	if want := pairsU(x, y); r.U != want {
		t.Fatalf("U = %v, want %v", r.U, want)
	}
	n1, n2 := 25.0, 20.0
	sigma := math.Sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
	z := (math.Abs(r.U-n1*n2/2) - 0.5) / sigma
	if want := math.Erfc(z / math.Sqrt2); math.Abs(r.P-want) > 1e-12 {
		t.Errorf("p = %v, want %v", r.P, want)
	}
	// The value quoted for the textbook example.
	zt := (17 - 10 - 0.5) / math.Sqrt(5*4*10/12.0)
	if p := math.Erfc(zt / math.Sqrt2); math.Abs(p-0.11134688653314041) > 1e-9 {
		t.Errorf("the hand formula gives %v", p)
	}
}

// TestMannWhitneyTieCorrection: with many ties the variance shrinks by
// sum(t^3-t)/(n(n-1)); check against the formula on a sample of small integers.
func TestMannWhitneyTieCorrection(t *testing.T) {
	x := []float64{1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 1, 2, 3, 4, 2, 3}
	y := []float64{2, 3, 3, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 7, 7, 3, 4, 5, 6, 5, 4}
	r := MannWhitney(x, y)
	counts := map[float64]float64{}
	for _, v := range append(append([]float64{}, x...), y...) {
		counts[v]++
	}
	n1, n2 := float64(len(x)), float64(len(y))
	n := n1 + n2
	var tie float64
	for _, c := range counts {
		tie += c*c*c - c
	}
	variance := n1 * n2 / 12 * ((n + 1) - tie/(n*(n-1)))
	z := (math.Abs(r.U-n1*n2/2) - 0.5) / math.Sqrt(variance)
	if want := math.Erfc(z / math.Sqrt2); math.Abs(r.P-want) > 1e-12 {
		t.Errorf("p = %v, want %v", r.P, want)
	}
	if r.P > 0.01 {
		t.Errorf("clearly shifted samples: p = %v", r.P)
	}
	if r := MannWhitney([]float64{5, 5, 5}, []float64{5, 5}); r.P != 1 {
		t.Errorf("all equal: p = %v, want 1", r.P)
	}
}

// TestExactDistribution: the exact p-values of all arrangements of 3 and 3
// without ties: U = 9 (or 0) occurs 1 time in 20, so p = 2/20.
func TestExactDistribution(t *testing.T) {
	if p := exactP(3, 3, 9); math.Abs(p-0.1) > 1e-12 {
		t.Errorf("p(U=9 | 3,3) = %v, want 0.1", p)
	}
	if p := exactP(3, 3, 0); math.Abs(p-0.1) > 1e-12 {
		t.Errorf("p(U=0 | 3,3) = %v, want 0.1", p)
	}
	// U >= 8: arrangements with U 8 or 9: 1 + 1 = 2, p = 4/20.
	if p := exactP(3, 3, 8); math.Abs(p-0.2) > 1e-12 {
		t.Errorf("p(U=8 | 3,3) = %v, want 0.2", p)
	}
	if p := exactP(3, 3, 4.5); p != 1 {
		t.Errorf("p at the center = %v, want 1", p)
	}
}

// TestBootstrapCoverage draws many samples from a lognormal (skewed like load
// times) whose median is known, and checks that the 95% interval of the
// difference of medians of two samples from it covers 0 (the true difference)
// about 95% of the time; then shifts one sample and checks the interval covers
// the true shift as often.
func TestBootstrapCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	draw := func(n int, shift float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = 300*math.Exp(0.3*rng.NormFloat64()) + shift
		}
		return xs
	}
	const trials = 300
	for _, shift := range []float64{0, -100} {
		covered := 0
		for i := range trials {
			iv := BootstrapMedianDiff(draw(40, 0), draw(40, shift), 1000, 0.95, uint64(i+1))
			if iv.Contains(shift) {
				covered++
			}
		}
		rate := float64(covered) / trials
		t.Logf("shift %v ms: the 95%% bootstrap interval covered the true difference in %.1f%% of %d trials", shift, 100*rate, trials)
		// The percentile bootstrap of a median is a little liberal at n = 40; 3
		// standard errors of a binomial at 300 trials is about 4%.
		if rate < 0.88 || rate > 0.995 {
			t.Errorf("coverage %.3f, want about 0.95", rate)
		}
	}
}

// TestBootstrapSeeded: the same seed gives the same interval; another seed a
// slightly different one.
func TestBootstrapSeeded(t *testing.T) {
	a := []float64{310, 290, 305, 330, 280, 300, 295, 340, 315, 299}
	b := []float64{210, 190, 205, 230, 180, 200, 195, 240, 215, 199}
	i1 := BootstrapMedianDiff(a, b, 10000, 0.95, 42)
	i2 := BootstrapMedianDiff(a, b, 10000, 0.95, 42)
	if i1 != i2 {
		t.Fatalf("same seed, different intervals: %+v %+v", i1, i2)
	}
	if i1.Contains(0) || i1.High > -50 || i1.Low < -150 {
		t.Errorf("interval %+v for a 100 ms drop", i1)
	}
}

// TestMedianInPlace checks selection against sorting on random samples with ties.
func TestMedianInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		n := 1 + rng.IntN(60)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(rng.IntN(20)) // many ties
		}
		want := Quantile(sortedCopy(xs), 0.5)
		if got := MedianInPlace(append([]float64(nil), xs...)); got != want {
			t.Fatalf("trial %d, %v: median %v, want %v", trial, xs, got, want)
		}
	}
}

// BenchmarkBootstrapLarge: a month of 5-minute probes on each side.
func BenchmarkBootstrapLarge(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float64, 8640), make([]float64, 8640)
	for i := range x {
		x[i], y[i] = 500+100*rng.ExpFloat64(), 480+100*rng.ExpFloat64()
	}
	for b.Loop() {
		BootstrapMedianDiff(x, y, 1000, 0.95, 1)
	}
}
