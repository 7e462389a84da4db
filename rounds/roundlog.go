package rounds

import "encoding/binary"

// roundLog holds one connection's rounds, in order. The rounds a segment can
// still change (the last one, and those no acknowledgement has reached yet) are
// Round values; the older ones, which only a retransmission of their bytes still
// touches (Lost), are encoded into one append-only buffer of bytes (roundCodec):
// a keep-alive connection open for thousands of responses then holds some 40
// bytes a round instead of a Round's 500, in memory the collector need not scan.
// Nothing about a round changes by being encoded: Rounds and Label decode them
// as they were.
type roundLog struct {
	// starts holds every round's StartOffset, for roundOf.
	starts []int64
	// coded holds rounds [0, frozen) encoded, one after the other.
	coded  []byte
	frozen int
	// lost counts, per frozen round, the segments sent again after it was
	// encoded (Round.Lost beyond what coded holds).
	lost map[int]int
	// pred is what the next round to be encoded is predicted from (the last
	// encoded one).
	pred roundPredictor
	// tail holds rounds [frozen, frozen+len(tail)).
	tail []Round
	// prev is the round before the last, as Prev tells it.
	prev roundSpan
}

// roundSpan is where a round's new bytes lie in the stream and what was in
// flight when its last was sent: what no longer changes about a round once
// another follows it (new data goes to the last round).
type roundSpan struct {
	StartOffset, EndOffset, InFlightBytes int64
}

func spanOf(r *Round) roundSpan {
	return roundSpan{StartOffset: r.StartOffset, EndOffset: r.EndOffset, InFlightBytes: r.InFlightBytes}
}

// Len is the number of rounds.
func (l *roundLog) Len() int { return l.frozen + len(l.tail) }

// Last is the latest round (nil when there is none).
func (l *roundLog) Last() *Round {
	if len(l.tail) == 0 {
		return nil
	}
	return &l.tail[len(l.tail)-1]
}

// Open is round i (0-based) when it is not encoded yet: i must be at least the
// first round not encoded (see freeze).
func (l *roundLog) Open(i int) *Round { return &l.tail[i-l.frozen] }

// Append adds a round after the others. The rounds before round frozenBefore
// (0-based) change no more: those are encoded first, the last one too, so that
// the tail of a connection whose rounds are acknowledged one by one never
// holds more than one.
func (l *roundLog) Append(r Round, frozenBefore int) {
	if last := l.Last(); last != nil {
		l.prev = spanOf(last)
	}
	l.freezeUpTo(min(frozenBefore, l.Len()))
	l.starts = append(l.starts, r.StartOffset)
	l.tail = append(l.tail, r)
}

// Prev is the span of the round before the last (it may be encoded); ok is
// false when there are fewer than two rounds.
func (l *roundLog) Prev() (prev roundSpan, ok bool) {
	if l.Len() < 2 {
		return roundSpan{}, false
	}
	return l.prev, true
}

// Start is round i's StartOffset.
func (l *roundLog) Start(i int) int64 { return l.starts[i] }

// AddLost counts one more segment of round i sent again.
func (l *roundLog) AddLost(i int) {
	if i >= l.frozen {
		l.tail[i-l.frozen].Lost++
		return
	}
	if l.lost == nil {
		l.lost = make(map[int]int)
	}
	l.lost[i]++
}

// freeze encodes the rounds before round n (0-based), except the last round.
func (l *roundLog) freeze(n int) { l.freezeUpTo(min(n, l.Len()-1)) }

// freezeUpTo encodes the rounds before round n.
func (l *roundLog) freezeUpTo(n int) {
	if n <= l.frozen {
		return
	}
	k := n - l.frozen
	for i := range k {
		l.coded = appendRound(l.coded, &l.tail[i], l.frozen+i, &l.pred)
	}
	l.frozen = n
	rest := copy(l.tail, l.tail[k:])
	clear(l.tail[rest:])
	l.tail = l.tail[:rest]
}

