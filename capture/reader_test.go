package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// readAll reads every packet of a capture held in memory, copying payloads.
func readAll(t testing.TB, file []byte) ([]Packet, Stats, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, Stats{}, err
	}
	var packets []Packet
	for {
		var p Packet
		err := r.Next(&p)
		if err == io.EOF {
			break
		}
		if err != nil {
			return packets, r.Stats(), err
		}
		p.Payload = bytes.Clone(p.Payload)
		packets = append(packets, p)
		if len(packets) > 1_000_000 {
			t.Fatal("Next keeps returning packets: it does not advance")
		}
	}
	if err := r.Next(&Packet{}); err != io.EOF {
		t.Errorf("Next after io.EOF: got %v, want io.EOF again", err)
	}
	return packets, r.Stats(), nil
}

// diffPacket describes how got differs from want, or returns "".
func diffPacket(got, want Packet) string {
	g, w := got, want
	g.Payload, w.Payload = nil, nil
	var diffs []string
	if !reflect.DeepEqual(g, w) {
		diffs = append(diffs, fmt.Sprintf("\n got  %+v\n want %+v", g, w))
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		diffs = append(diffs, fmt.Sprintf("\n payload: got %d bytes % x…, want %d bytes % x…",
			len(got.Payload), got.Payload[:min(8, len(got.Payload))], len(want.Payload), want.Payload[:min(8, len(want.Payload))]))
	}
	return strings.Join(diffs, "")
}

// wantLinkTypeName is how Stats must name each link type, written out by hand.
var wantLinkTypeName = map[layers.LinkType]string{
	layers.LinkTypeEthernet: "Ethernet", layers.LinkTypeRaw: "Raw", 12: "Raw", 14: "Raw",
	layers.LinkTypeIPv4: "IPv4", layers.LinkTypeIPv6: "IPv6",
	layers.LinkTypeLinuxSLL: "Linux SLL", layers.LinkTypeLinuxSLL2: "Linux SLL2",
	layers.LinkTypeNull: "Null", layers.LinkTypeLoop: "Loop",
	layers.LinkTypePPP: "PPP", layers.LinkTypePPP_HDLC: "PPP in HDLC framing", 51: "PPPoE",
	layers.LinkTypeC_HDLC: "Cisco HDLC", layers.LinkTypeFDDI: "FDDI", layers.LinkTypeIEEE802_11: "802.11",
	layers.LinkTypeIEEE80211Radio: "802.11 radiotap", 239: "NFLOG", layers.LinkTypePFLog: "PFLOG",
	242: "IP over InfiniBand", 258: "PKTAP", 149: "PKTAP",
}

// TestReaderLinkTypesAndFormats writes the same connection for every link type
// in every file format and checks every decoded field and the stats.
func TestReaderLinkTypesAndFormats(t *testing.T) {
	for _, framing := range linkFramings {
		client, server := client4, server4
		if framing.ipv6 {
			client, server = client6, server6
		}
		segments := []testSegment{synSegment(client, server), dataSegment(server, client, 300), sackSegment(client, server), finSegment(server, client)}
		// Records: SYN, data, a UDP datagram, SACK, FIN.
		var records []testRecord
		var wantRecordIndex []int
		for i, seg := range segments {
			if i == 2 {
				udp := framing.frame(t, buildUDP(t, client, server), framing.ipv6)
				records = append(records, testRecord{data: udp, linkType: framing.linkType, timestampNs: recordTime(len(records))})
			}
			wantRecordIndex = append(wantRecordIndex, len(records))
			records = append(records, testRecord{data: framing.frame(t, buildIP(t, seg), framing.ipv6), linkType: framing.linkType, timestampNs: recordTime(len(records))})
		}

		for _, format := range fileFormats {
			t.Run(framing.name+"/"+format.name, func(t *testing.T) {
				file := format.write(t, 65535, records)
				packets, stats, err := readAll(t, file)
				if err != nil {
					t.Fatalf("reading: %v", err)
				}
				if len(packets) != len(segments) {
					t.Fatalf("got %d packets, want %d (stats %+v)", len(packets), len(segments), stats)
				}
				for i, seg := range segments {
					want := seg.want()
					want.Tunnel = framing.tunnel
					want.TimestampNs = recordTime(wantRecordIndex[i]) / format.resolutionNs * format.resolutionNs
					if d := diffPacket(packets[i], want); d != "" {
						t.Errorf("packet %d:%s", i, d)
					}
				}
				wantFormat := FormatPcap
				if format.name == "pcapng" {
					wantFormat = FormatPcapng
				}
				wantStats := Stats{
					Format: wantFormat, LinkTypes: []string{wantLinkTypeName[framing.linkType]}, Snaplen: 65535,
					Records: 5, TCP: 4, NonTCP: 1, Tunnels: framing.tunnel,
					FirstNs: recordTime(0) / format.resolutionNs * format.resolutionNs,
					LastNs:  recordTime(4) / format.resolutionNs * format.resolutionNs,
				}
				if !reflect.DeepEqual(stats, wantStats) {
					t.Errorf("stats:\n got  %+v\n want %+v", stats, wantStats)
				}
			})
		}
	}
}

