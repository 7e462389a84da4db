package ktcp

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// TestDecode: a record laid out as the programs write it decodes into the
// fields it holds, IPv4 addresses (IPv4-mapped in the record) shown as IPv4.
func TestDecode(t *testing.T) {
	raw := make([]byte, recordSize)
	ne := binary.NativeEndian
	ne.PutUint64(raw[recMonoNs:], 123456789)
	ne.PutUint64(raw[recCookie:], 0xc00c1e)
	local := netip.MustParseAddr("198.18.0.2").As16()
	remote := netip.MustParseAddr("2001:2::1").As16()
	copy(raw[recLocalAddr:], local[:])
	copy(raw[recRemoteAddr:], remote[:])
	ne.PutUint16(raw[recLocalPort:], 443)
	ne.PutUint16(raw[recRemotePort:], 51000)
	raw[recKind] = byte(KindState)
	raw[recFamily] = afInet6
	raw[recOldState] = byte(StateSynRecv)
	raw[recNewState] = byte(StateEstablished)
	ne.PutUint32(raw[recNetns:], 4026531833)
	raw[recCAState] = byte(CARecovery)
	raw[recSockState] = byte(StateSynRecv)
	for i := range sockFieldCount {
		ne.PutUint32(raw[recSock+4*i:], uint32(100+i))
	}
	ne.PutUint32(raw[recSeq:], 1000)
	ne.PutUint32(raw[recEndSeq:], 1101)
	ne.PutUint32(raw[recAckSeq:], 77)
	ne.PutUint16(raw[recFlags:], FlagACK|FlagFIN)
	ne.PutUint32(raw[recMark:], 9)
	ne.PutUint32(raw[recErr:], uint32(0xfffffff5)) // -11
	copy(raw[recCAName:], "cubic")

	var ev Event
	if !decode(raw, &ev) {
		t.Fatal("decode refused a whole record")
	}
	want := Event{
		Kind:        KindState,
		MonoNs:      123456789,
		Cookie:      0xc00c1e,
		Netns:       4026531833,
		Local:       netip.MustParseAddrPort("198.18.0.2:443"),
		Remote:      netip.MustParseAddrPort("[2001:2::1]:51000"),
		IPv6Socket:  true,
		SocketState: StateSynRecv,
		OldState:    StateSynRecv,
		NewState:    StateEstablished,
		Sock: Sock{
			SndCwnd: 100, SndSSThresh: 101, SndWndBytes: 102, RcvWndBytes: 103,
			SRTTMicros: 104 >> 3, MSS: 105, SndUna: 106, SndNxt: 107, WriteSeq: 108, RcvNxt: 109,
			PacketsOut: 110, RetransOut: 111, LostOut: 112, SackedOut: 113, TotalRetrans: 114, Delivered: 115,
			CAState: CARecovery,
		},
		Segment:       Segment{Seq: 1000, EndSeq: 1101, AckSeq: 77, Flags: FlagACK | FlagFIN, Mark: 9},
		RetransmitErr: -11,
	}
	copy(want.congestionControl[:], "cubic")
	if ev != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", ev, want)
	}
	if ev.CongestionControl() != "cubic" {
		t.Errorf("congestion control %q", ev.CongestionControl())
	}
	if n := ev.Segment.DataBytes(); n != 100 {
		t.Errorf("a segment of 101 sequence numbers with a FIN carries %d data bytes, want 100", n)
	}
	if decode(raw[:recordSize-1], &ev) {
		t.Error("decode took a short record")
	}
}

func TestSegmentDataBytes(t *testing.T) {
	for _, c := range []struct {
		seg  Segment
		want uint32
	}{
		{Segment{Seq: 10, EndSeq: 11, Flags: FlagSYN}, 0},
		{Segment{Seq: 10, EndSeq: 10, Flags: FlagACK}, 0},
		{Segment{Seq: 0xfffffff0, EndSeq: 0x10, Flags: FlagACK}, 0x20}, // across the wrap
		{Segment{Seq: 5, EndSeq: 9, Flags: FlagACK | FlagPSH}, 4},
	} {
		if got := c.seg.DataBytes(); got != c.want {
			t.Errorf("%+v: %d data bytes, want %d", c.seg, got, c.want)
		}
	}
}

func TestNames(t *testing.T) {
	if StateEstablished.String() != "ESTABLISHED" || StateNewSynRecv.String() != "NEW_SYN_RECV" || State(99).String() != "state(99)" {
		t.Error("state names")
	}
	if CALoss.String() != "Loss" || CAState(9).String() != "ca_state(9)" {
		t.Error("congestion state names")
	}
	if KindProbe.String() != "tcp:tcp_probe" || !strings.Contains(Kind(9).String(), "9") {
		t.Error("kind names")
	}
}

func TestFilterValidate(t *testing.T) {
	if err := (Filter{Netns: make([]uint32, maxNetns+1)}).validate(); err == nil {
		t.Error("a filter on more namespaces than the program compares was accepted")
	}
	if err := (Filter{Family: IPv6 + 1}).validate(); err == nil {
		t.Error("an unknown family was accepted")
	}
	if err := (Filter{LocalAddrs: []netip.Addr{{}}}).validate(); err == nil {
		t.Error("an invalid address was accepted")
	}
	if k := addrKey(netip.MustParseAddr("10.1.2.3")); netip.AddrFrom16(k) != netip.MustParseAddr("::ffff:10.1.2.3") {
		t.Errorf("the key of an IPv4 address is %v, want its IPv4-mapped form", netip.AddrFrom16(k))
	}
}
