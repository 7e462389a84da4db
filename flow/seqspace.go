package flow

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
		copy(q.holes, q.holes[1:])
		q.holes = q.holes[:maxHoles-1]
		q.overflowed = true
	}
	q.holes = append(q.holes, span{start, end})
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
	q.holes = append([]span{{start, end}}, q.holes...)
	if len(q.holes) > maxHoles {
		q.holes = q.holes[:maxHoles]
		q.overflowed = true
	}
}

// fill records that [start, end) was seen and returns how many of those bytes
// were in holes (seen now for the first time).
func (q *seqSpace) fill(start, end int64) int64 {
	if end <= start || len(q.holes) == 0 {
		return 0
	}
	var filled int64
	var out []span
	for i, h := range q.holes {
		if h.end <= start || h.start >= end {
			if out != nil {
				out = append(out, h)
			}
			continue
		}
		if out == nil {
			out = make([]span, i, len(q.holes)+1)
			copy(out, q.holes[:i])
		}
		lo, hi := max(h.start, start), min(h.end, end)
		filled += hi - lo
		if h.start < lo {
			out = append(out, span{h.start, lo})
		}
		if hi < h.end {
			out = append(out, span{hi, h.end})
		}
	}
	if out != nil {
		if len(out) > maxHoles {
			out = out[len(out)-maxHoles:]
			q.overflowed = true
		}
		q.holes = out
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
