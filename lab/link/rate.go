package link

import "fmt"

// Rate is a bottleneck of constant rate with its queue: a packet takes
// size*8/rateBitsPerSecond to serialize (1500 bytes at 1.2 Mbit/s: 10 ms), one packet at
// a time, and packets that arrive while the link is busy wait in the Queue. A packet leaves
// when its last bit is out. Serialization times are exact to the nanosecond over any run
// of back-to-back packets (the sub-nanosecond remainder carries over).
type Rate struct {
	rateBitsPerSecond int64
	queue             *Queue

	transmitting *Packet    // on the wire; its TimeNs is when its last bit leaves
	carry        int64      // bit·nanoseconds left over from the last serialization
	sent         packetFIFO // fully serialized, waiting for Dequeue
}

// NewRate returns a Rate stage of rateBitsPerSecond (which must be positive) in front of
// which packets wait in queue.
func NewRate(rateBitsPerSecond int64, queue *Queue) *Rate {
	if rateBitsPerSecond <= 0 {
		panic(fmt.Sprintf("link.NewRate: rate %d bit/s is not positive", rateBitsPerSecond))
	}
	return &Rate{rateBitsPerSecond: rateBitsPerSecond, queue: queue}
}

// startTransmitting puts p on the wire at startNs.
func (r *Rate) startTransmitting(p *Packet, startNs int64) {
	bitNanoseconds := int64(p.Size())*8*1e9 + r.carry
	p.TimeNs = startNs + bitNanoseconds/r.rateBitsPerSecond
	r.carry = bitNanoseconds % r.rateBitsPerSecond
	r.transmitting = p
}

// advance plays the link forward to nowNs: every packet whose last bit left by then moves
// to sent, and the next queued packet starts the moment the previous one finished.
func (r *Rate) advance(nowNs int64) {
	for r.transmitting != nil && r.transmitting.TimeNs <= nowNs {
		finishedNs := r.transmitting.TimeNs
		r.sent.push(r.transmitting)
		r.transmitting = nil
		if next := r.queue.Dequeue(); next != nil {
			r.startTransmitting(next, finishedNs)
		} else {
			r.carry = 0 // the link goes idle: the next packet starts afresh
		}
	}
}

// Enqueue implements Stage: the packet goes on the wire if the link is idle, else into the
// queue, which may drop.
func (r *Rate) Enqueue(p *Packet, nowNs int64, dropped []*Packet) []*Packet {
	r.advance(nowNs)
	if r.transmitting == nil {
		r.startTransmitting(p, nowNs)
		return dropped
	}
	return r.queue.Enqueue(p, dropped)
}

// Dequeue implements Stage.
func (r *Rate) Dequeue(nowNs int64) *Packet {
	r.advance(nowNs)
	return r.sent.popReady(nowNs)
}

// NextReadyNs implements Stage.
func (r *Rate) NextReadyNs() (int64, bool) {
	if t, ok := r.sent.frontTime(); ok {
		return t, true
	}
	if r.transmitting != nil {
		return r.transmitting.TimeNs, true
	}
	return 0, false
}
