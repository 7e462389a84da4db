package flow

import (
	"slices"
	"sort"
)

// span is a range of stream offsets [start, end).
type span struct{ start, end int64 }

// maxHoles bounds the holes a direction follows. Past it the lowest hole is
// forgotten: bytes that fill it later count as retransmitted, not as new.
const maxHoles = 256

// seqSpace remembers which stream bytes below a direction's highest byte the
// capture has not seen: holes, in increasing order, not overlapping. Captures rarely
// have more than a few at a time, so a sorted slice is enough.
type seqSpace struct {
	holes      []span
	overflowed bool
}

// addHole records that [start, end) was not seen; it lies beyond every hole so far.
func (q *seqSpace) addHole(start, end int64) {
	if end <= start {
		return
	}
	if n := len(q.holes); n > 0 && q.holes[n-1].end == start {
		q.holes[n-1].end = end
		return
	}
	if len(q.holes) == maxHoles {
		q.forgetLowest()
	}
	q.holes = append(q.holes, span{start, end})
}

// forgetLowest forgets the lowest hole, to follow no more than maxHoles:
// bytes that fill it later count as retransmitted, not as new.
func (q *seqSpace) forgetLowest() {
	n := copy(q.holes, q.holes[1:])
	q.holes = q.holes[:n]
	q.overflowed = true
}

// addHoleBelow records that [start, end) was not seen; it lies below every hole so
// far.
func (q *seqSpace) addHoleBelow(start, end int64) {
	if end <= start {
		return
	}
	if len(q.holes) > 0 && q.holes[0].start == end {
		q.holes[0].start = start
		return
	}
	q.holes = slices.Insert(q.holes, 0, span{start, end})
	if len(q.holes) > maxHoles {
		q.holes = q.holes[:maxHoles]
		q.overflowed = true
	}
}

// fill records that [start, end) was seen and returns how many of those bytes
// were in holes (seen now for the first time). The holes it touches are
// replaced in place by what is left of them (at most two: below start and
// past end), so a lossy connection's many retransmissions allocate nothing.
func (q *seqSpace) fill(start, end int64) int64 {
	h := q.holes
	if end <= start || len(h) == 0 {
		return 0
	}
	// i: the first hole that ends past start (holes are sorted and apart).
	i := sort.Search(len(h), func(m int) bool { return h[m].end > start })
	// j: the first hole from i on that begins at or past end.
	j := i
	var filled int64
	for j < len(h) && h[j].start < end {
		filled += min(h[j].end, end) - max(h[j].start, start)
		j++
	}
	if i == j {
		return 0
	}
	var left [2]span
	n := 0
	if h[i].start < start {
		left[n] = span{h[i].start, start}
		n++
	}
	if end < h[j-1].end {
		left[n] = span{end, h[j-1].end}
		n++
	}
	q.holes = slices.Replace(h, i, j, left[:n]...)
	if len(q.holes) > maxHoles { // a hole split in two
		q.forgetLowest()
	}
	return filled
}

// missing is the number of bytes in holes.
func (q *seqSpace) missing() int64 {
	var n int64
	for _, h := range q.holes {
		n += h.end - h.start
	}
	return n
}

// missingBelow is the number of bytes in holes below offset limit.
func (q *seqSpace) missingBelow(limit int64) int64 {
	var n int64
	for _, h := range q.holes {
		if h.start >= limit {
			break
		}
		n += min(h.end, limit) - h.start
	}
	return n
}
