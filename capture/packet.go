package capture

import "net/netip"

// TCP header flags, as in the TCP header's flags byte.
const (
	FlagFIN uint8 = 1 << iota
	FlagSYN
	FlagRST
	FlagPSH
	FlagACK
	FlagURG
	FlagECE
	FlagCWR
)

// SACKBlock is one selective-acknowledgement block: bytes [Left, Right) were received.
type SACKBlock struct{ Left, Right uint32 }

// TCPOptions holds the TCP options the analysis uses.
type TCPOptions struct {
	MSS           uint16 // 0 when the option is absent
	WindowScale   int8   // -1 when the option is absent; shifts above 14 read as 14 (RFC 7323)
	SACKPermitted bool
	HasTimestamps bool
	TSVal, TSEcr  uint32
	NumSACK       int // number of valid entries in SACK
	SACK          [4]SACKBlock
}

// Packet is one decoded TCP segment. A Reader reuses the Packet it fills
// (Payload points into the reader's buffer): copy what you keep past the next call.
type Packet struct {
	TimestampNs int64 // capture time, nanoseconds since the Unix epoch
	Interface   int   // pcapng interface index (0 for pcap)
	Src, Dst    netip.Addr
	// IPID is the IPv4 identification field (0 for IPv6): a frame captured twice
	// carries the same one, a retransmission (on most stacks) a new one.
	IPID     uint16
	SrcPort  uint16
	DstPort  uint16
	Seq, Ack uint32
	Flags    uint8  // FlagFIN | FlagSYN | ...
	Window   uint16 // raw advertised window, not scaled
	Options  TCPOptions
	// HeaderLen is the TCP header length in bytes (data offset * 4).
	HeaderLen int
	// PayloadLen is the TCP payload length from the IP header's length field, so it is
	// right even when the capture's snaplen cut the payload (or the whole of it).
	PayloadLen int
	// Payload is the part of the payload that was captured: len(Payload) <= PayloadLen.
	Payload []byte
}

// Has reports whether all of the given flags are set.
func (p *Packet) Has(flags uint8) bool { return p.Flags&flags == flags }
