package compare

import "testing"

func TestSummarize(t *testing.T) {
	xs := make([]float64, 0, 101)
	for i := 100; i >= 0; i-- {
		xs = append(xs, float64(i))
	}
	s := Summarize(xs)
	if s.N != 101 || s.Median != 50 || s.P90 != 90 || s.P99 != 99 || s.Min != 0 || s.Max != 100 || s.Mean != 50 {
		t.Errorf("%+v", s)
	}
	if xs[0] != 100 {
		t.Error("Summarize sorted its input")
	}
}
