package capture

// Builders for the tests: TCP segments serialized with gopacket, framed for
// every supported link type, and written as pcap (both timestamp resolutions,
// both byte orders) and pcapng.

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// testSegment is a TCP segment to build, with what decoding it must give.
type testSegment struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
	seq, ack         uint32
	flags            uint8
	window           uint16
	options          []layers.TCPOption // as serialized
	payload          []byte
	ipv4Options      []layers.IPv4Option
	ipv6Extensions   []byte // raw extension headers between IPv6 and TCP; the first is hop-by-hop
	ipv4Flags        layers.IPv4Flag
	ipv4FragOffset   uint16

	wantHeaderLen int        // the TCP header length, worked out by hand
	wantOptions   TCPOptions // the options, worked out by hand
}

func (s testSegment) isIPv6() bool { return s.src.Is6() }

// want is the Packet a reader must return for s (Payload is the whole payload).
func (s testSegment) want() Packet {
	var ipID uint16
	if !s.isIPv6() {
		ipID = 4242 // the generator's IPv4 identification
	}
	return Packet{
		IPID: ipID,
		Src:  s.src, Dst: s.dst, SrcPort: s.srcPort, DstPort: s.dstPort,
		Seq: s.seq, Ack: s.ack, Flags: s.flags, Window: s.window, Protocol: ProtocolTCP,
		Options: s.wantOptions, HeaderLen: s.wantHeaderLen,
		PayloadLen: len(s.payload), Payload: s.payload,
	}
}

func tsOption(tsVal, tsEcr uint32) layers.TCPOption {
	data := binary.BigEndian.AppendUint32(nil, tsVal)
	return layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10,
		OptionData: binary.BigEndian.AppendUint32(data, tsEcr)}
}

func sackOption(blocks ...SACKBlock) layers.TCPOption {
	var data []byte
	for _, b := range blocks {
		data = binary.BigEndian.AppendUint32(data, b.Left)
		data = binary.BigEndian.AppendUint32(data, b.Right)
	}
	return layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(data)), OptionData: data}
}

var (
	nop             = layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1}
	mss1460         = layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}
	sackPermitted   = layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2}
	windowScale7    = layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}}
	client4         = netip.MustParseAddr("192.0.2.10")
	server4         = netip.MustParseAddr("198.51.100.20")
	client6         = netip.MustParseAddr("2001:db8::10")
	server6         = netip.MustParseAddr("2001:db8:1::20")
	noOptions       = TCPOptions{WindowScale: -1}
	synOptionsBytes = 20 // MSS 4 + SACK-permitted 2 + timestamps 10 + NOP 1 + window scale 3
)

// synSegment is a client SYN with the options Linux sends.
func synSegment(src, dst netip.Addr) testSegment {
	return testSegment{
		src: src, dst: dst, srcPort: 40000, dstPort: 443, seq: 1000, flags: FlagSYN | FlagECE | FlagCWR, window: 64240,
		options:       []layers.TCPOption{mss1460, sackPermitted, tsOption(111, 0), nop, windowScale7},
		wantHeaderLen: 20 + synOptionsBytes,
		wantOptions:   TCPOptions{MSS: 1460, WindowScale: 7, SACKPermitted: true, HasTimestamps: true, TSVal: 111},
	}
}

// dataSegment is a server data segment with timestamps and a payload.
func dataSegment(src, dst netip.Addr, payloadBytes int) testSegment {
	payload := make([]byte, payloadBytes)
	for i := range payload {
		payload[i] = byte(i*7 + 3)
	}
	return testSegment{
		src: src, dst: dst, srcPort: 443, dstPort: 40000, seq: 0xfffffff0, ack: 1001, flags: FlagACK | FlagPSH, window: 509,
		options:       []layers.TCPOption{nop, nop, tsOption(0xdeadbeef, 111)},
		payload:       payload,
		wantHeaderLen: 32,
		wantOptions:   TCPOptions{WindowScale: -1, HasTimestamps: true, TSVal: 0xdeadbeef, TSEcr: 111},
	}
}

// sackSegment is a client ACK carrying three SACK blocks.
func sackSegment(src, dst netip.Addr) testSegment {
	blocks := []SACKBlock{{5000, 6000}, {7000, 8000}, {9000, 9500}}
	return testSegment{
		src: src, dst: dst, srcPort: 40000, dstPort: 443, seq: 1001, ack: 4000, flags: FlagACK, window: 1024,
		options:       []layers.TCPOption{nop, nop, sackOption(blocks...)},
		wantHeaderLen: 20 + 28,
		wantOptions:   TCPOptions{WindowScale: -1, NumSACK: 3, SACK: [4]SACKBlock{blocks[0], blocks[1], blocks[2]}},
	}
}

