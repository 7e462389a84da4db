package ktcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// Kind says which kernel tracepoint an Event comes from.
type Kind uint8

// The kinds of events.
const (
	// KindProbe is tcp:tcp_probe: an ESTABLISHED socket received a segment (an
	// ACK, data, or both). The kernel fires it at the start of
	// tcp_rcv_established, before it processes the segment: Event.Sock is the
	// socket as it was when the segment arrived (the window in force before this
	// ACK), and Event.Segment is the segment. Segments received in other states
	// (after either side closed: FIN_WAIT1, CLOSE_WAIT, LAST_ACK, ...) have no
	// tracepoint and are not reported.
	KindProbe Kind = 1
	// KindState is sock:inet_sock_set_state for a TCP socket: its state is about
	// to change from Event.OldState to Event.NewState. Event.Sock is the socket
	// at that moment.
	KindState Kind = 2
	// KindRetransmit is tcp:tcp_retransmit_skb: the socket retransmitted the
	// segment Event.Segment (its sequence range and flags), or tried to and
	// failed with Event.RetransmitErr.
	KindRetransmit Kind = 3
	// KindCongestionState is tcp:tcp_cong_state_set: the congestion state is
	// about to change from Event.Sock.CAState to Event.NewCAState (Open,
	// Disorder, CWR, Recovery, Loss).
	KindCongestionState Kind = 4

	// kindMarker is the tracer's own record that Sync waits for; Read never
	// returns it.
	kindMarker Kind = 0x7f
)

// AllKinds are the kinds Open follows when Options.Kinds is empty.
var AllKinds = []Kind{KindProbe, KindState, KindRetransmit, KindCongestionState}

// tracepointOf names each kind's tracepoint (the name of its BTF prototype
// btf_trace_<name>, and the name link.AttachTracing attaches by).
var tracepointOf = map[Kind]string{
	KindProbe:           "tcp_probe",
	KindState:           "inet_sock_set_state",
	KindRetransmit:      "tcp_retransmit_skb",
	KindCongestionState: "tcp_cong_state_set",
}

