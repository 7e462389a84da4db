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

// IP protocol numbers of the transports a Packet can hold (Packet.Protocol).
const (
	ProtocolTCP uint8 = 6
	ProtocolUDP uint8 = 17
)

// Packet is one decoded TCP segment, or with the UDP option (WithUDP) one UDP
// datagram. A Reader reuses the Packet it fills (Payload points into the
// reader's buffer): copy what you keep past the next call.
//
// Src, Dst and the ports are those of the innermost IP header and transport
// header: a packet that came through a tunnel describes the tunnelled
// connection, and Tunnel names the encapsulations it came through.
type Packet struct {
	TimestampNs int64 // capture time, nanoseconds since the Unix epoch
	Interface   int   // pcapng interface index (0 for pcap)
	// File is the index of the file the packet was read from, among those
	// given to OpenFiles (0 for a Reader of one file).
	File     int
	Src, Dst netip.Addr
	// IPID is the IPv4 identification field (0 for IPv6): a frame captured twice
	// carries the same one, a retransmission (on most stacks) a new one.
	IPID     uint16
	SrcPort  uint16
	DstPort  uint16
	Seq, Ack uint32 // TCP only
	Flags    uint8  // FlagFIN | FlagSYN | ... (TCP only)
	// Protocol is ProtocolTCP or ProtocolUDP. A Reader without WithUDP returns
	// only ProtocolTCP.
	Protocol uint8
	Window   uint16 // raw advertised window, not scaled (TCP only)
	// Tunnel is the set of encapsulations between the link layer and the
	// innermost IP header (0 for a packet that came through none).
	Tunnel  Encapsulation
	Options TCPOptions // TCP only: a UDP datagram has none (WindowScale -1)
	// HeaderLen is the TCP header length in bytes (data offset * 4); 8 for UDP.
	HeaderLen int
	// PayloadLen is the TCP or UDP payload length from the IP header's length field, so
	// it is right even when the capture's snaplen cut the payload (or the whole of it).
	PayloadLen int
	// Payload is the part of the payload that was captured: len(Payload) <= PayloadLen.
	Payload []byte
}

// Has reports whether all of the given flags are set.
func (p *Packet) Has(flags uint8) bool { return p.Flags&flags == flags }

// Encapsulation is a set of tunnels and link-level encapsulations a packet
// came through on its way from the capture's link layer to its innermost IP
// header. VLAN tags, LLC/SNAP and the link type itself are not counted: they
// change neither the path nor the room left for TCP segments.
type Encapsulation uint16

// The encapsulations, as Packet.Tunnel and Stats.Tunnels report them.
const (
	EncapPPPoE   Encapsulation = 1 << iota // PPP over Ethernet (a session)
	EncapMPLS                              // an MPLS label stack
	EncapGRE                               // GRE (RFC 2784/2890, PPTP's enhanced GRE, Aruba's 802.11 in GRE)
	EncapERSPAN                            // Cisco ERSPAN type I, II or III mirroring (in GRE)
	EncapVXLAN                             // VXLAN or VXLAN-GPE (UDP)
	EncapGeneve                            // Geneve (UDP)
	EncapGTPU                              // GTP-U, a mobile network's user plane (UDP)
	EncapIPinIP                            // an IP header right inside another: IP-in-IP, 6in4, 4in6, IPv6-in-IPv6
	EncapEtherIP                           // Ethernet in IP (EtherIP, RFC 3378)
	EncapCAPWAP                            // a wireless controller's CAPWAP data channel (UDP 5247)
	EncapL2TP                              // L2TPv2 data messages carrying PPP (UDP 1701: an ISP's L2TP tunnel)
)

var encapsulationNames = [...]string{"PPPoE", "MPLS", "GRE", "ERSPAN", "VXLAN", "Geneve", "GTP-U", "IP-in-IP", "EtherIP", "CAPWAP", "L2TP"}

// String names the encapsulations joined by "+", outermost kinds first in a
// fixed order (e.g. "GRE+ERSPAN"), or "" for none.
func (e Encapsulation) String() string {
	var s string
	for i, name := range encapsulationNames {
		if e&(1<<i) == 0 {
			continue
		}
		if s != "" {
			s += "+"
		}
		s += name
	}
	return s
}