// finSegment is a bare FIN/ACK without options.
func finSegment(src, dst netip.Addr) testSegment {
	return testSegment{
		src: src, dst: dst, srcPort: 443, dstPort: 40000, seq: 77, ack: 88, flags: FlagFIN | FlagACK, window: 100,
		wantHeaderLen: 20, wantOptions: noOptions,
	}
}

var serializeOptions = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

// buildIP serializes s as an IP packet.
func buildIP(t testing.TB, s testSegment) []byte {
	t.Helper()
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(s.srcPort), DstPort: layers.TCPPort(s.dstPort),
		Seq: s.seq, Ack: s.ack, Window: s.window, Options: s.options,
		FIN: s.flags&FlagFIN != 0, SYN: s.flags&FlagSYN != 0, RST: s.flags&FlagRST != 0,
		PSH: s.flags&FlagPSH != 0, ACK: s.flags&FlagACK != 0, URG: s.flags&FlagURG != 0,
		ECE: s.flags&FlagECE != 0, CWR: s.flags&FlagCWR != 0,
	}
	var stack []gopacket.SerializableLayer
	if s.isIPv6() {
		ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP, HopLimit: 64,
			SrcIP: net.IP(s.src.AsSlice()), DstIP: net.IP(s.dst.AsSlice())}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		stack = append(stack, ip)
		if len(s.ipv6Extensions) > 0 {
			ip.NextHeader = layers.IPProtocolIPv6HopByHop
			stack = append(stack, gopacket.Payload(s.ipv6Extensions))
		}
	} else {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, Id: 4242,
			Flags: s.ipv4Flags, FragOffset: s.ipv4FragOffset, Options: s.ipv4Options,
			SrcIP: net.IP(s.src.AsSlice()), DstIP: net.IP(s.dst.AsSlice())}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		stack = append(stack, ip)
	}
	stack = append(stack, tcp, gopacket.Payload(s.payload))
	return serialize(t, stack...)
}

// buildUDP serializes a UDP datagram (something that is not TCP).
func buildUDP(t testing.TB, src, dst netip.Addr) []byte {
	t.Helper()
	udp := &layers.UDP{SrcPort: 5353, DstPort: 53}
	var ip gopacket.SerializableLayer
	if src.Is6() {
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 64,
			SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		_ = udp.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	} else {
		ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		_ = udp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	}
	return serialize(t, ip, udp, gopacket.Payload("query"))
}

func serialize(t testing.TB, stack ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOptions, stack...); err != nil {
		t.Fatalf("serializing %d layers: %v", len(stack), err)
	}
	return bytes.Clone(buf.Bytes())
}

// linkFraming wraps an IP packet in one link type's header.
type linkFraming struct {
	name     string
	linkType layers.LinkType
	ipv6     bool // which IP version the case uses
	frame    func(t testing.TB, ip []byte, ipv6 bool) []byte
	tunnel   Encapsulation // what Packet.Tunnel must say
}

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
)

func etherType(ipv6 bool) layers.EthernetType {
	if ipv6 {
		return layers.EthernetTypeIPv6
	}
	return layers.EthernetTypeIPv4
}

func frameEthernet(t testing.TB, ip []byte, ipv6 bool) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: etherType(ipv6)}, gopacket.Payload(ip))
}

func frameVLAN(t testing.TB, ip []byte, ipv6 bool) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 100, Type: etherType(ipv6)}, gopacket.Payload(ip))
}

func frameQinQ(t testing.TB, ip []byte, ipv6 bool) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeQinQ},
		&layers.Dot1Q{VLANIdentifier: 200, Type: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 100, Type: etherType(ipv6)}, gopacket.Payload(ip))
}

func frameRaw(_ testing.TB, ip []byte, _ bool) []byte { return bytes.Clone(ip) }