func (k Kind) String() string {
	switch k {
	case KindProbe:
		return "tcp:tcp_probe"
	case KindState:
		return "sock:inet_sock_set_state"
	case KindRetransmit:
		return "tcp:tcp_retransmit_skb"
	case KindCongestionState:
		return "tcp:tcp_cong_state_set"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// State is a TCP socket state, numbered as the kernel numbers them
// (include/net/tcp_states.h).
type State uint8

// The TCP states.
const (
	StateEstablished State = 1
	StateSynSent     State = 2
	StateSynRecv     State = 3
	StateFinWait1    State = 4
	StateFinWait2    State = 5
	StateTimeWait    State = 6
	StateClose       State = 7
	StateCloseWait   State = 8
	StateLastAck     State = 9
	StateListen      State = 10
	StateClosing     State = 11
	StateNewSynRecv  State = 12
)

var stateNames = [...]string{"", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
	"TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"}

func (s State) String() string {
	if s > 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// CAState is a socket's congestion state (icsk_ca_state, enum tcp_ca_state).
type CAState uint8

// The congestion states.
const (
	CAOpen     CAState = 0 // nothing wrong
	CADisorder CAState = 1 // duplicate ACKs or SACKs seen
	CACWR      CAState = 2 // window reduced after an ECN echo or a local congestion signal
	CARecovery CAState = 3 // fast retransmit
	CALoss     CAState = 4 // retransmission timeout
)

var caStateNames = [...]string{"Open", "Disorder", "CWR", "Recovery", "Loss"}

func (s CAState) String() string {
	if int(s) < len(caStateNames) {
		return caStateNames[s]
	}
	return fmt.Sprintf("ca_state(%d)", uint8(s))
}

// InfiniteSSThresh is the slow start threshold of a socket that has not yet
// left slow start (TCP_INFINITE_SSTHRESH).
const InfiniteSSThresh = 0x7fffffff

// Sock is a TCP socket's state at an event, read from its struct tcp_sock.
// Sequence numbers are absolute (as on the wire); windows are in segments where
// the kernel keeps them in segments, in bytes otherwise.
type Sock struct {
	// SndCwnd is the congestion window in segments (snd_cwnd).
	SndCwnd uint32
	// SndSSThresh is the slow start threshold in segments (snd_ssthresh), raw:
	// InfiniteSSThresh until the socket first leaves slow start. tcp_probe's
	// tracefs field "ssthresh" shows tcp_current_ssthresh instead, which outside
	// loss recovery is at least 3/4 of the window.
	SndSSThresh uint32
	// SndWndBytes is the peer's receive window, scaled (snd_wnd).
	SndWndBytes uint32
	// RcvWndBytes is the receive window this socket last advertised (rcv_wnd).
	RcvWndBytes uint32
	// SRTTMicros is the smoothed round-trip time in microseconds (srtt_us >> 3,
	// as tcp_probe reports it); 0 before the first sample.
	SRTTMicros uint32
	// MSS is the payload of a full segment the socket sends, in bytes: the
	// peer's announced MSS (and the path's) less the TCP options in use
	// (mss_cache).
	MSS uint32
	// SndUna is the oldest unacknowledged sequence number, SndNxt the next
	// sequence number to send, WriteSeq the one after the last byte the
	// application wrote; RcvNxt the next sequence number expected from the peer.
	// WriteSeq - SndNxt is data queued but not yet sent.
	SndUna, SndNxt, WriteSeq, RcvNxt uint32
	// PacketsOut are segments in flight, RetransOut retransmitted ones in flight,
	// LostOut those marked lost, SackedOut those selectively acknowledged.
	PacketsOut, RetransOut, LostOut, SackedOut uint32
	// TotalRetrans counts the socket's retransmissions (including the SYN/ACK's
	// for a server's socket).
	TotalRetrans uint32
	// Delivered counts segments delivered to the peer (acknowledged, cumulatively
	// or selectively), the SYN included.
	Delivered uint32
	// CAState is the congestion state.
	CAState CAState
}

// TCP header flags, as in Segment.Flags.
const (
	FlagFIN = 0x01
	FlagSYN = 0x02
	FlagRST = 0x04
	FlagPSH = 0x08
	FlagACK = 0x10
	FlagURG = 0x20
	FlagECE = 0x40
	FlagCWR = 0x80
)

// Segment is the segment of a KindProbe event (received) or of a
// KindRetransmit event (retransmitted), from the kernel's per-segment control
// block (struct tcp_skb_cb).
type Segment struct {
	// Seq and EndSeq bound the segment's sequence space; EndSeq counts a SYN or
	// FIN as one.
	Seq, EndSeq uint32
	// AckSeq is the acknowledgment number a received segment carries.
	AckSeq uint32
	// Flags are the TCP header flags (FlagSYN, FlagACK, ...).
	Flags uint16
	// Mark is the packet's mark (skb->mark).
	Mark uint32
}

// DataBytes is the payload length of the segment.
func (s Segment) DataBytes() uint32 {
	n := s.EndSeq - s.Seq
	if s.Flags&FlagSYN != 0 && n > 0 {
		n--
	}
	if s.Flags&FlagFIN != 0 && n > 0 {
		n--
	}
	return n
}

// Event is one kernel event on a TCP socket the filter selected.
type Event struct {
	Kind Kind
	// MonoNs is when the kernel fired the event, on CLOCK_MONOTONIC
	// (bpf_ktime_get_ns); Tracer.UnixNs maps it to the wall clock.
	MonoNs int64
	// Cookie identifies the socket for its lifetime (SO_COOKIE, sock_gen_cookie):
	// every event of one connection carries the same cookie, and no other socket
	// of this boot does.
	Cookie uint64
	// Netns is the inode number of the socket's network namespace (as
	// NetnsInode reads it).
	Netns uint32
	// Local and Remote are the socket's two ends. An IPv4 connection on an IPv6
	// socket (an IPv4-mapped address) is shown as IPv4; IPv6Socket says which
	// family the socket has. A connecting socket's change from CLOSE to SYN_SENT
	// shows local port 0: the kernel picks the port just after.
	Local, Remote netip.AddrPort
	IPv6Socket    bool
	// SocketState is the socket's state when the event fired (for KindState, the
	// same as OldState).
	SocketState State
	// OldState and NewState are a KindState event's transition.
	OldState, NewState State
	// NewCAState is a KindCongestionState event's new congestion state; the old
	// one is Sock.CAState.
	NewCAState CAState
	// Sock is the socket's state at the event.
	Sock Sock
	// Segment is the segment of a KindProbe or KindRetransmit event.
	Segment Segment
	// RetransmitErr is a KindRetransmit event's result: 0, or the negative errno
	// the retransmission failed with.
	RetransmitErr int32

	congestionControl [16]byte
}

// CongestionControl is the socket's congestion control algorithm ("cubic",
// "bbr", "reno", ...) for KindState and KindCongestionState events, "" for others.
func (e *Event) CongestionControl() string {
	name := e.congestionControl[:]
	if i := strings.IndexByte(string(name), 0); i >= 0 {
		name = name[:i]
	}
	return string(name)
}

// The record the programs write into the ring buffer, one per event: native
// byte order, every byte written (zero where a kind has nothing to say).
const (
	recMonoNs     = 0   // u64 bpf_ktime_get_ns
	recCookie     = 8   // u64 socket cookie (the marker's sequence number for kindMarker)
	recLocalAddr  = 16  // [16]byte IPv6, or IPv4-mapped IPv6
	recRemoteAddr = 32  // [16]byte
	recLocalPort  = 48  // u16 host order
	recRemotePort = 50  // u16 host order
	recKind       = 52  // u8 Kind
	recFamily     = 53  // u8 AF_INET or AF_INET6
	recOldState   = 54  // u8 KindState: old state
	recNewState   = 55  // u8 KindState: new state; KindCongestionState: new CA state
	recNetns      = 56  // u32 network namespace inode
	recCAState    = 60  // u8 icsk_ca_state
	recSockState  = 61  // u8 sk_state
	recFlags      = 62  // u16 segment's TCP flags
	recSock       = 64  // 16 × u32, in the order of sockFields
	recSeq        = 128 // u32
	recEndSeq     = 132 // u32
	recAckSeq     = 136 // u32
	recMark       = 140 // u32
	recErr        = 144 // s32 KindRetransmit: error
	recCAName     = 152 // [16]byte congestion control name
	recordSize    = 168
)

// The socket fields of a record, at recSock + 4*i.
const (
	sockSndCwnd = iota
	sockSndSSThresh
	sockSndWnd
	sockRcvWnd
	sockSRTT // srtt_us, raw (<< 3)
	sockMSS
	sockSndUna
	sockSndNxt
	sockWriteSeq
	sockRcvNxt
	sockPacketsOut
	sockRetransOut
	sockLostOut
	sockSackedOut
	sockTotalRetrans
	sockDelivered
	sockFieldCount
)

const (
	afInet  = 2
	afInet6 = 10
)

// decode fills ev from one record; it reports false for a record too short to
// be one.
func decode(raw []byte, ev *Event) bool {
	if len(raw) < recordSize {
		return false
	}
	ne := binary.NativeEndian
	ev.Kind = Kind(raw[recKind])
	ev.MonoNs = int64(ne.Uint64(raw[recMonoNs:]))
	ev.Cookie = ne.Uint64(raw[recCookie:])
	ev.Netns = ne.Uint32(raw[recNetns:])
	ev.IPv6Socket = raw[recFamily] == afInet6
	ev.Local = netip.AddrPortFrom(netip.AddrFrom16([16]byte(raw[recLocalAddr:recLocalAddr+16])).Unmap(), ne.Uint16(raw[recLocalPort:]))
	ev.Remote = netip.AddrPortFrom(netip.AddrFrom16([16]byte(raw[recRemoteAddr:recRemoteAddr+16])).Unmap(), ne.Uint16(raw[recRemotePort:]))
	ev.SocketState = State(raw[recSockState])
	ev.OldState, ev.NewState, ev.NewCAState = 0, 0, 0
	switch ev.Kind {
	case KindState:
		ev.OldState, ev.NewState = State(raw[recOldState]), State(raw[recNewState])
	case KindCongestionState:
		ev.NewCAState = CAState(raw[recNewState])
	}
	sock := func(i int) uint32 { return ne.Uint32(raw[recSock+4*i:]) }
	ev.Sock = Sock{
		SndCwnd:      sock(sockSndCwnd),
		SndSSThresh:  sock(sockSndSSThresh),
		SndWndBytes:  sock(sockSndWnd),
		RcvWndBytes:  sock(sockRcvWnd),
		SRTTMicros:   sock(sockSRTT) >> 3,
		MSS:          sock(sockMSS),
		SndUna:       sock(sockSndUna),
		SndNxt:       sock(sockSndNxt),
		WriteSeq:     sock(sockWriteSeq),
		RcvNxt:       sock(sockRcvNxt),
		PacketsOut:   sock(sockPacketsOut),
		RetransOut:   sock(sockRetransOut),
		LostOut:      sock(sockLostOut),
		SackedOut:    sock(sockSackedOut),
		TotalRetrans: sock(sockTotalRetrans),
		Delivered:    sock(sockDelivered),
		CAState:      CAState(raw[recCAState]),
	}
	ev.Segment = Segment{
		Seq:    ne.Uint32(raw[recSeq:]),
		EndSeq: ne.Uint32(raw[recEndSeq:]),
		AckSeq: ne.Uint32(raw[recAckSeq:]),
		Flags:  ne.Uint16(raw[recFlags:]),
		Mark:   ne.Uint32(raw[recMark:]),
	}
	ev.RetransmitErr = int32(ne.Uint32(raw[recErr:]))
	copy(ev.congestionControl[:], raw[recCAName:recCAName+16])
	return true
}