// All returns every round as a Round value, in a slice of its own.
func (l *roundLog) All() []Round {
	out := make([]Round, l.Len())
	var pred roundPredictor
	buf := l.coded
	for i := range l.frozen {
		n := decodeRound(buf, &out[i], i, l.starts[i], &pred)
		buf = buf[n:]
		out[i].Lost += l.lost[i]
	}
	copy(out[l.frozen:], l.tail)
	return out
}

// Replace makes rounds the log's rounds, none of them encoded (a labeled set).
func (l *roundLog) Replace(rounds []Round) {
	l.coded, l.frozen, l.lost, l.pred = nil, 0, nil, roundPredictor{}
	l.tail = rounds
	l.starts = l.starts[:0]
	for i := range rounds {
		l.starts = append(l.starts, rounds[i].StartOffset)
	}
	if n := len(rounds); n >= 2 {
		l.prev = spanOf(&rounds[n-2])
	}
}

// roundPredictor holds the values of the round encoded last that the next one
// is encoded against: in a long connection's rounds they change little.
type roundPredictor struct {
	start, firstNs, clientDataAtEnd int64
	receiveWindowBytes              int
	firstFrameBytes, lastFrameBytes int
	lastTS                          uint32
}

// appendRound appends round r, the round at index i, encoded, to buf.
func appendRound(buf []byte, r *Round, i int, pred *roundPredictor) []byte {
	// The values are written after room for the bitmap, which is known only
	// once they are, then moved up against it.
	const room = 2 * binary.MaxVarintLen64
	start := len(buf)
	c := roundCodec{buf: append(buf, make([]byte, room)...)}
	c.visit(r, i, pred)
	var head [room]byte
	h := binary.AppendUvarint(head[:0], c.bits[0])
	h = binary.AppendUvarint(h, c.bits[1])
	buf = c.buf
	n := copy(buf[start:], h)
	n += copy(buf[start+n:], buf[start+room:])
	return buf[:start+n]
}

// decodeRound decodes the round at index i, whose StartOffset is start, from the
// head of buf into r and returns the bytes it took.
func decodeRound(buf []byte, r *Round, i int, start int64, pred *roundPredictor) int {
	*r = Round{}
	c := roundCodec{decode: true}
	var n0, n1 int
	c.bits[0], n0 = binary.Uvarint(buf)
	c.bits[1], n1 = binary.Uvarint(buf[n0:])
	c.buf = buf[n0+n1:]
	r.StartOffset = start
	c.visit(r, i, pred)
	return n0 + n1 + c.pos
}

// roundCodec encodes a Round's fields, or decodes them, in one pass over them
// (visit) so that both directions read the same fields in the same order. Each
// field is kept as its difference from an anchor, a value the decoder knows by
// then (a field read before it, or the round before): a field equal to its
// anchor costs one bit of the record's bitmap, any other a varint of the
// difference. Booleans are their bit alone. The methods' common path (a field
// equal to its anchor) is small enough to be inlined in visit.
type roundCodec struct {
	decode bool
	bits   [2]uint64
	field  uint
	buf    []byte // encode: the values written; decode: the record's values
	pos    int    // decode: bytes of buf read
}

func (c *roundCodec) i64(p *int64, anchor int64) {
	f := c.field
	c.field++
	if c.decode || *p != anchor {
		c.field64(p, anchor, f)
	}
}

// field64 decodes field f into p, or encodes p's difference from anchor. (Not
// inlined, so that i64 is: encoding a field equal to its anchor is one
// comparison.)
//
//go:noinline
func (c *roundCodec) field64(p *int64, anchor int64, f uint) {
	bit, w := uint64(1)<<(f&63), f>>6
	if !c.decode {
		c.bits[w] |= bit
		c.buf = binary.AppendVarint(c.buf, *p-anchor)
		return
	}
	*p = anchor
	if c.bits[w]&bit != 0 {
		d, n := binary.Varint(c.buf[c.pos:])
		c.pos += n
		*p += d
	}
}

