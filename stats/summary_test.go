package stats

import (
	"math"
	"testing"
)

// TestQuantile checks R's type 7 against values worked by hand: for 1..10,
// position q·9 from the first, so q=0.1 is 1.9, q=0.5 is 5.5, q=0.99 is 9.91.
func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {0.1, 1.9}, {0.25, 3.25}, {0.5, 5.5}, {0.9, 9.1}, {0.99, 9.91}, {1, 10},
	} {
		if got := Quantile(xs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Quantile(1..10, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Quantile([]float64{7}, 0.9); got != 7 {
		t.Errorf("one value: %v", got)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("no values: want NaN")
	}
}

// TestSummarizeByHand: 2, 4, 4, 4, 5, 5, 7, 9 has mean 5, squared deviations
// summing to 32, so a sample standard deviation of sqrt(32/7).
func TestSummarizeByHand(t *testing.T) {
	xs := []float64{9, 4, 2, 5, 4, 7, 4, 5}
	s := Summarize(xs)
	want := Summary{N: 8, Min: 2, P10: 2 + 2*0.7, Median: 4.5, P90: 7 + 2*0.3, P99: 7 + 2*0.93, Max: 9, Mean: 5, Stddev: math.Sqrt(32.0 / 7)}
	for name, pair := range map[string][2]float64{
		"min": {s.Min, want.Min}, "p10": {s.P10, want.P10}, "median": {s.Median, want.Median}, "p90": {s.P90, want.P90},
		"p99": {s.P99, want.P99}, "max": {s.Max, want.Max}, "mean": {s.Mean, want.Mean}, "stddev": {s.Stddev, want.Stddev},
	} {
		if math.Abs(pair[0]-pair[1]) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, pair[0], pair[1])
		}
	}
	if s.N != 8 || xs[0] != 9 {
		t.Errorf("n = %d, sample now %v (must not be modified)", s.N, xs)
	}
	if Summarize(nil) != (Summary{}) {
		t.Error("an empty sample must give the zero Summary")
	}
	if one := Summarize([]float64{3}); one.Stddev != 0 || one.Median != 3 || one.P99 != 3 {
		t.Errorf("one value: %+v", one)
	}
}

func TestMedianAndStddev(t *testing.T) {
	for _, c := range []struct {
		xs     []float64
		median float64
	}{
		{[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}, {[]float64{0.1, 0.2}, 0.15000000000000002},
	} {
		before := append([]float64(nil), c.xs...)
		if got := Median(c.xs); got != c.median {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.median)
		}
		if c.xs[0] != before[0] {
			t.Errorf("Median reordered its input: %v", c.xs)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing: want NaN")
	}
	if got := Stddev([]float64{1, 3}); math.Abs(got-math.Sqrt2) > 1e-12 {
		t.Errorf("Stddev(1, 3) = %v, want sqrt(2)", got)
	}
	if Stddev([]float64{4}) != 0 {
		t.Error("Stddev of one value must be 0")
	}
}

// TestMeanCI95: 10, 12, 14 has mean 12 and standard deviation 2; t(2) = 4.303,
// so the half-width is 4.303·2/sqrt(3) = 4.969.
func TestMeanCI95(t *testing.T) {
	if got := MeanCI95(Summarize([]float64{10, 12, 14})); math.Abs(got-4.303*2/math.Sqrt(3)) > 1e-9 {
		t.Errorf("half-width %v", got)
	}
	if MeanCI95(Summarize([]float64{5})) != 0 {
		t.Error("one value has no interval")
	}
	for df, want := range map[int]float64{1: 12.706, 10: 2.228, 20: 2.086, 25: 2.05, 100: 1.96} {
		if got := TQuantile975(df); got != want {
			t.Errorf("t(%d) = %v, want %v", df, got, want)
		}
	}
}
