package link

// Packet is one IP packet travelling through a pipeline.
type Packet struct {
	// Data is the IP packet (a TUN device has no link-layer header).
	Data []byte
	// TimeNs is the time the packet reached its current place: a stage sets it, on the
	// way out, to the time the packet became ready to leave that stage. The next stage
	// takes it as the packet's arrival time.
	TimeNs int64
	// ArrivalNs is the time the packet entered the pipeline.
	ArrivalNs int64

	// buffer is the whole pooled buffer Data is a prefix of (nil for packets made by
	// tests or callers).
	buffer []byte
}

// Size returns the packet's length in bytes, the size every stage charges it for.
func (p *Packet) Size() int { return len(p.Data) }

// Stage is one step of a direction's path: a delay line, a bottleneck with its queue, a
// loss process. The caller drives it with an explicit clock: times passed to Enqueue must
// not decrease, and Dequeue is called with the current time. A stage never reads a clock.
type Stage interface {
	// Enqueue hands the packet to the stage at nowNs; the stage owns it from then on. The
	// packets the stage drops as a result (the new one or others) are appended to dropped,
	// which is returned, so a caller can reuse one slice without allocating.
	Enqueue(p *Packet, nowNs int64, dropped []*Packet) []*Packet
	// Dequeue returns a packet whose TimeNs (when it became ready) is at or before nowNs,
	// oldest first, or nil when none is ready.
	Dequeue(nowNs int64) *Packet
	// NextReadyNs returns the earliest time at which Dequeue may return a packet, and
	// false when the stage holds no packets. It is a lower bound: asked again at that
	// time the stage may report a later time (a trace opportunity may not finish a packet).
	NextReadyNs() (readyNs int64, ok bool)
}

// minLatencyStage is implemented by stages that hold every packet for at least a known
// time, so a Pipeline can tell when a packet still upstream can come out at the earliest.
type minLatencyStage interface {
	MinLatencyNs() int64
}

// packetFIFO is a first-in first-out queue of packets on a ring buffer that grows by
// doubling and never shrinks, so a steady flow allocates nothing.
type packetFIFO struct {
	ring  []*Packet
	head  int // index of the oldest packet
	count int
}

func (q *packetFIFO) len() int { return q.count }

func (q *packetFIFO) push(p *Packet) {
	if q.count == len(q.ring) {
		q.grow()
	}
	q.ring[(q.head+q.count)%len(q.ring)] = p
	q.count++
}

// front returns the oldest packet without removing it, or nil.
func (q *packetFIFO) front() *Packet {
	if q.count == 0 {
		return nil
	}
	return q.ring[q.head]
}

// pop removes and returns the oldest packet, or nil.
func (q *packetFIFO) pop() *Packet {
	if q.count == 0 {
		return nil
	}
	p := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.count--
	return p
}

func (q *packetFIFO) grow() {
	size := 2 * len(q.ring)
	if size == 0 {
		size = 16
	}
	ring := make([]*Packet, size)
	for i := range q.count {
		ring[i] = q.ring[(q.head+i)%len(q.ring)]
	}
	q.ring, q.head = ring, 0
}

// popReady removes and returns the oldest packet if it was ready at or before nowNs.
func (q *packetFIFO) popReady(nowNs int64) *Packet {
	if p := q.front(); p != nil && p.TimeNs <= nowNs {
		return q.pop()
	}
	return nil
}

// frontTime returns the TimeNs of the oldest packet, and false when the queue is empty.
func (q *packetFIFO) frontTime() (int64, bool) {
	if p := q.front(); p != nil {
		return p.TimeNs, true
	}
	return 0, false
}