// frameSLL writes a Linux cooked header (LINKTYPE_LINUX_SLL), as tcpdump -i any did before SLL2.
func frameSLL(_ testing.TB, ip []byte, ipv6 bool) []byte {
	h := make([]byte, 16)
	binary.BigEndian.PutUint16(h[0:2], 4) // sent by us
	binary.BigEndian.PutUint16(h[2:4], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(h[4:6], 6)
	copy(h[6:12], macA)
	binary.BigEndian.PutUint16(h[14:16], uint16(etherType(ipv6)))
	return append(h, ip...)
}

// frameSLL2 writes a Linux cooked v2 header (LINKTYPE_LINUX_SLL2).
func frameSLL2(_ testing.TB, ip []byte, ipv6 bool) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:2], uint16(etherType(ipv6)))
	binary.BigEndian.PutUint32(h[4:8], 3) // interface index
	binary.BigEndian.PutUint16(h[8:10], 1)
	h[10] = 0 // to us
	h[11] = 6
	copy(h[12:18], macB)
	return append(h, ip...)
}

// frameLoopback returns a framing for BSD loopback with the given address
// family for IPv6 (IPv4 is always 2) in the given byte order.
func frameLoopback(order binary.AppendByteOrder, familyIPv6 uint32) func(testing.TB, []byte, bool) []byte {
	return func(_ testing.TB, ip []byte, ipv6 bool) []byte {
		family := uint32(2)
		if ipv6 {
			family = familyIPv6
		}
		return append(order.AppendUint32(nil, family), ip...)
	}
}

// frameLoopbackGopacket frames with gopacket's Loopback layer (host order, little-endian).
func frameLoopbackGopacket(t testing.TB, ip []byte, ipv6 bool) []byte {
	family := layers.ProtocolFamilyIPv4
	if ipv6 {
		family = layers.ProtocolFamilyIPv6Linux
	}
	return serialize(t, &layers.Loopback{Family: family}, gopacket.Payload(ip))
}

// linkFramings are every framing the tests write: these and encapFramings.
var linkFramings = append([]linkFraming{
	{"ethernet-ipv4", layers.LinkTypeEthernet, false, frameEthernet, 0},
	{"ethernet-ipv6", layers.LinkTypeEthernet, true, frameEthernet, 0},
	{"vlan-ipv4", layers.LinkTypeEthernet, false, frameVLAN, 0},
	{"vlan-ipv6", layers.LinkTypeEthernet, true, frameVLAN, 0},
	{"qinq-ipv4", layers.LinkTypeEthernet, false, frameQinQ, 0},
	{"qinq-ipv6", layers.LinkTypeEthernet, true, frameQinQ, 0},
	{"raw101-ipv4", layers.LinkTypeRaw, false, frameRaw, 0},
	{"raw101-ipv6", layers.LinkTypeRaw, true, frameRaw, 0},
	{"dlt12-ipv4", 12, false, frameRaw, 0},
	{"dlt14-ipv6", 14, true, frameRaw, 0},
	{"linktype-ipv4", layers.LinkTypeIPv4, false, frameRaw, 0},
	{"linktype-ipv6", layers.LinkTypeIPv6, true, frameRaw, 0},
	{"sll-ipv4", layers.LinkTypeLinuxSLL, false, frameSLL, 0},
	{"sll-ipv6", layers.LinkTypeLinuxSLL, true, frameSLL, 0},
	{"sll2-ipv4", layers.LinkTypeLinuxSLL2, false, frameSLL2, 0},
	{"sll2-ipv6", layers.LinkTypeLinuxSLL2, true, frameSLL2, 0},
	{"null-le-ipv4", layers.LinkTypeNull, false, frameLoopbackGopacket, 0},
	{"null-le-ipv6-linux", layers.LinkTypeNull, true, frameLoopbackGopacket, 0},
	{"null-le-ipv6-bsd24", layers.LinkTypeNull, true, frameLoopback(binary.LittleEndian, 24), 0},
	{"null-le-ipv6-freebsd28", layers.LinkTypeNull, true, frameLoopback(binary.LittleEndian, 28), 0},
	{"null-be-ipv4", layers.LinkTypeNull, false, frameLoopback(binary.BigEndian, 30), 0},
	{"null-be-ipv6-darwin30", layers.LinkTypeNull, true, frameLoopback(binary.BigEndian, 30), 0},
	{"loop-ipv4", layers.LinkTypeLoop, false, frameLoopback(binary.BigEndian, 24), 0},
	{"loop-ipv6", layers.LinkTypeLoop, true, frameLoopback(binary.BigEndian, 24), 0},
}, encapFramings...)

// testRecord is one record to write: captured bytes, wire length, link type
// (pcapng: one interface per link type) and time.
type testRecord struct {
	data        []byte
	wireBytes   int // 0: len(data)
	linkType    layers.LinkType
	timestampNs int64
}

// baseTimestampNs has a nanosecond part, so microsecond files lose some of it.
const baseTimestampNs = 1_700_000_000_123_456_789