// TestPcapngInterfaces reads a pcapng file whose interfaces have different link types.
func TestPcapngInterfaces(t *testing.T) {
	type step struct {
		linkType      layers.LinkType
		frame         func(testing.TB, []byte, bool) []byte
		segment       testSegment
		wantInterface int
	}
	steps := []step{
		{layers.LinkTypeEthernet, frameVLAN, synSegment(client4, server4), 0},
		{layers.LinkTypeLinuxSLL2, frameSLL2, dataSegment(server6, client6, 50), 1},
		{layers.LinkTypeEthernet, frameEthernet, sackSegment(client4, server4), 0},
		{layers.LinkTypeRaw, frameRaw, finSegment(server6, client6), 2},
		{layers.LinkTypeLinuxSLL2, frameSLL2, finSegment(server4, client4), 1},
	}
	var records []testRecord
	for i, s := range steps {
		records = append(records, testRecord{data: s.frame(t, buildIP(t, s.segment), s.segment.isIPv6()), linkType: s.linkType, timestampNs: recordTime(i)})
	}
	packets, stats, err := readAll(t, writePcapng(t, 262144, records))
	if err != nil {
		t.Fatal(err)
	}
	if len(packets) != len(steps) {
		t.Fatalf("got %d packets, want %d", len(packets), len(steps))
	}
	for i, s := range steps {
		want := s.segment.want()
		want.TimestampNs = recordTime(i)
		want.Interface = s.wantInterface
		if d := diffPacket(packets[i], want); d != "" {
			t.Errorf("packet %d:%s", i, d)
		}
	}
	wantLinkTypes := []string{"Ethernet", "Linux SLL2", "Raw"}
	if !slices.Equal(stats.LinkTypes, wantLinkTypes) || stats.Snaplen != 262144 || stats.Format != FormatPcapng {
		t.Errorf("stats %+v: want link types %q, snaplen 262144, format pcapng", stats, wantLinkTypes)
	}
}

// Record outcomes, as counted in Stats.
const (
	wantTCP = iota
	wantNonTCP
	wantFragment
	wantUndecodable
)

// ipv6ExtensionHeaders are hop-by-hop, destination options and a routing
// header with no segments left, each 8 bytes, ending in TCP.
var ipv6ExtensionHeaders = []byte{
	60, 0, 1, 4, 0, 0, 0, 0, // hop-by-hop -> destination options; PadN
	43, 0, 1, 4, 0, 0, 0, 0, // destination options -> routing; PadN
	6, 0, 4, 0, 0, 0, 0, 0, // routing (type 4, segments left 0) -> TCP
}

func withIPv6Extensions(s testSegment, ext []byte) testSegment {
	s.ipv6Extensions = ext
	return s
}

func withPayload(s testSegment, payloadBytes int) testSegment {
	s = withOptions(s, s.options, s.wantHeaderLen, s.wantOptions)
	s.payload = dataSegment(s.src, s.dst, payloadBytes).payload
	return s
}

func withOptions(s testSegment, options []layers.TCPOption, headerLen int, want TCPOptions) testSegment {
	s.options, s.wantHeaderLen, s.wantOptions = options, headerLen, want
	return s
}

// patch returns a copy of data with the bytes at offset replaced.
func patch(data []byte, offset int, replacement ...byte) []byte {
	data = bytes.Clone(data)
	copy(data[offset:], replacement)
	return data
}