// rareFieldsFrom is the first of the fields few rounds hold (a retransmission,
// a probe, a pause, a label): a record with none of them ends its bitmap
// before it, and decoding it skips them all.
const rareFieldsFrom = 32

// restZero reports, when decoding, that the record holds none of the fields
// from rareFieldsFrom on: the Round, zero before decoding, is whole.
func (c *roundCodec) restZero() bool {
	return c.decode && c.bits[0]>>rareFieldsFrom == 0 && c.bits[1] == 0
}

func (c *roundCodec) int(p *int, anchor int64) {
	f := c.field
	c.field++
	if c.decode || int64(*p) != anchor {
		c.fieldInt(p, anchor, f)
	}
}

//go:noinline
func (c *roundCodec) fieldInt(p *int, anchor int64, f uint) {
	v := int64(*p)
	c.field64(&v, anchor, f)
	*p = int(v)
}

// u32 codes a 32-bit clock's value as its difference from anchor, modulo 2³².
func (c *roundCodec) u32(p *uint32, anchor uint32) {
	f := c.field
	c.field++
	if c.decode || *p != anchor {
		c.fieldU32(p, anchor, f)
	}
}

//go:noinline
func (c *roundCodec) fieldU32(p *uint32, anchor uint32, f uint) {
	v := int64(int32(*p - anchor))
	c.field64(&v, 0, f)
	*p = anchor + uint32(int32(v))
}

func (c *roundCodec) flag(p *bool) {
	f := c.field
	c.field++
	if c.decode {
		*p = c.bits[f>>6]&(1<<(f&63)) != 0
	} else if *p {
		c.bits[f>>6] |= 1 << (f & 63)
	}
}

func (c *roundCodec) str(p *string) {
	f := c.field
	c.field++
	bit, w := uint64(1)<<(f&63), f>>6
	if c.decode {
		*p = ""
		if c.bits[w]&bit != 0 {
			n, k := binary.Uvarint(c.buf[c.pos:])
			c.pos += k
			*p = string(c.buf[c.pos : c.pos+int(n)])
			c.pos += int(n)
		}
		return
	}
	if *p != "" {
		c.bits[w] |= bit
		c.buf = binary.AppendUvarint(c.buf, uint64(len(*p)))
		c.buf = append(c.buf, *p...)
	}
}

func (c *roundCodec) int32s(p *[]int32) {
	f := c.field
	c.field++
	bit, w := uint64(1)<<(f&63), f>>6
	if c.decode {
		*p = nil
		if c.bits[w]&bit != 0 {
			n, k := binary.Uvarint(c.buf[c.pos:])
			c.pos += k
			s := make([]int32, n)
			for j := range s {
				v, k := binary.Varint(c.buf[c.pos:])
				c.pos += k
				s[j] = int32(v)
			}
			*p = s
		}
		return
	}
	if len(*p) > 0 {
		c.bits[w] |= bit
		c.buf = binary.AppendUvarint(c.buf, uint64(len(*p)))
		for _, v := range *p {
			c.buf = binary.AppendVarint(c.buf, int64(v))
		}
	}
}

