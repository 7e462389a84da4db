package report

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestMillionthsAsStrconv: where appendMillionths writes a float, it writes
// strconv's shortest 'f' form byte for byte; it takes the times in milliseconds
// made from nanoseconds, and leaves the rest to strconv.
func TestMillionthsAsStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(v float64, mustTake bool) {
		t.Helper()
		got, ok := appendMillionths(nil, v)
		if !ok {
			if mustTake {
				t.Fatalf("%v (%b) not taken", v, math.Float64bits(v))
			}
			return
		}
		if want := strconv.FormatFloat(v, 'f', -1, 64); string(got) != want {
			t.Fatalf("%v written %q, strconv %q", v, got, want)
		}
	}
	for _, ns := range []int64{1, 9, 10, 999, 1000, 1e6 - 1, 1e6, 1e6 + 1, 123456789, 1e9, 1e12, 1e15 - 1, 999999999999999,
		476173260, 57425622286541, 3600e9, 86400e9} {
		check(float64(ns)/1e6, true)
		check(-float64(ns)/1e6, true)
	}
	for range 300_000 {
		// Nanoseconds of every magnitude up to 10^15 (11 days), as ms.
		ns := rng.Int64N(int64(math.Pow(10, float64(1+rng.IntN(15)))))
		if ns == 0 {
			continue
		}
		check(float64(ns)/1e6, true)
		// Any float: taken or not, what is taken is strconv's.
		check(rng.Float64()*math.Pow(10, float64(rng.IntN(24)-8)), false)
		check(float64(ns)/1e6*(1+1e-15), false)
		check(float64(ns)/1e9, false)
		check(float64(ns)/3, false)
	}
	for _, v := range []float64{0, math.Copysign(0, -1), 1e-7, 5e-7, 1e15, 1e21, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, 0.3, 1.0 / 3} {
		check(v, false)
	}
	if _, ok := appendMillionths(nil, math.Copysign(0, -1)); ok {
		t.Error("-0 taken: strconv writes its sign")
	}
}
