package link

import (
	"fmt"
	"math/rand/v2"
)

// JitterDistribution is the distribution of the random part of a Delay.
type JitterDistribution int

const (
	// JitterUniform draws the extra delay uniformly from [-SpreadNs, +SpreadNs].
	JitterUniform JitterDistribution = iota
	// JitterNormal draws it from a normal distribution with standard deviation SpreadNs;
	// a draw below zero total delay is taken as zero.
	JitterNormal
)

func (d JitterDistribution) String() string {
	switch d {
	case JitterUniform:
		return "uniform"
	case JitterNormal:
		return "normal"
	}
	return fmt.Sprintf("JitterDistribution(%d)", int(d))
}

// ParseJitterDistribution reads "uniform" or "normal".
func ParseJitterDistribution(s string) (JitterDistribution, error) {
	switch s {
	case "uniform":
		return JitterUniform, nil
	case "normal":
		return JitterNormal, nil
	}
	return 0, fmt.Errorf("jitter distribution %q: use uniform or normal", s)
}

// Jitter is the random variation of a Delay.
type Jitter struct {
	// SpreadNs is the half-width (uniform) or standard deviation (normal); 0 for none.
	SpreadNs     int64
	Distribution JitterDistribution
	// Reorder lets a packet overtake one that arrived before it when its draw is
	// smaller. Without it a packet never leaves before its predecessor, which raises
	// the delay of a packet that would have overtaken to its predecessor's (the
	// distribution is shifted up a little, as with netem's rate option).
	Reorder bool
}

// Delay holds every packet for a constant one-way delay plus optional seeded jitter.
// It has no rate and no queue limit: it is the propagation part of a path.
type Delay struct {
	delayNs int64
	jitter  Jitter
	random  *rand.Rand // nil without jitter

	inOrder    packetFIFO // packets in departure order, when reordering is off
	reordered  delayHeap  // packets by departure time, when reordering is on
	lastExitNs int64      // departure time of the packet enqueued last (in-order mode)
}

// NewDelay returns a Delay stage of delayNs plus jitter, drawing jitter from a PCG
// generator seeded with seed. It panics on a negative delay or jitter; Config.Validate
// reports such values with an explanation, so validate user input first.
func NewDelay(delayNs int64, jitter Jitter, seed uint64) *Delay {
	if delayNs < 0 || jitter.SpreadNs < 0 {
		panic(fmt.Sprintf("link.NewDelay: negative delay %d ns or jitter %d ns", delayNs, jitter.SpreadNs))
	}
	d := &Delay{delayNs: delayNs, jitter: jitter}
	if jitter.SpreadNs > 0 {
		d.random = rand.New(rand.NewPCG(seed, seedStreamJitter))
	}
	return d
}

// holdNs draws the time the next packet spends in the delay line.
func (d *Delay) holdNs() int64 {
	if d.random == nil {
		return d.delayNs
	}
	var offsetNs int64
	switch d.jitter.Distribution {
	case JitterNormal:
		offsetNs = int64(d.random.NormFloat64() * float64(d.jitter.SpreadNs))
	default:
		offsetNs = d.random.Int64N(2*d.jitter.SpreadNs+1) - d.jitter.SpreadNs
	}
	return max(0, d.delayNs+offsetNs)
}

// Enqueue implements Stage. A Delay never drops.
func (d *Delay) Enqueue(p *Packet, nowNs int64, dropped []*Packet) []*Packet {
	exitNs := nowNs + d.holdNs()
	if d.jitter.Reorder && d.random != nil {
		p.TimeNs = exitNs
		d.reordered.push(p)
		return dropped
	}
	exitNs = max(exitNs, d.lastExitNs)
	d.lastExitNs = exitNs
	p.TimeNs = exitNs
	d.inOrder.push(p)
	return dropped
}

// Dequeue implements Stage.
func (d *Delay) Dequeue(nowNs int64) *Packet {
	if d.reordered.len() > 0 && d.reordered.minTime() <= nowNs {
		return d.reordered.pop()
	}
	return d.inOrder.popReady(nowNs)
}

// NextReadyNs implements Stage.
func (d *Delay) NextReadyNs() (int64, bool) {
	if d.reordered.len() > 0 {
		return d.reordered.minTime(), true
	}
	return d.inOrder.frontTime()
}

// MinLatencyNs returns the least time any packet spends in this stage.
func (d *Delay) MinLatencyNs() int64 {
	switch {
	case d.random == nil:
		return d.delayNs
	case d.jitter.Distribution == JitterUniform:
		return max(0, d.delayNs-d.jitter.SpreadNs)
	}
	return 0
}

// delayHeap is a binary min-heap of packets by departure time; ties leave in arrival order.
type delayHeap struct {
	entries []delayHeapEntry
	nextSeq uint64
}

type delayHeapEntry struct {
	packet *Packet
	seq    uint64 // arrival order, to break ties
}

func (h *delayHeap) len() int { return len(h.entries) }

func (h *delayHeap) minTime() int64 { return h.entries[0].packet.TimeNs }

func (h *delayHeap) less(i, j int) bool {
	a, b := h.entries[i], h.entries[j]
	if a.packet.TimeNs != b.packet.TimeNs {
		return a.packet.TimeNs < b.packet.TimeNs
	}
	return a.seq < b.seq
}

func (h *delayHeap) push(p *Packet) {
	h.entries = append(h.entries, delayHeapEntry{packet: p, seq: h.nextSeq})
	h.nextSeq++
	for i := len(h.entries) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.entries[i], h.entries[parent] = h.entries[parent], h.entries[i]
		i = parent
	}
}

func (h *delayHeap) pop() *Packet {
	top := h.entries[0].packet
	last := len(h.entries) - 1
	h.entries[0] = h.entries[last]
	h.entries[last] = delayHeapEntry{}
	h.entries = h.entries[:last]
	for i := 0; ; {
		smallest, left, right := i, 2*i+1, 2*i+2
		if left < len(h.entries) && h.less(left, smallest) {
			smallest = left
		}
		if right < len(h.entries) && h.less(right, smallest) {
			smallest = right
		}
		if smallest == i {
			break
		}
		h.entries[i], h.entries[smallest] = h.entries[smallest], h.entries[i]
		i = smallest
	}
	return top
}