// TestRecordOutcomes checks single records: what they count as and, for TCP,
// every decoded field. Snaplen cuts, padding, extension headers, fragments,
// malformed headers.
func TestRecordOutcomes(t *testing.T) {
	ip4 := func(s testSegment) []byte { return buildIP(t, s) }
	syn4 := synSegment(client4, server4)
	data4 := dataSegment(server4, client4, 1000)
	data6ext := withIPv6Extensions(dataSegment(server6, client6, 1000), ipv6ExtensionHeaders)
	fin4 := finSegment(server4, client4)
	sack4 := sackSegment(client4, server4)

	fourBlocks := []SACKBlock{{1, 2}, {3, 4}, {5, 6}, {0xfffffff0, 0x10}}
	sack4blocks := withOptions(sack4, []layers.TCPOption{nop, nop, sackOption(fourBlocks...)}, 20+36,
		TCPOptions{WindowScale: -1, NumSACK: 4, SACK: [4]SACKBlock(fourBlocks)})
	bigScale := withOptions(syn4, []layers.TCPOption{mss1460, nop, {OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{20}}},
		28, TCPOptions{MSS: 1460, WindowScale: 14})
	mssThenTimestamps := withOptions(syn4, []layers.TCPOption{mss1460, tsOption(5, 6), nop, nop}, 36,
		TCPOptions{MSS: 1460, WindowScale: -1, HasTimestamps: true, TSVal: 5, TSEcr: 6})
	ipv4WithOptions := syn4
	ipv4WithOptions.ipv4Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}} // router alert

	paddedFin := frameEthernet(t, ip4(fin4), false) // 54 bytes, padded to 60 by gopacket
	if len(paddedFin) != 60 {
		t.Fatalf("padded frame is %d bytes, want 60", len(paddedFin))
	}
	paddedFin = patch(paddedFin, 54, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee)

	fragmentHeader := func(offset uint16, more bool) []byte {
		h := []byte{6, 0, 0, 0, 0, 0, 0x12, 0x34}
		v := offset << 3
		if more {
			v |= 1
		}
		binary.BigEndian.PutUint16(h[2:4], v)
		return h
	}
	atomicFragment := withIPv6Extensions(finSegment(server6, client6), append([]byte{44, 0, 1, 4, 0, 0, 0, 0}, fragmentHeader(0, false)...))
	firstFragment6 := withIPv6Extensions(finSegment(server6, client6), append([]byte{44, 0, 1, 4, 0, 0, 0, 0}, fragmentHeader(0, true)...))
	firstFragment4 := fin4
	firstFragment4.ipv4Flags = layers.IPv4MoreFragments
	laterFragment4 := fin4
	laterFragment4.ipv4FragOffset = 185

	arp := serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: 1, SourceHwAddress: macA, SourceProtAddress: client4.AsSlice(), DstHwAddress: macB, DstProtAddress: server4.AsSlice()})
	icmp := serialize(t, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: client4.AsSlice(), DstIP: server4.AsSlice()},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)})

	// want describes a decoded packet: the segment's fields with the payload
	// cut to capturedPayloadBytes (-1: all of it).
	want := func(s testSegment, capturedPayloadBytes int) Packet {
		p := s.want()
		if capturedPayloadBytes >= 0 {
			p.Payload = s.payload[:capturedPayloadBytes]
		}
		return p
	}
	tsoData := ip4(withPayload(fin4, 3000))
	tsoData = patch(tsoData, 2, 0, 0) // IPv4 total length 0, as segmentation offload writes

	cases := []struct {
		name      string
		linkType  layers.LinkType
		data      []byte
		wireBytes int // 0: len(data)
		outcome   int
		want      Packet
	}{
		{"ethernet padding is not payload", layers.LinkTypeEthernet, paddedFin, 0, wantTCP, want(fin4, -1)},
		{"ipv4 options", layers.LinkTypeRaw, ip4(ipv4WithOptions), 0, wantTCP, want(syn4, -1)},
		{"ipv6 extension headers", layers.LinkTypeRaw, ip4(data6ext), 0, wantTCP, want(data6ext, -1)},
		{"ipv6 atomic fragment is whole", layers.LinkTypeRaw, ip4(atomicFragment), 0, wantTCP, want(atomicFragment, -1)},
		{"four sack blocks", layers.LinkTypeRaw, ip4(sack4blocks), 0, wantTCP, want(sack4blocks, -1)},
		{"window scale above 14 reads as 14", layers.LinkTypeRaw, ip4(bigScale), 0, wantTCP, want(bigScale, -1)},
		{"malformed option length stops options", layers.LinkTypeRaw, patch(ip4(mssThenTimestamps), 20+20+4+1, 1), 0, wantTCP,
			want(withOptions(mssThenTimestamps, nil, 36, TCPOptions{MSS: 1460, WindowScale: -1}), -1)},
		{"wrong-length mss is ignored", layers.LinkTypeRaw, patch(ip4(mssThenTimestamps), 20+20, 2, 3, 5, 0x90), 0, wantTCP,
			want(withOptions(mssThenTimestamps, nil, 36, TCPOptions{WindowScale: -1}), -1)},

		// Snaplen cuts: PayloadLen from the IP header, Payload what was captured.
		{"snaplen 96 ethernet ipv4", layers.LinkTypeEthernet, frameEthernet(t, ip4(data4), false)[:96], 14 + 20 + 32 + 1000, wantTCP, want(data4, 96-14-20-32)},
		{"snaplen 96 vlan ipv4", layers.LinkTypeEthernet, frameVLAN(t, ip4(data4), false)[:96], 18 + 20 + 32 + 1000, wantTCP, want(data4, 96-18-20-32)},
		{"snaplen 96 raw ipv6 extension headers", layers.LinkTypeRaw, ip4(data6ext)[:96], 40 + 24 + 32 + 1000, wantTCP, want(data6ext, 0)},
		{"snaplen cut inside timestamps option", layers.LinkTypeRaw, ip4(syn4)[:20+20+4+2+4], 60, wantTCP,
			want(withOptions(syn4, nil, 40, TCPOptions{MSS: 1460, WindowScale: -1, SACKPermitted: true}), -1)},
		{"snaplen cut after the kind byte of an option", layers.LinkTypeRaw, ip4(syn4)[:20+20+4+2+10+1+1], 60, wantTCP,
			want(withOptions(syn4, nil, 40, TCPOptions{MSS: 1460, WindowScale: -1, SACKPermitted: true, HasTimestamps: true, TSVal: 111}), -1)},
		{"snaplen cut inside sack option", layers.LinkTypeRaw, ip4(sack4)[:20+20+2+2+12], 20 + 48, wantTCP,
			want(withOptions(sack4, nil, 48, TCPOptions{WindowScale: -1}), -1)},
		{"segmentation offload: ipv4 length 0, cut", layers.LinkTypeRaw, tsoData[:200], len(tsoData), wantTCP,
			want(withPayload(fin4, 3000), 200-40)},

		// Not TCP.
		{"udp", layers.LinkTypeEthernet, frameEthernet(t, buildUDP(t, client4, server4), false), 0, wantNonTCP, Packet{}},
		{"arp", layers.LinkTypeEthernet, arp, 0, wantNonTCP, Packet{}},
		{"icmp", layers.LinkTypeRaw, icmp, 0, wantNonTCP, Packet{}},
		{"unsupported link type", 147, ip4(fin4), 0, wantNonTCP, Packet{}},
		{"ipv4 first fragment", layers.LinkTypeRaw, ip4(firstFragment4), 0, wantFragment, Packet{}},
		{"ipv4 later fragment", layers.LinkTypeRaw, ip4(laterFragment4), 0, wantFragment, Packet{}},
		{"ipv6 first fragment", layers.LinkTypeRaw, ip4(firstFragment6), 0, wantFragment, Packet{}},

		// Undecodable.
		{"ethernet frame too short", layers.LinkTypeEthernet, paddedFin[:10], 0, wantUndecodable, Packet{}},
		{"raw record that is not IP", layers.LinkTypeRaw, patch(ip4(fin4), 0, 0x55), 0, wantUndecodable, Packet{}},
		{"ip header cut", layers.LinkTypeRaw, ip4(fin4)[:16], 40, wantUndecodable, Packet{}},
		{"fixed tcp header cut", layers.LinkTypeRaw, ip4(syn4)[:20+19], 60, wantUndecodable, Packet{}},
		{"tcp data offset below 5", layers.LinkTypeRaw, patch(ip4(fin4), 20+12, 0x40), 0, wantUndecodable, Packet{}},
		{"ip length shorter than the tcp header", layers.LinkTypeRaw, patch(ip4(fin4), 20+12, 0xf0), 0, wantUndecodable, Packet{}},
		{"loopback family not IP", layers.LinkTypeNull, append([]byte{7, 0, 0, 0}, ip4(fin4)...), 0, wantNonTCP, Packet{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writePcapByHand(t, binary.LittleEndian, true, 65535,
				[]testRecord{{data: tc.data, wireBytes: tc.wireBytes, linkType: tc.linkType, timestampNs: recordTime(0)}})
			packets, stats, err := readAll(t, file)
			if err != nil {
				t.Fatal(err)
			}
			wantStats := Stats{Records: 1}
			switch tc.outcome {
			case wantTCP:
				wantStats.TCP = 1
			case wantNonTCP:
				wantStats.NonTCP = 1
			case wantFragment:
				wantStats.NonTCP, wantStats.Fragments = 1, 1
			case wantUndecodable:
				wantStats.Undecodable = 1
			}
			type counts struct{ records, tcp, nonTCP, fragments, undecodable int64 }
			got := counts{stats.Records, stats.TCP, stats.NonTCP, stats.Fragments, stats.Undecodable}
			wantCounts := counts{wantStats.Records, wantStats.TCP, wantStats.NonTCP, wantStats.Fragments, wantStats.Undecodable}
			if got != wantCounts {
				t.Fatalf("counts: got %+v, want %+v", got, wantCounts)
			}
			if tc.outcome != wantTCP {
				return
			}
			w := tc.want
			w.TimestampNs = recordTime(0)
			if d := diffPacket(packets[0], w); d != "" {
				t.Error(d)
			}
			if len(packets[0].Payload) > packets[0].PayloadLen {
				t.Errorf("captured payload %d > PayloadLen %d", len(packets[0].Payload), packets[0].PayloadLen)
			}
		})
	}
}

