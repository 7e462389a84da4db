package link

import (
	"fmt"
	"math"
)

// DropReason says which stage dropped a packet.
type DropReason int

const (
	// DropQueue: the queue in front of the bottleneck was full (congestion).
	DropQueue DropReason = iota
	// DropLoss: the random loss process, or a Drop stage, chose the packet.
	DropLoss
)

func (r DropReason) String() string {
	switch r {
	case DropQueue:
		return "queue"
	case DropLoss:
		return "loss"
	}
	return fmt.Sprintf("DropReason(%d)", int(r))
}

// Counters counts one direction's traffic. Packets in = out + dropped + still inside.
type Counters struct {
	PacketsIn, BytesIn                     int64
	PacketsOut, BytesOut                   int64
	PacketsDroppedQueue, BytesDroppedQueue int64
	PacketsDroppedLoss, BytesDroppedLoss   int64
}

// PacketsInside returns the packets that entered and have neither left nor been dropped.
func (c Counters) PacketsInside() int64 {
	return c.PacketsIn - c.PacketsOut - c.PacketsDroppedQueue - c.PacketsDroppedLoss
}

// Pipeline is one direction of a path: its stages chained in the order
//
//	Drop → Loss → Queue + (Rate or Trace) → Delay
//
// Drop, when configured, removes the first packets of a kind before the random loss
// sees them, so that the seeded loss sequence is the same with or without it.
// Loss comes first, as netem applies loss on enqueue: a lost packet takes no room in the
// queue and no time on the link, and the seeded loss sequence depends only on the packets
// entering, not on the queue's state, so the same seed loses the same packets whatever the
// rate or queue. The bottleneck comes before the delay as a router's output port comes
// before a long fibre: packets queue and serialize, then propagate; with the delay last, a
// packet's exit time is known the moment it leaves the bottleneck.
//
// A Pipeline moves packets between its stages lazily, at the time each became ready (not
// the time it is asked), so calling Dequeue late does not add delay to what follows.
// It is not safe for concurrent use.
type Pipeline struct {
	stages    []pipelineStage
	counters  Counters
	recycle   func(*Packet)
	dropped   []*Packet // scratch for the stages' drops
	lastNowNs int64
}

type pipelineStage struct {
	stage      Stage
	dropReason DropReason // what a drop in this stage counts as
	// downstreamMinLatencyNs is the least time a packet leaving this stage spends in the
	// stages after it.
	downstreamMinLatencyNs int64
}

// NewPipeline builds the stages for config, starting at startNs (a delivery trace starts
// then). Dropped packets are handed to recycle (nil: left to the garbage collector).
func NewPipeline(config Config, startNs int64, recycle func(*Packet)) (*Pipeline, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	var stages []pipelineStage
	if config.Drop.Count > 0 {
		stages = append(stages, pipelineStage{stage: NewDrop(config.Drop), dropReason: DropLoss})
	}
	if config.Loss.Model != LossNone {
		stages = append(stages, pipelineStage{stage: NewLoss(config.Loss, config.Seed), dropReason: DropLoss})
	}
	switch {
	case config.Trace != nil:
		stages = append(stages, pipelineStage{stage: NewTrace(config.Trace, NewQueue(config.Queue), startNs), dropReason: DropQueue})
	case config.RateBitsPerSecond > 0:
		stages = append(stages, pipelineStage{stage: NewRate(config.RateBitsPerSecond, NewQueue(config.Queue)), dropReason: DropQueue})
	}
	stages = append(stages, pipelineStage{stage: NewDelay(config.DelayNs, config.Jitter, config.Seed)})
	return newPipeline(stages, startNs, recycle), nil
}

func newPipeline(stages []pipelineStage, startNs int64, recycle func(*Packet)) *Pipeline {
	var downstreamNs int64
	for i := len(stages) - 1; i >= 0; i-- {
		stages[i].downstreamMinLatencyNs = downstreamNs
		if timed, ok := stages[i].stage.(minLatencyStage); ok {
			downstreamNs += timed.MinLatencyNs()
		}
	}
	return &Pipeline{stages: stages, recycle: recycle, lastNowNs: startNs}
}

// clock keeps the pipeline's time from going backwards: a caller whose readers and writer
// take timestamps on different threads may hand in a time slightly older than the last.
func (p *Pipeline) clock(nowNs int64) int64 {
	p.lastNowNs = max(p.lastNowNs, nowNs)
	return p.lastNowNs
}

// Enqueue hands a packet to the first stage at nowNs; the pipeline owns it until Dequeue
// returns it or it is dropped (and recycled).
func (p *Pipeline) Enqueue(packet *Packet, nowNs int64) {
	nowNs = p.clock(nowNs)
	p.counters.PacketsIn++
	p.counters.BytesIn += int64(packet.Size())
	packet.ArrivalNs = nowNs
	packet.TimeNs = nowNs
	p.dropped = p.stages[0].stage.Enqueue(packet, nowNs, p.dropped[:0])
	p.recordDrops(p.stages[0].dropReason)
	p.advance(nowNs)
}

// Dequeue returns a packet that is due to leave at or before nowNs (its TimeNs says when
// exactly), or nil.
func (p *Pipeline) Dequeue(nowNs int64) *Packet {
	nowNs = p.clock(nowNs)
	p.advance(nowNs)
	packet := p.stages[len(p.stages)-1].stage.Dequeue(nowNs)
	if packet != nil {
		p.counters.PacketsOut++
		p.counters.BytesOut += int64(packet.Size())
	}
	return packet
}

// NextReadyNs returns a time before which Dequeue returns nothing, and false when the
// pipeline is empty. For a packet still upstream of the delay it is the earliest the packet
// can come out; asked again then, the pipeline may name a later time.
func (p *Pipeline) NextReadyNs() (int64, bool) {
	earliestNs, found := int64(math.MaxInt64), false
	for _, s := range p.stages {
		if readyNs, ok := s.stage.NextReadyNs(); ok {
			earliestNs = min(earliestNs, readyNs+s.downstreamMinLatencyNs)
			found = true
		}
	}
	return earliestNs, found
}

// Counters returns the traffic counted so far.
func (p *Pipeline) Counters() Counters { return p.counters }

// advance moves every packet that became ready by nowNs on to the next stage, at the
// time it became ready.
func (p *Pipeline) advance(nowNs int64) {
	for i := 0; i+1 < len(p.stages); i++ {
		from, to := p.stages[i].stage, &p.stages[i+1]
		for packet := from.Dequeue(nowNs); packet != nil; packet = from.Dequeue(nowNs) {
			p.dropped = to.stage.Enqueue(packet, packet.TimeNs, p.dropped[:0])
			p.recordDrops(to.dropReason)
		}
	}
}

func (p *Pipeline) recordDrops(reason DropReason) {
	for i, packet := range p.dropped {
		switch reason {
		case DropLoss:
			p.counters.PacketsDroppedLoss++
			p.counters.BytesDroppedLoss += int64(packet.Size())
		default:
			p.counters.PacketsDroppedQueue++
			p.counters.BytesDroppedQueue += int64(packet.Size())
		}
		if p.recycle != nil {
			p.recycle(packet)
		}
		p.dropped[i] = nil
	}
	p.dropped = p.dropped[:0]
}
