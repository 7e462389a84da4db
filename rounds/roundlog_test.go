package rounds

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/slowstart/slowstart/internal/fieldcodec"
)

// randomRound fills every field of a Round, exported or not, by reflection: a
// field the codec forgets then comes back different. Half the fields are left
// at zero, and some values are extremes, so that both the bitmap's absent fields
// and the wrapping differences are exercised.
func randomRound(rng *rand.Rand) Round {
	var r Round
	fill(reflect.ValueOf(&r).Elem(), rng)
	return r
}

func fill(v reflect.Value, rng *rand.Rand) {
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
		if f.Kind() != reflect.Struct && rng.IntN(2) == 0 {
			continue
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(randomInt(rng))
		case reflect.Uint32:
			f.SetUint(uint64(rng.Uint32()))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString(string(rune('a'+rng.IntN(26))) + "bc")
		case reflect.Slice:
			n := 1 + rng.IntN(70)
			s := reflect.MakeSlice(f.Type(), n, n)
			for j := range s.Len() {
				s.Index(j).SetInt(int64(int32(rng.Uint32())))
			}
			f.Set(s)
		case reflect.Struct:
			fill(f, rng)
		default:
			panic("roundlog_test: no filler for a field of kind " + f.Kind().String() + ": add one, and the field to visitRound")
		}
	}
}

func randomInt(rng *rand.Rand) int64 {
	switch rng.IntN(6) {
	case 0:
		return math.MaxInt64
	case 1:
		return math.MinInt64
	case 2:
		return -rng.Int64N(1 << 20)
	}
	return rng.Int64N(1 << uint(rng.IntN(63)))
}

// TestRoundCodecEveryField encodes rounds with every field set and decodes them
// back: a field added to Round and not to visitRound fails here.
func TestRoundCodecEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var encPred, decPred roundPredictor
	var buf []byte
	var want []Round
	for i := range 2000 {
		r := randomRound(rng)
		want = append(want, r)
		buf = appendRound(buf, &r, i, &encPred)
	}
	for i := range want {
		var got Round
		n := decodeRound(buf, &got, i, want[i].StartOffset, &decPred)
		buf = buf[n:]
		if !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("round %d decoded as\n%+v\nwant\n%+v", i, got, want[i])
		}
	}
	if len(buf) != 0 {
		t.Errorf("%d bytes left after decoding every round", len(buf))
	}
	var c fieldcodec.Codec
	c.Encode(nil, roundWords)
	var r Round
	visitRound(&c, &r, 0, &roundPredictor{})
	if c.Fields() > 64*roundWords {
		t.Errorf("visitRound visits %d fields; its bitmap has room for %d", c.Fields(), 64*roundWords)
	}
}

// TestRoundLog checks the log against a plain slice: rounds appended, the older
// ones encoded a few at a time, Lost counted before and after a round was
// encoded, and a labeled set put back.
func TestRoundLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var l roundLog
	var want []Round
	for i := range 500 {
		r := randomRound(rng)
		*l.AppendNew(r.StartOffset, i-rng.IntN(8)) = r // as the tracker fills it
		want = append(want, r)
		if rng.IntN(3) == 0 {
			l.freeze(i - rng.IntN(4))
		}
		for range rng.IntN(3) {
			k := rng.IntN(len(want))
			l.AddLost(k)
			want[k].Lost++
		}
		if k := l.frozen; k < l.Len() {
			l.Open(k).FirstAckNs++
			want[k].FirstAckNs++
		}
		if got := l.Last(); !reflect.DeepEqual(*got, want[len(want)-1]) {
			t.Fatalf("after round %d: the last round is\n%+v\nwant\n%+v", i, *got, want[len(want)-1])
		}
		if k := rng.IntN(len(want)); l.Start(k) != want[k].StartOffset {
			t.Fatalf("round %d starts at %d, want %d", k, l.Start(k), want[k].StartOffset)
		}
	}
	if l.frozen == 0 {
		t.Fatal("no round was encoded")
	}
	if got := l.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the log holds other rounds than those appended")
	}
	labeled := l.All()
	labeled[0].Limit = "cwnd"
	l.Replace(labeled)
	if l.frozen != 0 || l.Len() != len(want) || l.All()[0].Limit != "cwnd" || l.Start(len(want)-1) != want[len(want)-1].StartOffset {
		t.Errorf("after Replace: %d encoded, %d rounds, first limit %q", l.frozen, l.Len(), l.All()[0].Limit)
	}
}

// TestRoundOf holds roundOf to a count of the rounds starting at or before the
// byte, for bytes before, inside, at the start of and past every round (the
// latest two, tried first, among them), with rounds that start at the same
// byte (a round of only resent data starts where the one before did).
func TestRoundOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 3, 7, 300} {
		var tr Tracker
		start := int64(100)
		var starts []int64
		for range n {
			tr.log.AppendNew(start, 0)
			starts = append(starts, start)
			start += int64(rng.IntN(3000)) // zero at times: two rounds at one byte
		}
		check := func(how string) {
			for x := int64(-1); x <= start+2; x++ {
				want := 0
				for _, s := range starts {
					if s <= x {
						want++
					}
				}
				if got := tr.roundOf(x); got != want {
					t.Fatalf("%d rounds starting at %v (%s): roundOf(%d) = %d, want %d", n, starts[:min(n, 8)], how, x, got, want)
				}
			}
		}
		check("appended")
		// Label puts back a labeled set of the same rounds; a set of
		// fewer is put back here too (the log then ends earlier).
		tr.log.Replace(tr.log.All())
		check("replaced")
		starts = starts[:n/2]
		tr.log.Replace(tr.log.All()[:n/2])
		check("replaced by fewer")
	}
}
