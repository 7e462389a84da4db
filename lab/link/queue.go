package link

import (
	"fmt"
	"strings"

	"github.com/slowstart/slowstart/units"
)

// QueueDiscipline says which packet a full queue drops.
type QueueDiscipline int

const (
	// DropTail drops the arriving packet when it does not fit.
	DropTail QueueDiscipline = iota
	// DropHead accepts the arriving packet and drops the oldest ones until the queue fits
	// its limit again (the newest data survives, and loss is signalled sooner).
	DropHead
)

func (d QueueDiscipline) String() string {
	switch d {
	case DropTail:
		return "drop-tail"
	case DropHead:
		return "drop-head"
	}
	return fmt.Sprintf("QueueDiscipline(%d)", int(d))
}

// ParseQueueDiscipline reads "drop-tail" or "drop-head" ("droptail", "drophead" too).
func ParseQueueDiscipline(s string) (QueueDiscipline, error) {
	switch strings.ReplaceAll(strings.ToLower(s), "_", "-") {
	case "drop-tail", "droptail", "tail":
		return DropTail, nil
	case "drop-head", "drophead", "head":
		return DropHead, nil
	}
	return 0, fmt.Errorf("queue discipline %q: use drop-tail or drop-head", s)
}

// QueueConfig sizes the queue in front of a bottleneck (Rate or Trace). With both limits
// zero the queue is unlimited; with both set a packet must fit both.
type QueueConfig struct {
	Discipline   QueueDiscipline
	LimitBytes   int64 // 0: no limit in bytes
	LimitPackets int   // 0: no limit in packets
}

// Unlimited reports whether the queue has no limit.
func (c QueueConfig) Unlimited() bool { return c.LimitBytes == 0 && c.LimitPackets == 0 }

// String describes the queue for people, e.g. "drop-tail, 64 packets".
func (c QueueConfig) String() string {
	var limits []string
	if c.LimitPackets > 0 {
		limits = append(limits, fmt.Sprintf("%d packets", c.LimitPackets))
	}
	if c.LimitBytes > 0 {
		limits = append(limits, units.FormatSize(c.LimitBytes))
	}
	if len(limits) == 0 {
		return "unlimited"
	}
	return c.Discipline.String() + ", " + strings.Join(limits, " and ")
}

// Validate reports a limit that cannot work.
func (c QueueConfig) Validate() error {
	if c.Discipline != DropTail && c.Discipline != DropHead {
		return fmt.Errorf("queue discipline %d: use DropTail or DropHead", int(c.Discipline))
	}
	if c.LimitBytes < 0 {
		return fmt.Errorf("queue limit %d bytes is negative: use 0 for no limit in bytes", c.LimitBytes)
	}
	if c.LimitPackets < 0 {
		return fmt.Errorf("queue limit %d packets is negative: use 0 for no limit in packets", c.LimitPackets)
	}
	return nil
}

// Queue is the buffer in front of a bottleneck: first in, first out, with a limit in bytes
// and/or packets and a drop discipline. It is not a Stage (it has no notion of time): Rate
// and Trace own one and pull from it when their link is free, as a NIC pulls from its qdisc.
// The packet being transmitted is not in the queue and does not count against its limit.
type Queue struct {
	config  QueueConfig
	packets packetFIFO
	bytes   int64
}

// NewQueue returns an empty queue. Validate the config first; NewQueue does not.
func NewQueue(config QueueConfig) *Queue { return &Queue{config: config} }

// Len returns the number of queued packets.
func (q *Queue) Len() int { return q.packets.len() }

// Bytes returns the number of queued bytes.
func (q *Queue) Bytes() int64 { return q.bytes }

// overLimit reports whether the queue would exceed a limit holding extra more packets
// of extraBytes in all.
func (q *Queue) overLimit(extraPackets int, extraBytes int64) bool {
	return (q.config.LimitBytes > 0 && q.bytes+extraBytes > q.config.LimitBytes) ||
		(q.config.LimitPackets > 0 && q.packets.len()+extraPackets > q.config.LimitPackets)
}

// Enqueue adds the packet, appending the packets the discipline drops to dropped.
func (q *Queue) Enqueue(p *Packet, dropped []*Packet) []*Packet {
	sizeBytes := int64(p.Size())
	if q.config.Discipline == DropTail && q.overLimit(1, sizeBytes) {
		return append(dropped, p)
	}
	q.packets.push(p)
	q.bytes += sizeBytes
	for q.overLimit(0, 0) { // drop-head: make room from the front
		head := q.packets.pop()
		q.bytes -= int64(head.Size())
		dropped = append(dropped, head)
	}
	return dropped
}

// Dequeue removes and returns the oldest packet, or nil when the queue is empty.
func (q *Queue) Dequeue() *Packet {
	p := q.packets.pop()
	if p != nil {
		q.bytes -= int64(p.Size())
	}
	return p
}

// Default queue sizing: one bandwidth-delay product, but never fewer than
// DefaultQueueFloorPackets full-size packets, so a short path still absorbs an initial
// window of 10 segments.
const DefaultQueueFloorPackets = 10

// DefaultQueue returns a drop-tail queue of max(1 BDP, DefaultQueueFloorPackets packets of
// mtuBytes) for a bottleneck of rateBitsPerSecond on a path of round-trip time rttNs, and a
// line that says so, e.g. "queue: drop-tail, 1 BDP = 10.5 KB".
func DefaultQueue(rateBitsPerSecond, rttNs int64, mtuBytes int) (QueueConfig, string) {
	bdpBytes := int64(float64(rateBitsPerSecond) * float64(rttNs) / 8e9)
	floorBytes := int64(DefaultQueueFloorPackets * mtuBytes)
	if bdpBytes >= floorBytes {
		return QueueConfig{Discipline: DropTail, LimitBytes: bdpBytes},
			fmt.Sprintf("queue: drop-tail, 1 BDP = %s", units.FormatSize(bdpBytes))
	}
	return QueueConfig{Discipline: DropTail, LimitBytes: floorBytes},
		fmt.Sprintf("queue: drop-tail, %d packets = %s (floor; 1 BDP = %s)",
			DefaultQueueFloorPackets, units.FormatSize(floorBytes), units.FormatSize(bdpBytes))
}
