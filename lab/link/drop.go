package link

import (
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// PacketMatch selects the packets a Drop stage counts.
type PacketMatch int

const (
	// MatchAny matches every packet.
	MatchAny PacketMatch = iota
	// MatchSYN matches TCP segments with SYN set and ACK clear: a client opening a
	// connection (its retransmitted SYNs too).
	MatchSYN
	// MatchSYNACK matches TCP segments with both SYN and ACK set: a server's answer.
	MatchSYNACK
	// MatchTCPData matches TCP segments that carry payload.
	MatchTCPData
)

func (m PacketMatch) String() string {
	switch m {
	case MatchAny:
		return "packets"
	case MatchSYN:
		return "SYNs"
	case MatchSYNACK:
		return "SYN/ACKs"
	case MatchTCPData:
		return "TCP data segments"
	}
	return fmt.Sprintf("PacketMatch(%d)", int(m))
}

// DropConfig configures a Drop stage: the first Count packets that match are dropped, all
// others pass. It places a loss exactly (the first SYN of a connection, the third data
// segment), where the random processes can only make one likely. The zero value drops
// nothing.
type DropConfig struct {
	Count int
	Match PacketMatch
}

// Validate reports a negative count or an unknown match.
func (c DropConfig) Validate() error {
	if c.Count < 0 {
		return fmt.Errorf("drop count %d is negative: give how many matching packets to drop, or 0", c.Count)
	}
	if c.Match < MatchAny || c.Match > MatchTCPData {
		return fmt.Errorf("drop match %d: use MatchAny, MatchSYN, MatchSYNACK or MatchTCPData", int(c.Match))
	}
	return nil
}

// String describes the stage for people: "drop the first 1 SYNs".
func (c DropConfig) String() string {
	return fmt.Sprintf("drop the first %d %s", c.Count, c.Match)
}

// Drop drops the first packets that match its DropConfig and passes every other packet on
// at once. It reads the IPv4 or IPv6 and TCP headers of a packet only while it still has
// packets to drop; packets it cannot decode as TCP match only MatchAny. IPv6 extension
// headers are not followed: a TCP header behind one is not seen.
type Drop struct {
	config  DropConfig
	left    int
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	passing packetFIFO
}

// NewDrop returns a Drop stage; validate the config first.
func NewDrop(config DropConfig) *Drop {
	return &Drop{config: config, left: config.Count}
}

// matches reports whether the packet is one the stage counts.
func (d *Drop) matches(data []byte) bool {
	if d.config.Match == MatchAny {
		return true
	}
	if len(data) == 0 {
		return false
	}
	var segment []byte
	switch data[0] >> 4 {
	case 4:
		if d.ip4.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil || d.ip4.Protocol != layers.IPProtocolTCP {
			return false
		}
		segment = d.ip4.Payload
	case 6:
		if d.ip6.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil || d.ip6.NextHeader != layers.IPProtocolTCP {
			return false
		}
		segment = d.ip6.Payload
	default:
		return false
	}
	if d.tcp.DecodeFromBytes(segment, gopacket.NilDecodeFeedback) != nil {
		return false
	}
	switch d.config.Match {
	case MatchSYN:
		return d.tcp.SYN && !d.tcp.ACK
	case MatchSYNACK:
		return d.tcp.SYN && d.tcp.ACK
	case MatchTCPData:
		return len(d.tcp.Payload) > 0
	}
	return false
}

// Enqueue implements Stage.
func (d *Drop) Enqueue(p *Packet, nowNs int64, dropped []*Packet) []*Packet {
	if d.left > 0 && d.matches(p.Data) {
		d.left--
		return append(dropped, p)
	}
	p.TimeNs = nowNs
	d.passing.push(p)
	return dropped
}

// Dequeue implements Stage.
func (d *Drop) Dequeue(nowNs int64) *Packet { return d.passing.popReady(nowNs) }

// NextReadyNs implements Stage.
func (d *Drop) NextReadyNs() (int64, bool) { return d.passing.frontTime() }