// TestNewReaderErrors checks files that are not captures, empty or cut in their header.
func TestNewReaderErrors(t *testing.T) {
	validPcap := writePcapByHand(t, binary.LittleEndian, false, 96, []testRecord{{data: buildIP(t, finSegment(server4, client4)), linkType: layers.LinkTypeRaw}})
	validPcapng := writePcapng(t, 96, []testRecord{{data: buildIP(t, finSegment(server4, client4)), linkType: layers.LinkTypeRaw}})
	cases := []struct {
		name    string
		file    []byte
		wantErr error
		wantMsg string
	}{
		{"empty", nil, ErrEmpty, "empty"},
		{"text", []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), ErrNotCapture, "not a pcap or pcapng file"},
		{"two bytes", []byte{0xd4, 0xc3}, ErrNotCapture, "not a pcap or pcapng file"},
		{"pcap header cut", validPcap[:10], io.ErrUnexpectedEOF, "ends inside its header"},
		{"pcapng header cut", validPcapng[:20], io.ErrUnexpectedEOF, "ends inside its header"},
		{"pcap with unknown version", patch(validPcap, 4, 9), ErrDamaged, "version"},
		{"pcap with unknown minor version", patch(validPcap, 6, 5), ErrDamaged, "version 2.5"},
		{"pcapng with unknown version", patch(validPcapng, 12, 2), ErrDamaged, "version 2.0"},
		{"gzip of nothing", gzipBytes(t, nil), ErrEmpty, "empty"},
		{"gzip of text", gzipBytes(t, []byte("hello, world")), ErrNotCapture, "not a pcap or pcapng file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tc.file))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got reader %v, error %v; want %v", r, err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
		})
	}
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.NoCompression) // stored blocks: the same bytes with every Go version
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestNoRecords: a capture with a header and nothing else is valid and empty.
func TestNoRecords(t *testing.T) {
	var pcapHeaderOnly bytes.Buffer
	pcapHeaderOnly.Write(writePcapByHand(t, binary.BigEndian, true, 200, []testRecord{{linkType: layers.LinkTypeRaw}})[:24])
	for name, file := range map[string][]byte{
		"pcap":   pcapHeaderOnly.Bytes(),
		"pcapng": writePcapngHeaderOnly(t),
	} {
		t.Run(name, func(t *testing.T) {
			packets, stats, err := readAll(t, file)
			if err != nil || len(packets) != 0 || stats.Records != 0 || stats.Truncated || stats.Format != name {
				t.Errorf("got %d packets, stats %+v, error %v; want none, format %s, no error", len(packets), stats, err, name)
			}
		})
	}
}