// visit encodes or decodes every field of r (StartOffset aside: the log keeps
// it) against its anchor, and makes pred r's. The fields most rounds hold come
// first, the others from rareFieldsFrom on (decoding into a zero r skips them
// when the record has none). A field added to Round must be added
// here (TestRoundCodecEveryField fails until it is).
func (c *roundCodec) visit(r *Round, i int, pred *roundPredictor) {
	start := r.StartOffset
	c.int(&r.Index, int64(i+1))
	c.i64(&r.EndOffset, start)
	span := r.EndOffset - start
	c.i64(&r.FirstNs, pred.firstNs)
	c.i64(&r.LastNs, r.FirstNs)
	c.int(&r.Bytes, span)
	c.int(&r.Segments, 1)
	c.int(&r.Packets, int64(r.Segments))
	c.int(&r.FirstFrameBytes, int64(pred.firstFrameBytes))
	c.int(&r.LastFrameBytes, int64(pred.lastFrameBytes))
	c.int(&r.MinInsideFrameBytes, int64(r.FirstFrameBytes))
	c.int(&r.ReceiveWindowBytes, int64(pred.receiveWindowBytes))
	c.i64(&r.InFlightBytes, span)
	c.i64(&r.WindowRoomBytes, int64(r.ReceiveWindowBytes)-r.InFlightBytes)
	c.i64(&r.FirstAckNs, r.FirstNs)
	c.i64(&r.ReleaseNs, r.FirstNs)
	c.i64(&r.ReleaseAck, start)
	c.i64(&r.ReleaseAckMax, r.ReleaseAck)
	c.i64(&r.ClientDataAtStart, pred.clientDataAtEnd)
	c.i64(&r.ClientDataAtEnd, r.ClientDataAtStart)
	c.i64(&r.ClientDataAtFirstAck, r.ClientDataAtEnd)
	c.int(&r.SegmentsEarly, 1)
	c.int(&r.BytesEarly, int64(r.FirstFrameBytes))
	c.int(&r.singleFrames, int64(r.Packets))
	// The short frames before a round are most often the last round's last
	// frame and its first.
	c.int(&r.shortBefore.bytes, int64(pred.lastFrameBytes))
	c.i64(&r.shortBefore.end, start)
	c.int(&r.shortBeforeOther.bytes, int64(pred.firstFrameBytes))
	c.i64(&r.shortBeforeOther.end, pred.start+int64(pred.firstFrameBytes))
	c.u32(&r.firstTS, pred.lastTS)
	c.u32(&r.lastTS, r.firstTS)
	c.flag(&r.tsSet)
	c.flag(&r.PartialEnd)
	c.flag(&r.Continuous)
	*pred = roundPredictor{start: start, firstNs: r.FirstNs, clientDataAtEnd: r.ClientDataAtEnd, receiveWindowBytes: r.ReceiveWindowBytes,
		firstFrameBytes: r.FirstFrameBytes, lastFrameBytes: r.LastFrameBytes, lastTS: r.lastTS}
	if c.restZero() {
		return
	}
	c.str(&r.Limit)
	c.int(&r.Retransmissions, 0)
	c.int(&r.OutOfOrder, 0)
	c.int(&r.Lost, 0)
	c.int(&r.Holes, 0)
	c.int(&r.ProbeSegments, 0)
	c.int(&r.ProbeBytes, 0)
	c.i64(&r.ProbeGapNs, 0)
	c.flag(&r.MaybeProbe)
	c.i64(&r.MaybeProbeGapNs, 0)
	c.u32(&r.maybeFromTS, 0)
	c.u32(&r.maybeToTS, 0)
	c.i64(&r.maybeSpacingNs, 0)
	c.flag(&r.RatePaced)
	c.flag(&r.Outgrown)
	c.flag(&r.Undergrown)
	c.str(&r.undergrownWhy)
	c.flag(&r.NagleHeld)
	c.int(&r.UnclockedSends, 0)
	c.int(&r.UnclockedLong, 0)
	c.int(&r.LateSends, 0)
	c.int(&r.ArrivalPauses, 0)
	c.int(&r.SegmentsBeforeArrivalPause, 0)
	c.int(&r.BytesBeforeArrivalPause, 0)
	c.flag(&r.unclockedProbe)
	c.flag(&r.probeLong)
	c.flag(&r.Paused)
	c.int(&r.SegmentsBeforePause, 0)
	c.int(&r.BytesBeforePause, 0)
	c.int32s(&r.mergedFrames)
	c.int(&r.mergedRestFrames, 0)
	c.int(&r.mergedRestBytes, 0)
	c.i64(&r.BytesOnSACK, 0)
	c.i64(&r.SACKedAtSend, 0)
	c.int(&r.DupAcksAtSend, 0)
	c.flag(&r.OutranAcks)
	c.int(&r.OutranSent, 0)
	c.int(&r.OutranAllowed, 0)
	c.int(&r.RenoDupAcksBefore, 0)
}
