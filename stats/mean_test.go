package stats

import (
	"math"
	"testing"
)

// TestBootstrapMean: the interval of a sample's mean holds the mean, is
// narrower for a larger sample of the same spread, is the same for the same
// seed, and is one point for a constant sample.
func TestBootstrapMean(t *testing.T) {
	small := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	var large []float64
	for range 20 {
		large = append(large, small...)
	}
	a := BootstrapMean(small, 2000, 0.95, 7)
	b := BootstrapMean(large, 2000, 0.95, 7)
	if !a.Contains(5.5) || !b.Contains(5.5) {
		t.Errorf("intervals %+v and %+v miss the mean 5.5", a, b)
	}
	if b.High-b.Low >= a.High-a.Low {
		t.Errorf("the larger sample's interval %+v is not narrower than %+v", b, a)
	}
	// The mean of 10 values with sd 3.03 has a standard error of about 0.96: a
	// 95% interval about 1.9 on either side of the mean.
	if w := a.High - a.Low; w < 2.5 || w > 4.5 {
		t.Errorf("interval width %.2f for the small sample, want about 3.8", w)
	}
	if again := BootstrapMean(small, 2000, 0.95, 7); again != a {
		t.Errorf("same seed, interval %+v then %+v", a, again)
	}
	if c := BootstrapMean([]float64{2, 2, 2}, 100, 0.95, 1); c.Low != 2 || c.High != 2 {
		t.Errorf("constant sample: %+v", c)
	}
	if e := BootstrapMean(nil, 100, 0.95, 1); !math.IsNaN(e.Low) {
		t.Errorf("empty sample: %+v", e)
	}
}

// TestBootstrapWeightedMean: a value that stands for nine observations pulls
// the interval as nine copies of it would, and one of weight 0 is never drawn.
func TestBootstrapWeightedMean(t *testing.T) {
	xs := []float64{0, 10, 100}
	ws := []float64{1, 9, 0}
	if m := WeightedMean(xs, ws); m != 9 {
		t.Errorf("weighted mean %v, want 9", m)
	}
	iv := BootstrapWeightedMean(xs, ws, 4000, 0.95, 3)
	if iv.High > 10 || iv.Low < 0 || !iv.Contains(9) {
		t.Errorf("interval %+v: want inside [0, 10] around 9 (the 100 weighs nothing)", iv)
	}
	if !math.IsNaN(BootstrapWeightedMean(xs, []float64{0, 0, 0}, 10, 0.95, 1).Low) {
		t.Error("weights of 0 gave an interval")
	}
}
