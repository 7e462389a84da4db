package flow

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// holeModel is seqSpace kept the plain way: one bool per byte of a window of
// stream offsets, true where the byte is in a hole.
type holeModel struct {
	missing    []bool
	overflowed bool
}

// runs is the model's holes, in increasing order.
func (m *holeModel) runs() []span {
	var out []span
	for i := 0; i < len(m.missing); i++ {
		if !m.missing[i] {
			continue
		}
		j := i
		for j < len(m.missing) && m.missing[j] {
			j++
		}
		out = append(out, span{int64(i), int64(j)})
		i = j
	}
	return out
}

func (m *holeModel) set(s span, v bool) {
	for o := s.start; o < s.end; o++ {
		m.missing[o] = v
	}
}

// add marks s missing and forgets holes past maxHoles: the lowest when the
// new one lies above the rest, the highest when below.
func (m *holeModel) add(s span, below bool) {
	m.set(s, true)
	m.trim(below)
}

func (m *holeModel) trim(dropHighest bool) {
	for r := m.runs(); len(r) > maxHoles; r = m.runs() {
		m.overflowed = true
		if dropHighest {
			m.set(r[len(r)-1], false)
		} else {
			m.set(r[0], false)
		}
	}
}

func (m *holeModel) fill(s span) int64 {
	var n int64
	for o := s.start; o < s.end; o++ {
		if m.missing[o] {
			n++
			m.missing[o] = false
		}
	}
	m.trim(false)
	return n
}

// TestSeqSpaceAgainstModel: random holes added above and below the others and
// random ranges filled, the bytes filled and the holes left compared after
// every step with a byte-per-byte model, past maxHoles too (a fill that splits
// a hole when maxHoles are followed forgets the lowest).
func TestSeqSpaceAgainstModel(t *testing.T) {
	const size = 1 << 14
	rng := rand.New(rand.NewPCG(1, 2))
	overflows := 0
	for trial := range 100 {
		var q seqSpace
		m := holeModel{missing: make([]bool, size)}
		lo, hi := int64(size/2), int64(size/2) // below every hole, past every hole
		for step := range 600 {
			var got, want int64
			// Odd trials add many more holes than they fill: past maxHoles.
			switch op := rng.IntN(10 + 30*(trial%2)); {
			case (op < 4 || op >= 10) && hi < size-40:
				// Holes apart from (or touching) the highest, as addHole is called.
				s := span{hi + rng.Int64N(4), 0}
				s.end = s.start + 1 + rng.Int64N(8)
				q.addHole(s.start, s.end)
				m.add(s, false)
				hi = s.end
			case op < 6 && lo > 40:
				s := span{0, lo - rng.Int64N(4)}
				s.start = s.end - 1 - rng.Int64N(8)
				q.addHoleBelow(s.start, s.end)
				m.add(s, true)
				lo = s.start
			case op < 8 && len(q.holes) > 0:
				// Inside one hole: splits it (past maxHoles, forgets the lowest).
				h := q.holes[rng.IntN(len(q.holes))]
				if h.end-h.start < 3 {
					continue
				}
				s := span{h.start + 1, h.start + 2}
				got, want = q.fill(s.start, s.end), m.fill(s)
			default:
				a := lo - 5 + rng.Int64N(hi-lo+10)
				s := span{max(a, 0), min(a+rng.Int64N(40), size)}
				got, want = q.fill(s.start, s.end), m.fill(s)
			}
			if got != want {
				t.Fatalf("trial %d step %d: filled %d bytes, want %d", trial, step, got, want)
			}
			// (slices.Equal takes no holes, nil or empty, for none.)
			if w := m.runs(); !slices.Equal(q.holes, w) || q.overflowed != m.overflowed {
				t.Fatalf("trial %d step %d: holes %v (overflowed %v), want %v (%v)", trial, step, q.holes, q.overflowed, w, m.overflowed)
			}
		}
		if q.overflowed {
			overflows++
		}
	}
	if overflows == 0 {
		t.Error("no trial had more than maxHoles holes: the test does not reach the limit")
	}
}

// TestSeqSpaceFillAllocatesNothing: filling a hole (a retransmission) reuses
// the slice of holes; a lossy connection did one allocation per retransmission.
func TestSeqSpaceFillAllocatesNothing(t *testing.T) {
	var q seqSpace
	for i := range 100 {
		q.addHole(int64(100*i), int64(100*i+50))
	}
	next := int64(100 * 100)
	allocs := testing.AllocsPerRun(100, func() {
		low := q.holes[0].start
		q.fill(low+10, low+20)      // splits the lowest hole: one more
		q.fill(low, q.holes[1].end) // and fills both halves
		q.addHole(next, next+50)    // one more on top: 100 again
		next += 100
	})
	if allocs > 0.1 {
		t.Errorf("%.1f allocations a fill, want none", allocs)
	}
}
