package capture

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// udpWant is the Packet a reader with WithUDP must return for buildUDP's datagram.
func udpWant(src, dst netip.Addr, tunnel Encapsulation) Packet {
	return Packet{Src: src, Dst: dst, SrcPort: 5353, DstPort: 53, Protocol: ProtocolUDP, Tunnel: tunnel,
		Options: TCPOptions{WindowScale: -1}, HeaderLen: 8, PayloadLen: len("query"), Payload: []byte("query")}
}

// TestReaderUDP reads the same connection as TestReaderLinkTypesAndFormats
// with WithUDP: the datagram between the segments comes out too, through
// every link type and tunnel, with its fields.
func TestReaderUDP(t *testing.T) {
	for _, framing := range linkFramings {
		t.Run(framing.name, func(t *testing.T) {
			client, server := client4, server4
			if framing.ipv6 {
				client, server = client6, server6
			}
			syn, fin := synSegment(client, server), finSegment(server, client)
			records := []testRecord{
				{data: framing.frame(t, buildIP(t, syn), framing.ipv6), linkType: framing.linkType, timestampNs: recordTime(0)},
				{data: framing.frame(t, buildUDP(t, client, server), framing.ipv6), linkType: framing.linkType, timestampNs: recordTime(1)},
				{data: framing.frame(t, buildIP(t, fin), framing.ipv6), linkType: framing.linkType, timestampNs: recordTime(2)},
			}
			file := writePcapng(t, 65535, records)
			r, err := NewReader(bytes.NewReader(file), WithUDP())
			if err != nil {
				t.Fatal(err)
			}
			var got []Packet
			for {
				var p Packet
				if err := r.Next(&p); err != nil {
					break
				}
				p.Payload = bytes.Clone(p.Payload)
				got = append(got, p)
			}
			if len(got) != 3 {
				t.Fatalf("got %d packets, want SYN, datagram, FIN (stats %+v)", len(got), r.Stats())
			}
			want := []Packet{syn.want(), udpWant(client, server, framing.tunnel), fin.want()}
			for i := range want {
				if i != 1 {
					want[i].Tunnel = framing.tunnel
				}
				want[i].TimestampNs = recordTime(i)
				if d := diffPacket(got[i], want[i]); d != "" {
					t.Errorf("packet %d:%s", i, d)
				}
			}
			if s := r.Stats(); s.TCP != 2 || s.UDP != 1 || s.NonTCP != 0 || s.Records != 3 || s.Tunnels != framing.tunnel {
				t.Errorf("stats %+v: want 2 TCP, 1 UDP, tunnels %v", s, framing.tunnel)
			}
		})
	}
}

// TestSkippedEncapsulations checks which records are counted as skipped
// encapsulations, under which name, and which are simply other protocols.
func TestSkippedEncapsulations(t *testing.T) {
	junk := bytes.Repeat([]byte{0x5a}, 40)
	ip := buildIP(t, finSegment(server4, client4))
	protected := dot11DataHeader(false)
	protected[1] |= dot11FlagProtected
	beacon := append([]byte{0x80, 0x00, 0, 0}, bytes.Repeat([]byte{0xff}, 40)...)
	cases := []struct {
		name     string
		linkType layers.LinkType
		data     []byte
		skipped  string // "": counted as another protocol
	}{
		{"unknown link type", 147, ip, "link type 147"},
		{"link type gopacket names", layers.LinkTypeLinuxUSB, ip, "USB (link type 220)"},
		{"ipsec esp", layers.LinkTypeEthernet, frameEthernet(t, outerIPv4(t, layers.IPProtocolESP, junk), false), "IPsec ESP"},
		{"encrypted 802.11", layers.LinkTypeIEEE802_11, cat(protected, junk), "encrypted 802.11"},
		{"macsec", layers.LinkTypeEthernet, cat(ethernetHeader(etherTypeMACsec), junk), "MACsec"},
		{"ppp vj compressed tcp", layers.LinkTypePPP, cat([]byte{0xff, 0x03, 0x00, 0x2d}, junk), "PPP Van Jacobson compressed TCP"},
		{"mpls payload of unknown kind", layers.LinkTypeEthernet, cat(ethernetHeader(layers.EthernetTypeMPLSUnicast), []byte{0, 1, 1, 64}, junk), "MPLS with an unknown payload"},
		{"gre protocol of unknown kind", layers.LinkTypeEthernet, frameEthernet(t, outerIPv4(t, layers.IPProtocolGRE, cat([]byte{0, 0, 0x12, 0x34}, junk)), false), "GRE with an unknown protocol"},

		{"802.11 beacon", layers.LinkTypeIEEE802_11, beacon, ""},
		{"802.11 null data", layers.LinkTypeIEEE802_11, cat([]byte{0x48, 0x01}, dot11DataHeader(false)[2:]), ""},
		{"pppoe discovery", layers.LinkTypeEthernet, cat(ethernetHeader(layers.EthernetTypePPPoEDiscovery), []byte{0x11, 0x09, 0, 0, 0, 4, 1, 1, 0, 0}), ""},
		{"ppp lcp", layers.LinkTypePPP, cat([]byte{0xff, 0x03, 0xc0, 0x21}, junk), ""},
		{"fddi station management", layers.LinkTypeFDDI, cat([]byte{0x41}, macA, macB, junk), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writePcapByHand(t, binary.LittleEndian, false, 65535, []testRecord{
				{data: tc.data, linkType: tc.linkType, timestampNs: recordTime(0)},
				{data: tc.data, linkType: tc.linkType, timestampNs: recordTime(1)},
			})
			packets, stats, err := readAll(t, file)
			if err != nil {
				t.Fatal(err)
			}
			var wantSkipped []SkippedRecords
			if tc.skipped != "" {
				wantSkipped = []SkippedRecords{{Name: tc.skipped, Records: 2}}
			}
			if len(packets) != 0 || stats.NonTCP != 2 || stats.Undecodable != 0 || !reflect.DeepEqual(stats.Skipped, wantSkipped) {
				t.Errorf("%d packets, stats %+v: want 2 records not TCP, skipped %v", len(packets), stats, wantSkipped)
			}
		})
	}
}

// TestUDPOnTunnelPortStaysUDP: a datagram to a tunnel's port whose payload is
// not that tunnel's header is a UDP datagram, not a broken tunnel.
func TestUDPOnTunnelPortStaysUDP(t *testing.T) {
	for _, port := range []uint16{portVXLAN, portVXLANLinux, portGeneve, portGTPU, portGREinUDP} {
		quic := append([]byte{0x40 | 0x03}, bytes.Repeat([]byte{0xc3}, 30)...) // a QUIC short header
		data := frameEthernet(t, outerUDP(t, port, quic), false)
		file := writePcapByHand(t, binary.LittleEndian, false, 65535, []testRecord{{data: data, linkType: layers.LinkTypeEthernet, timestampNs: recordTime(0)}})
		r, err := NewReader(bytes.NewReader(file), WithUDP())
		if err != nil {
			t.Fatal(err)
		}
		var p Packet
		if err := r.Next(&p); err != nil {
			t.Fatalf("port %d: %v (stats %+v)", port, err, r.Stats())
		}
		if p.Protocol != ProtocolUDP || p.DstPort != port || p.Tunnel != 0 || !bytes.Equal(p.Payload, quic) || p.Src != tunnelA4 {
			t.Errorf("port %d: got %+v, want the outer datagram", port, p)
		}
	}
}