// writePcapngHeaderOnly writes a pcapng section header and one interface, no packets.
func writePcapngHeaderOnly(t testing.TB) []byte {
	file := writePcapng(t, 0, []testRecord{{data: []byte{0x45}, linkType: layers.LinkTypeEthernet}})
	// The last block is the packet: its length is in the block's second word.
	// Walk the blocks and drop the enhanced packet block.
	var out []byte
	for rest := file; len(rest) >= 8; {
		n := int(binary.LittleEndian.Uint32(rest[4:8]))
		if binary.LittleEndian.Uint32(rest[0:4]) != 6 {
			out = append(out, rest[:n]...)
		}
		rest = rest[n:]
	}
	return out
}

// TestTruncatedFile: a file cut inside its last record gives the whole records
// before it, then io.EOF, with Stats.Truncated set.
func TestTruncatedFile(t *testing.T) {
	segments := []testSegment{synSegment(client4, server4), dataSegment(server4, client4, 500), finSegment(server4, client4)}
	var records []testRecord
	for i, s := range segments {
		records = append(records, testRecord{data: frameEthernet(t, buildIP(t, s), false), linkType: layers.LinkTypeEthernet, timestampNs: recordTime(i)})
	}
	lastRecordBytes := len(records[2].data)
	for _, format := range fileFormats {
		file := format.write(t, 65535, records)
		cuts := map[string]int{"inside the data": 10, "at the start of the data": lastRecordBytes + 4}
		if strings.HasPrefix(format.name, "pcap-") {
			cuts["inside the record header"] = lastRecordBytes + 8
		} else {
			cuts["inside the block trailer"] = 2
		}
		for where, cutBytes := range cuts {
			t.Run(format.name+"/"+where, func(t *testing.T) {
				packets, stats, err := readAll(t, file[:len(file)-cutBytes])
				if err != nil {
					t.Fatal(err)
				}
				if len(packets) != 2 || !stats.Truncated || stats.Records != 2 {
					t.Fatalf("got %d packets, stats %+v; want 2 packets, 2 records, truncated", len(packets), stats)
				}
				if d := diffPacket(packets[1], func() Packet {
					p := segments[1].want()
					p.TimestampNs = recordTime(1) / format.resolutionNs * format.resolutionNs
					return p
				}()); d != "" {
					t.Error(d)
				}
			})
		}
	}
	t.Run("whole file is not truncated", func(t *testing.T) {
		_, stats, err := readAll(t, fileFormats[0].write(t, 65535, records))
		if err != nil || stats.Truncated || stats.Records != 3 {
			t.Errorf("stats %+v, error %v: want 3 records, not truncated", stats, err)
		}
	})
}

