package rounds

import (
	"sync"

	"github.com/slowstart/slowstart/internal/fieldcodec"
)

// roundLog holds one connection's rounds, in order. The rounds a segment can
// still change (the last one, and those no acknowledgement has reached yet) are
// Round values; the older ones, which only a retransmission of their bytes still
// touches (Lost), are encoded into one append-only buffer of bytes (package fieldcodec):
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
	// replaced: tail is a labeled set Replace was given (Label's), which
	// Tracker.Release gives back.
	replaced bool
}

// roundScratch keeps the slices of rounds that trackers labeled and were then
// released (Tracker.Release), for All to fill again: a report's rounds are
// copied out of them, so a capture of many connections need not allocate its
// rounds twice (50,000 keep-alive connections: half a gigabyte).
var roundScratch sync.Pool // of *[]Round

// maxScratchRounds bounds the slices kept: a connection of very many rounds
// does not hold its room for all the others.
const maxScratchRounds = 1 << 10

// takeRounds returns n zero rounds, in a slice kept by roundScratch when one is
// large enough.
func takeRounds(n int) []Round {
	if p, ok := roundScratch.Get().(*[]Round); ok && cap(*p) >= n {
		out := (*p)[:n]
		clear(out)
		return out
	}
	return make([]Round, n)
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

// AppendNew adds a round after the others, for the caller to fill in place:
// it returns the new round, zero but for its StartOffset (a Round built by
// the caller and copied in was a stack copy of 552 bytes, twice, a round).
// The rounds before round frozenBefore (0-based) change no more: those are
// encoded first, the last one too, so that the tail of a connection whose
// rounds are acknowledged one by one never holds more than one.
func (l *roundLog) AppendNew(startOffset int64, frozenBefore int) *Round {
	if last := l.Last(); last != nil {
		l.prev = spanOf(last)
	}
	l.freezeUpTo(min(frozenBefore, l.Len()))
	l.starts = append(l.starts, startOffset)
	l.tail = append(l.tail, Round{})
	r := &l.tail[len(l.tail)-1]
	r.StartOffset = startOffset
	return r
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
	out := takeRounds(l.Len())
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
	l.tail, l.replaced = rounds, true
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
	requestNs                       int64
	receiveWindowBytes              int
	firstFrameBytes, lastFrameBytes int
	lastTS                          uint32
}

// appendRound appends round r, the round at index i, encoded, to buf.
func appendRound(buf []byte, r *Round, i int, pred *roundPredictor) []byte {
	var c fieldcodec.Codec
	c.Encode(buf, roundWords)
	visitRound(&c, r, i, pred)
	return c.Finish()
}

// decodeRound decodes the round at index i, whose StartOffset is start, from the
// head of buf into r and returns the bytes it took.
func decodeRound(buf []byte, r *Round, i int, start int64, pred *roundPredictor) int {
	*r = Round{}
	var c fieldcodec.Codec
	c.Decode(buf, roundWords)
	r.StartOffset = start
	visitRound(&c, r, i, pred)
	return c.Read()
}

// roundWords is the words of a round's bitmap: a Round has more than 64
// fields.
const roundWords = 2

// rareFieldsFrom is the first of the fields few rounds hold (a retransmission,
// a probe, a pause, a label): a record with none of them ends its bitmap
// before it, and decoding it skips them all.
const rareFieldsFrom = 33

// visit encodes or decodes every field of r (StartOffset aside: the log keeps
// it) against its anchor, and makes pred r's. The fields most rounds hold come
// first, the others from rareFieldsFrom on (decoding into a zero r skips them
// when the record has none). A field added to Round must be added
// here (TestRoundCodecEveryField fails until it is).
func visitRound(c *fieldcodec.Codec, r *Round, i int, pred *roundPredictor) {
	start := r.StartOffset
	c.Int(&r.Index, int64(i+1))
	c.I64(&r.EndOffset, start)
	span := r.EndOffset - start
	c.I64(&r.FirstNs, pred.firstNs)
	c.I64(&r.LastNs, r.FirstNs)
	c.Int(&r.Bytes, span)
	c.Int(&r.Segments, 1)
	c.Int(&r.Packets, int64(r.Segments))
	c.Int(&r.FirstFrameBytes, int64(pred.firstFrameBytes))
	c.Int(&r.LastFrameBytes, int64(pred.lastFrameBytes))
	c.Int(&r.MinInsideFrameBytes, int64(r.FirstFrameBytes))
	c.Int(&r.ReceiveWindowBytes, int64(pred.receiveWindowBytes))
	c.I64(&r.InFlightBytes, span)
	c.I64(&r.WindowRoomBytes, int64(r.ReceiveWindowBytes)-r.InFlightBytes)
	c.I64(&r.FirstAckNs, r.FirstNs)
	c.I64(&r.ReleaseNs, r.FirstNs)
	c.I64(&r.RequestNs, pred.requestNs)
	c.I64(&r.ReleaseAck, start)
	c.I64(&r.ReleaseAckMax, r.ReleaseAck)
	c.I64(&r.ClientDataAtStart, pred.clientDataAtEnd)
	c.I64(&r.ClientDataAtEnd, r.ClientDataAtStart)
	c.I64(&r.ClientDataAtFirstAck, r.ClientDataAtEnd)
	c.Int(&r.SegmentsEarly, 1)
	c.Int(&r.BytesEarly, int64(r.FirstFrameBytes))
	c.Int(&r.singleFrames, int64(r.Packets))
	// The short frames before a round are most often the last round's last
	// frame and its first.
	c.Int(&r.shortBefore.bytes, int64(pred.lastFrameBytes))
	c.I64(&r.shortBefore.end, start)
	c.Int(&r.shortBeforeOther.bytes, int64(pred.firstFrameBytes))
	c.I64(&r.shortBeforeOther.end, pred.start+int64(pred.firstFrameBytes))
	c.U32(&r.firstTS, pred.lastTS)
	c.U32(&r.lastTS, r.firstTS)
	c.Flag(&r.tsSet)
	c.Flag(&r.PartialEnd)
	c.Flag(&r.Continuous)
	*pred = roundPredictor{start: start, firstNs: r.FirstNs, clientDataAtEnd: r.ClientDataAtEnd, receiveWindowBytes: r.ReceiveWindowBytes,
		firstFrameBytes: r.FirstFrameBytes, lastFrameBytes: r.LastFrameBytes, lastTS: r.lastTS, requestNs: r.RequestNs}
	if c.NoneFrom(rareFieldsFrom) {
		return
	}
	c.String(&r.Limit)
	c.Int(&r.Retransmissions, 0)
	c.Int(&r.OutOfOrder, 0)
	c.Int(&r.Lost, 0)
	c.Int(&r.Holes, 0)
	c.Int(&r.ProbeSegments, 0)
	c.Int(&r.ProbeBytes, 0)
	c.I64(&r.ProbeGapNs, 0)
	c.Flag(&r.MaybeProbe)
	c.I64(&r.MaybeProbeGapNs, 0)
	c.U32(&r.maybeFromTS, 0)
	c.U32(&r.maybeToTS, 0)
	c.I64(&r.maybeSpacingNs, 0)
	c.Flag(&r.RatePaced)
	c.Flag(&r.Outgrown)
	c.Flag(&r.Undergrown)
	c.String(&r.undergrownWhy)
	c.Flag(&r.NagleHeld)
	c.Int(&r.UnclockedSends, 0)
	c.Int(&r.UnclockedLong, 0)
	c.Int(&r.LateSends, 0)
	c.Int(&r.ArrivalPauses, 0)
	c.Int(&r.SegmentsBeforeArrivalPause, 0)
	c.Int(&r.BytesBeforeArrivalPause, 0)
	c.Flag(&r.unclockedProbe)
	c.Flag(&r.probeLong)
	c.Flag(&r.Paused)
	c.Int(&r.SegmentsBeforePause, 0)
	c.Int(&r.BytesBeforePause, 0)
	c.Int32s(&r.mergedFrames)
	c.Int(&r.mergedRestFrames, 0)
	c.Int(&r.mergedRestBytes, 0)
	c.I64(&r.BytesOnSACK, 0)
	c.I64(&r.SACKedAtSend, 0)
	c.Int(&r.DupAcksAtSend, 0)
	c.Flag(&r.OutranAcks)
	c.Int(&r.OutranSent, 0)
	c.Int(&r.OutranAllowed, 0)
	c.Int(&r.RenoDupAcksBefore, 0)
}