// recordTime is the timestamp of the i-th record of a test file.
func recordTime(i int) int64 { return baseTimestampNs + int64(i)*1_000_001_001 }

// fileFormat writes records as one kind of capture file.
type fileFormat struct {
	name         string
	resolutionNs int64 // timestamps are multiples of this once written
	write        func(t testing.TB, snaplen int, records []testRecord) []byte
}

var fileFormats = []fileFormat{
	{"pcap-usec-le", 1000, func(t testing.TB, snaplen int, recs []testRecord) []byte {
		return writePcapgo(t, pcapgo.NewWriter, snaplen, recs)
	}},
	{"pcap-nsec-le", 1, func(t testing.TB, snaplen int, recs []testRecord) []byte {
		return writePcapgo(t, pcapgo.NewWriterNanos, snaplen, recs)
	}},
	{"pcap-usec-be", 1000, func(t testing.TB, snaplen int, recs []testRecord) []byte {
		return writePcapByHand(t, binary.BigEndian, false, snaplen, recs)
	}},
	{"pcap-nsec-be", 1, func(t testing.TB, snaplen int, recs []testRecord) []byte {
		return writePcapByHand(t, binary.BigEndian, true, snaplen, recs)
	}},
	{"pcapng", 1, writePcapng},
}

func writePcapgo(t testing.TB, newWriter func(io.Writer) *pcapgo.Writer, snaplen int, recs []testRecord) []byte {
	t.Helper()
	var out bytes.Buffer
	w := newWriter(&out)
	if err := w.WriteFileHeader(uint32(snaplen), recs[0].linkType); err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.WritePacket(captureInfo(rec), rec.data); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func captureInfo(rec testRecord) gopacket.CaptureInfo {
	wire := rec.wireBytes
	if wire == 0 {
		wire = len(rec.data)
	}
	return gopacket.CaptureInfo{Timestamp: time.Unix(0, rec.timestampNs), CaptureLength: len(rec.data), Length: wire}
}

// writePcapByHand writes the pcap format in any byte order (pcapgo.Writer
// writes little-endian only).
func writePcapByHand(t testing.TB, order binary.AppendByteOrder, nanos bool, snaplen int, recs []testRecord) []byte {
	t.Helper()
	magic := uint32(0xa1b2c3d4)
	if nanos {
		magic = 0xa1b23c4d
	}
	out := order.AppendUint32(nil, magic)
	out = order.AppendUint16(out, 2)
	out = order.AppendUint16(out, 4)
	out = order.AppendUint32(out, 0) // thiszone
	out = order.AppendUint32(out, 0) // sigfigs
	out = order.AppendUint32(out, uint32(snaplen))
	out = order.AppendUint32(out, uint32(recs[0].linkType))
	for _, rec := range recs {
		ci := captureInfo(rec)
		fraction := rec.timestampNs % 1e9
		if !nanos {
			fraction /= 1000
		}
		out = order.AppendUint32(out, uint32(rec.timestampNs/1e9))
		out = order.AppendUint32(out, uint32(fraction))
		out = order.AppendUint32(out, uint32(ci.CaptureLength))
		out = order.AppendUint32(out, uint32(ci.Length))
		out = append(out, rec.data...)
	}
	return out
}

// writePcapng writes records as pcapng with one interface per link type, in
// order of first appearance.
func writePcapng(t testing.TB, snaplen int, recs []testRecord) []byte {
	t.Helper()
	var out bytes.Buffer
	var interfaceOf []layers.LinkType
	iface := func(lt layers.LinkType) pcapgo.NgInterface {
		i := pcapgo.DefaultNgInterface
		i.Name = "test" + lt.String()
		i.OS = "test"
		i.LinkType = lt
		i.SnapLength = uint32(snaplen)
		return i
	}
	options := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "capture tests"}} // the same on every machine
	w, err := pcapgo.NewNgWriterInterface(&out, iface(recs[0].linkType), options)
	if err != nil {
		t.Fatal(err)
	}
	interfaceOf = append(interfaceOf, recs[0].linkType)
	for _, rec := range recs {
		index := -1
		for i, lt := range interfaceOf {
			if lt == rec.linkType {
				index = i
			}
		}
		if index < 0 {
			if index, err = w.AddInterface(iface(rec.linkType)); err != nil {
				t.Fatal(err)
			}
			interfaceOf = append(interfaceOf, rec.linkType)
		}
		ci := captureInfo(rec)
		ci.InterfaceIndex = index
		if err := w.WritePacket(ci, rec.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