// TestDamagedRecord: a record length no capture can have stops the reader with ErrDamaged.
func TestDamagedRecord(t *testing.T) {
	rec := testRecord{data: buildIP(t, finSegment(server4, client4)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}
	file := writePcapByHand(t, binary.LittleEndian, false, 200, []testRecord{rec, rec})
	second := 24 + 16 + len(rec.data)
	file = patch(file, second+8, 0xff, 0xff, 0xff, 0x0f) // captured length 256 MiB
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := r.Next(&p); err != nil {
		t.Fatalf("first record: %v", err)
	}
	for range 2 { // the error sticks
		if err := r.Next(&p); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "record 2") {
			t.Fatalf("second record: got %v, want ErrDamaged naming record 2", err)
		}
	}
}

// TestOpen reads from a file and checks Open's errors.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.pcapng.gz")
	records := []testRecord{{data: buildIP(t, synSegment(client6, server6)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}}
	if err := os.WriteFile(path, gzipBytes(t, writePcapng(t, 200, records)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := r.Next(&p); err != nil {
		t.Fatal(err)
	}
	want := synSegment(client6, server6).want()
	want.TimestampNs = recordTime(0)
	if d := diffPacket(p, want); d != "" {
		t.Error(d)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	_, err = Open(filepath.Join(dir, "missing.pcap"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.pcap") {
		t.Errorf("missing file: got %v, want fs.ErrNotExist naming the file", err)
	}
	empty := filepath.Join(dir, "empty.pcap")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty file: got %v, want ErrEmpty naming the file", err)
	}
}

// allocTestFile builds a capture of many packets for the allocation test and the benchmark.
func allocTestFile(t testing.TB, format fileFormat, framings []linkFraming, packets int) []byte {
	t.Helper()
	var records []testRecord
	for i := range packets {
		framing := framings[i%len(framings)]
		client, server := client4, server4
		if framing.ipv6 {
			client, server = client6, server6
		}
		var seg testSegment
		switch i % 4 {
		case 0:
			seg = dataSegment(server, client, 1448)
		case 1:
			seg = sackSegment(client, server)
		case 2:
			seg = dataSegment(server, client, 100)
		default:
			seg = finSegment(server, client)
		}
		data := framing.frame(t, buildIP(t, seg), framing.ipv6)
		if i%3 == 0 {
			data = buildUDPFramed(t, framing, client, server)
		}
		records = append(records, testRecord{data: data, linkType: framing.linkType, timestampNs: recordTime(i)})
	}
	return format.write(t, 65535, records)
}

func buildUDPFramed(t testing.TB, framing linkFraming, client, server netip.Addr) []byte {
	return framing.frame(t, buildUDP(t, client, server), framing.ipv6)
}

func framingNamed(t testing.TB, names ...string) []linkFraming {
	var out []linkFraming
	for _, name := range names {
		i := slices.IndexFunc(linkFramings, func(f linkFraming) bool { return f.name == name })
		if i < 0 {
			t.Fatalf("no link framing %q", name)
		}
		out = append(out, linkFramings[i])
	}
	return out
}

// TestNextAllocatesNothing holds the steady state of Next to zero allocations.
func TestNextAllocatesNothing(t *testing.T) {
	cases := []struct {
		name      string
		format    fileFormat
		framings  []string
		maxAllocs float64
	}{
		{"pcap ethernet ipv4 and vlan ipv6", fileFormats[0], []string{"ethernet-ipv4", "vlan-ipv6"}, 0},
		{"pcap big-endian raw", fileFormats[3], []string{"raw101-ipv4", "raw101-ipv6"}, 0},
		{"pcap sll2", fileFormats[1], []string{"sll2-ipv4", "sll2-ipv6"}, 0},
		{"pcap null", fileFormats[1], []string{"null-le-ipv6-bsd24", "null-le-ipv4"}, 0},
		{"pcapng ethernet, sll and raw interfaces", fileFormats[4], []string{"qinq-ipv4", "sll-ipv6", "raw101-ipv4"}, 0},
		{"pcap tunnels", fileFormats[0], []string{"vxlan4789-ipv4", "pppoe-qinq-ipv6", "mpls-stack-ipv6", "gre-key-seq-6in4", "erspan3-ipv4", "aruba-gre-ipv4", "6in4-ipv6"}, 0},
		{"pcap radiotap", fileFormats[0], []string{"radiotap127-fcs-ipv4", "radiotap127-fcs-datapad-ipv6"}, 0},
		{"pcap nflog", fileFormats[0], []string{"nflog239-ipv4", "nflog239-ipv6"}, 0},
		// Link type numbers above 255 (SLL2 is 276) in pcapng: pcapgo's
		// reader boxed them into an interface, an allocation per record.
		{"pcapng sll2", fileFormats[4], []string{"sll2-ipv4"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := allocTestFile(t, tc.format, framingNamed(t, tc.framings...), 2000)
			r, err := NewReader(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			var p Packet
			for range 50 { // warm up: buffers grow to their final size
				if err := r.Next(&p); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(500, func() {
				if err := r.Next(&p); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > tc.maxAllocs {
				t.Errorf("Next allocates %.2f times per packet, want at most %v", allocs, tc.maxAllocs)
			}
			if r.Stats().TCP < 500 {
				t.Errorf("only %d TCP packets were read", r.Stats().TCP)
			}
		})
	}
}

// BenchmarkReaderNext reads a generated in-memory pcap (Ethernet, IPv4 and
// IPv6, a third of records UDP) over and over.
func BenchmarkReaderNext(b *testing.B) {
	benchmarkReaderNext(b, "ethernet-ipv4", "vlan-ipv6")
}

// BenchmarkReaderNextTunnels is BenchmarkReaderNext through VXLAN, PPPoE over
// QinQ, MPLS and GRE.
func BenchmarkReaderNextTunnels(b *testing.B) {
	benchmarkReaderNext(b, "vxlan4789-ipv4", "pppoe-qinq-ipv6", "mpls-stack-ipv4", "gre-key-seq-6in4")
}

// BenchmarkReaderNextPcapng is BenchmarkReaderNext from a pcapng file.
func BenchmarkReaderNextPcapng(b *testing.B) {
	benchmarkReaderNextFormat(b, fileFormats[4], "ethernet-ipv4", "vlan-ipv6")
}

func benchmarkReaderNext(b *testing.B, framings ...string) {
	benchmarkReaderNextFormat(b, fileFormats[0], framings...)
}

func benchmarkReaderNextFormat(b *testing.B, format fileFormat, framings ...string) {
	file := allocTestFile(b, format, framingNamed(b, framings...), 10000)
	newReader := func() *Reader {
		r, err := NewReader(bytes.NewReader(file))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	r := newReader()
	var p Packet
	var payloadBytes int64
	b.ReportAllocs()
	b.SetBytes(int64(len(file)) / 10000)
	b.ResetTimer()
	for range b.N {
		err := r.Next(&p)
		if err == io.EOF {
			b.StopTimer()
			r = newReader()
			b.StartTimer()
			err = r.Next(&p)
		}
		if err != nil {
			b.Fatal(err)
		}
		payloadBytes += int64(p.PayloadLen)
	}
	if b.N >= 10 && payloadBytes == 0 {
		b.Fatal("no payload was decoded")
	}
}

// TestOldPcapVersions reads pcap files with version 2.0 and 2.1 headers
// (pcapgo refuses them). Expected values from tshark 4.0: frames, the first
// and last frame.time_epoch, and the first datagram (-T fields -e ip.src -e
// udp.srcport -e ip.dst -e udp.dstport -e udp.length). The 2.0 file comes
// from a fuzzer: its record header has the captured and original lengths
// swapped, as libpcap and Wireshark read them before version 2.3 (frame.len
// 524501, frame.cap_len 197), and 2 bytes after the record.
func TestOldPcapVersions(t *testing.T) {
	cases := []struct {
		file            string
		records, udp    int64
		firstNs, lastNs int64
		src, dst        string
		sport, dport    uint16
		payloadBytes    int
		truncated       bool
		linkType        string
	}{
		{"nd__nfsv2.pcap", 156, 156, 944207338_400000000, 944207338_890000000, "139.25.22.2", "139.25.22.102", 3289, 111, 72 - 8, false, "Ethernet"},
		{"nd__nfsv3.pcap", 128, 128, 944207397_280000000, 944207397_750000000, "139.25.22.2", "139.25.22.102", 3295, 111, 72 - 8, false, "Ethernet"},
		{"nd__fuzz-2021-10-13.pcap", 1, 0, 980658802_000000000 + 1882137472, 980658802_000000000 + 1882137472, "", "", 0, 0, 0, true, "Null"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Open(filepath.Join(encapCapturesDir, tc.file), WithUDP())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var p, first Packet
			n := 0
			for err = r.Next(&p); err == nil; err = r.Next(&p) {
				if n++; n == 1 {
					first = p
				}
			}
			if err != io.EOF {
				t.Fatal(err)
			}
			s := r.Stats()
			if s.Records != tc.records || s.UDP != tc.udp || s.FirstNs != tc.firstNs || s.LastNs != tc.lastNs || s.Truncated != tc.truncated ||
				!slices.Equal(s.LinkTypes, []string{tc.linkType}) {
				t.Errorf("stats %+v; want %d records, %d UDP, time %d to %d, truncated %v, %s", s, tc.records, tc.udp, tc.firstNs, tc.lastNs, tc.truncated, tc.linkType)
			}
			if tc.udp > 0 && (first.Src.String() != tc.src || first.Dst.String() != tc.dst || first.SrcPort != tc.sport || first.DstPort != tc.dport || first.PayloadLen != tc.payloadBytes) {
				t.Errorf("first datagram %v:%d > %v:%d, %d bytes", first.Src, first.SrcPort, first.Dst, first.DstPort, first.PayloadLen)
			}
		})
	}
	t.Run("version 2.3 with swapped lengths", func(t *testing.T) {
		// libpcap 0.3 wrote the lengths swapped: a captured length above the
		// original one is read swapped in version 2.3, an error in 2.4.
		rec := testRecord{data: buildIP(t, finSegment(server4, client4)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}
		rec.wireBytes = len(rec.data) + 100
		file := writePcapByHand(t, binary.LittleEndian, false, 65535, []testRecord{rec, rec})
		for _, at := range []int{24, 24 + 16 + len(rec.data)} {
			captured, wire := binary.LittleEndian.Uint32(file[at+8:]), binary.LittleEndian.Uint32(file[at+12:])
			binary.LittleEndian.PutUint32(file[at+8:], wire)
			binary.LittleEndian.PutUint32(file[at+12:], captured)
		}
		recs, _, err := readRawRecords(t, patch(file, 6, 3))
		if err != io.EOF || len(recs) != 2 || len(recs[1].data) != len(rec.data) || recs[1].wireBytes != rec.wireBytes {
			t.Errorf("version 2.3: %d records, %v; want 2 of %d bytes, %d on the wire", len(recs), err, len(rec.data), rec.wireBytes)
		}
		if _, _, err := readRawRecords(t, file); !errors.Is(err, ErrDamaged) {
			t.Errorf("version 2.4: %v, want ErrDamaged", err)
		}
	})
	t.Run("the lengths of the 2.0 record", func(t *testing.T) {
		file, err := os.ReadFile(filepath.Join(encapCapturesDir, "nd__fuzz-2021-10-13.pcap"))
		if err != nil {
			t.Fatal(err)
		}
		recs, _, err := readRawRecords(t, file)
		if err != io.EOF || len(recs) != 1 || len(recs[0].data) != 197 || recs[0].wireBytes != 524501 {
			t.Errorf("records %v, %v; want one of 197 bytes, 524501 on the wire", len(recs), err)
		}
	})
}
