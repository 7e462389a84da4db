package capture

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// encapCapturesDir holds public captures of link types and tunnels, with
// their sources in SOURCES.tsv.
const encapCapturesDir = "testdata/captures"

// firstSegment is the innermost addresses, ports and payload length of a
// capture's first TCP segment.
type firstSegment struct {
	src, dst         string
	srcPort, dstPort uint16
	payloadBytes     int
}

// The expected values below were read with tshark 4.0.17 (Debian 12) and,
// where tshark cannot decode the file, tcpdump's own expected output in its
// repository. "tshark -r F -Y tcp | wc -l" counts frames with a TCP header
// anywhere, so it also counts ICMP errors quoting a TCP header and first IP
// fragments; the Reader returns neither (a fragment's segment cannot be read
// from one record), and the comment says where that makes a difference. UDP
// counts come from tshark -r F -Y 'udp && !tcp && !icmp && !icmpv6' | wc -l.
// First segments: tshark -r F -Y 'tcp && !icmp && !icmpv6' -T fields -e
// frame.number -e ip.src -e ipv6.src -e tcp.srcport -e ip.dst -e ipv6.dst
// -e tcp.dstport -e tcp.len | head -1 (the innermost address is the last of
// a tunnel's list).
var encapCaptures = []struct {
	file     string
	tcp, udp int64
	tunnels  Encapsulation
	first    *firstSegment
	skipped  []SkippedRecords
}{
	// tshark -Y tcp: 26. First: 1 172.5.5.113 49417 14.17.32.211 80 0.
	{file: "ak__80211http.pcap", tcp: 26, first: &firstSegment{"172.5.5.113", "14.17.32.211", 49417, 80, 0}},
	// -Y tcp: 77, of which 2 are ICMPv6 errors quoting TCP ('tcp && !icmp && !icmpv6': 75). UDP 4.
	// First: 22 174.3.73.24 2001:470:1f17:13f:3e97:eff:fe73:4dec 53234 184.105.255.26 2a03:2880:1010:6f03:face:b00c:0:2 443 0.
	{file: "nd__6in4tunnel.s160.pcap", tcp: 75, udp: 4, tunnels: EncapIPinIP,
		first: &firstSegment{"2001:470:1f17:13f:3e97:eff:fe73:4dec", "2a03:2880:1010:6f03:face:b00c:0:2", 53234, 443, 0}},
	// -Y tcp: 0; UDP 1 (ppp:ip:udp:quic).
	{file: "nd__dlt_ppp.pcap", udp: 1},
	// -Y tcp: 1 (eth:etag:ip:tcp).
	{file: "sv__decode-etag-01__input.pcap", tcp: 1},
	// -Y tcp: 0, -Y udp: 0; frame.protocols: eth:ethertype:ip:esp for all 8.
	{file: "sv__eve-flow-esp__input.pcap", skipped: []SkippedRecords{{"IPsec ESP", 8}}},
	// -Y tcp: 17. First: 1 192.168.2.7 4938 65.55.116.183 80 0.
	{file: "sv__hdlc-http_1tx.pcap", tcp: 17, first: &firstSegment{"192.168.2.7", "65.55.116.183", 4938, 80, 0}},
	// -Y tcp: 10 (VXLAN flags 0xff and non-zero reserved fields).
	{file: "sv__vxlan-non-zero-reserved-fields__input.pcap", tcp: 10, tunnels: EncapVXLAN},
	// -Y tcp: 0; UDP 1 each (user_dlt:pktap:pcap_pktdata:eth:ethertype:ip:udp:dns).
	{file: "td__LINKTYPE_PKTAP.pcap", udp: 1},
	{file: "td__LINKTYPE_USER2_PKTAP.pcap", udp: 1},
	// BIG TCP: IP length fields of 0, 80 KB packets cut to 256 bytes. tshark
	// reads the tunnelled ones as broken UDP (-Y tcp: 0); tcpdump's expected
	// output (tests/bigtcp-*.out) reads the inner segment:
	// "192.168.1.2.36875 > 192.168.1.1.36449: Flags [P.], ... length 80000".
	{file: "td__bigtcp-ipv4-vxlan-ipv4.s256.pcap", tcp: 1, tunnels: EncapVXLAN,
		first: &firstSegment{"192.168.1.2", "192.168.1.1", 36875, 36449, 80000}},
	// tcpdump: "fd00::1.38339 > fd00::2.43997: Flags [P.], ... length 80000" (inside Geneve over IPv6).
	{file: "td__bigtcp-ipv6-geneve-ipv6.s256.pcap", tcp: 1, tunnels: EncapGeneve,
		first: &firstSegment{"fd00::1", "fd00::2", 38339, 43997, 80000}},
	// tcpdump: "2604:1380:4091:ce00::b.43267 > 2604:1380:4091:ce00::d.41219: Flags [P.], ... length 79968"
	// (tshark -Y tcp: 0 on the cut file, 1 on the original).
	{file: "td__bigtcp-ipv6.s256.pcap", tcp: 1,
		first: &firstSegment{"2604:1380:4091:ce00::b", "2604:1380:4091:ce00::d", 43267, 41219, 79968}},
	// -Y tcp: 20. First: 9 192.168.56.10 34170 192.168.56.24 22 0.
	{file: "td__ipoib.pcap", tcp: 20, first: &firstSegment{"192.168.56.10", "192.168.56.24", 34170, 22, 0}},
	// -Y tcp: 3; UDP 10. First: 1 12.4.4.4 4100 12.8.8.8 179 19 (ppp:mpls:ip:tcp:bgp).
	{file: "td__lspping-fec-ldp.pcap", tcp: 3, udp: 10, tunnels: EncapMPLS, first: &firstSegment{"12.4.4.4", "12.8.8.8", 4100, 179, 19}},
	// -Y tcp: 0, UDP 0: eth:ip:udp:mpls:ip:icmp (see TestEncapsulatedICMP).
	{file: "td__mpls-over-udp.pcap"},
	// -Y tcp: 0; UDP 4 (nflog:ip:udp:dns).
	{file: "td__nflog.pcap", udp: 4},
	// tshark -Y udp: 10, since it does not read VXLAN on port 8472; with
	// -d udp.port==8472,vxlan: 8 eth:...:vxlan:eth:ip:icmp, 2 ...:vxlan:eth:arp,
	// so no TCP or UDP inside (see TestEncapsulatedICMP).
	{file: "td__vxlan_port_8472.pcap"},
	// -Y tcp: 1 (eth:ip:gre:ip:tcp, WCCP redirection).
	{file: "td__wccp_redirect_gre.pcap", tcp: 1, tunnels: EncapGRE},
	// -Y tcp: 32, UDP 32: half inside Cisco FabricPath (eth:cfp:eth:...).
	{file: "zk__cisco-fabric-path.pcap", tcp: 32, udp: 32},
	// -Y tcp: 11 (fddi:llc:ip:tcp). First: 1 212.180.42.100 25000 131.243.64.3 53 0.
	{file: "zk__dns-inverse-query.pcap", tcp: 11, first: &firstSegment{"212.180.42.100", "131.243.64.3", 25000, 53, 0}},
	// GRE with a key bit (flags 0x2000), protocol 0x6558. -Y tcp: 106, of
	// which 16 are first fragments of the outer IP packet
	// (-Y 'tcp && ip.flags.mf==1' with -o ip.defragment:FALSE): 90. UDP 48.
	// First: 97 10.200.0.3,192.168.69.10 49162 10.200.0.224,192.168.69.2 80 0.
	{file: "zk__erspan.s160.pcap", tcp: 90, udp: 48, tunnels: EncapGRE,
		first: &firstSegment{"192.168.69.10", "192.168.69.2", 49162, 80, 0}},
	// ERSPAN types I, II, III carrying ICMP only (see TestEncapsulatedICMP).
	{file: "zk__erspanI.pcap"},
	{file: "zk__erspanII.pcap"},
	{file: "zk__erspanIII.pcap"},
	// -Y tcp: 40. First: 1 10.3.34.171,10.37.36.92 58973 10.33.10.23,205.185.216.10 80 0.
	{file: "zk__gre-aruba.first40.pcap", tcp: 40, tunnels: EncapGRE, first: &firstSegment{"10.37.36.92", "205.185.216.10", 58973, 80, 0}},
	// -Y tcp: 40. First: 1 128.3.140.132 2035 194.140.136.34 80 0.
	{file: "zk__llc.first40.pcap", tcp: 40, first: &firstSegment{"128.3.140.132", "194.140.136.34", 2035, 80, 0}},
	// -Y tcp: 47 (22 plain, 14 VLAN, 11 MPLS). First: 1 10.1.2.1 11001 10.34.0.1 23 0.
	{file: "zk__mixed-vlan-mpls.pcap", tcp: 47, tunnels: EncapMPLS, first: &firstSegment{"10.1.2.1", "10.34.0.1", 11001, 23, 0}},
	// -Y tcp: 3 (2 through MPLS in a VLAN).
	{file: "zk__mpls-in-vlan.pcap", tcp: 3, tunnels: EncapMPLS},
	// -Y tcp: 13. First: 1 10.0.2.15 49762 93.184.216.34 80 0.
	{file: "zk__nflog-http.pcap", tcp: 13, first: &firstSegment{"10.0.2.15", "93.184.216.34", 49762, 80, 0}},
	// -Y tcp: 8 (802.1ah). First: 5 10.199.249.11 49601 10.199.249.12 49416 0.
	{file: "zk__pbb.pcap", tcp: 8, first: &firstSegment{"10.199.249.11", "10.199.249.12", 49601, 49416, 0}},
	// -Y tcp: 30. First: 1 1.1.1.1 20394 2.2.2.2 443 0.
	{file: "zk__pppoe-over-qinq.first30.pcap", tcp: 30, tunnels: EncapPPPoE, first: &firstSegment{"1.1.1.1", "2.2.2.2", 20394, 443, 0}},
	// UDP 3 (radiotap:wlan_radio:wlan:llc:ip(v6):udp).
	{file: "zk__radiotap.pcap", udp: 3},
	// UDP 1 each (eth:ip:ip:udp; eth:ipv6:ipv6:ipv6:udp).
	{file: "zk__tunnels__4in4.pcap", udp: 1, tunnels: EncapIPinIP},
	{file: "zk__tunnels__6in6in6.pcap", udp: 1, tunnels: EncapIPinIP},
	// -Y tcp: 1. First: 1 70.55.213.211 2002:4637:d5d3::4637:d5d3 31337 192.88.99.1 2001:4860:0:2001::68 80 0
	// (IPv4 inside IPv6: the inner header is the IPv4 one).
	{file: "zk__tunnels__4in6.pcap", tcp: 1, tunnels: EncapIPinIP, first: &firstSegment{"70.55.213.211", "192.88.99.1", 31337, 80, 0}},
	// -Y tcp: 10. First: 1 192.168.33.179,10.0.0.226 39088 192.168.179.33,95.217.228.176 80 0.
	{file: "zk__tunnels__geneve-many-options.pcap", tcp: 10, tunnels: EncapGeneve, first: &firstSegment{"10.0.0.226", "95.217.228.176", 39088, 80, 0}},
	// -Y tcp: 1, an A-MSDU of two subframes (wlan:llc:ip:tcp:tls:llc:ip:tcp).
	// The first subframe: 10.226.22.9,157.240.18.16 443 10.102.16.187,149.159.130.184 49392, tcp.len 229.
	{file: "zk__tunnels__gre-aruba-amsdu.pcap", tcp: 1, tunnels: EncapGRE, first: &firstSegment{"157.240.18.16", "149.159.130.184", 443, 49392, 229}},
	// -Y tcp: 0: eth:vlan:ip:gre:wlan:data, protected (CCMP) frames.
	{file: "zk__tunnels__gre-aruba-ccmp.pcap", skipped: []SkippedRecords{{"encrypted 802.11", 2}}},
	// ICMP only (see TestEncapsulatedICMP).
	{file: "zk__tunnels__gre-erspan3-dot1q.pcap"},
	// -Y tcp: 10, UDP 4 (GRE in UDP port 4754).
	{file: "zk__tunnels__gre-over-udp-4754.pcap", tcp: 10, udp: 4, tunnels: EncapGRE},
	// UDP 2: eth:vlan:ipv6:ip:gre:ppp:ip:udp (PPTP's GRE over IPv4 over IPv6).
	{file: "zk__tunnels__gre-pptp.pcap", udp: 2, tunnels: EncapGRE | EncapIPinIP},
	// -Y tcp: 22, UDP 8. First: 11 172.27.1.66,66.59.111.190 40264 66.59.109.137,172.28.2.3 22 0.
	{file: "zk__tunnels__gre-sample.pcap", tcp: 22, udp: 8, tunnels: EncapGRE, first: &firstSegment{"66.59.111.190", "172.28.2.3", 40264, 22, 0}},
	// -Y tcp: 31. First: 1 79.188.154.91,10.222.10.10 44960 243.149.173.198,173.194.69.188 5228 0.
	{file: "zk__tunnels__gtp__gtp6_gtp_0x32.pcap", tcp: 31, tunnels: EncapGTPU, first: &firstSegment{"10.222.10.10", "173.194.69.188", 44960, 5228, 0}},
	// -Y tcp: 1 (eth:vlan:vntag:vlan:ip:tcp).
	{file: "zk__vntag_vlan_sandwich_clean.pcap", tcp: 1},
	// -Y tcp: 12. First: 1 10.1.200.131,172.16.11.201 40354 10.1.1.172,54.86.237.188 80 0.
	{file: "zk__vxlan-encapsulated-http.pcap", tcp: 12, tunnels: EncapVXLAN, first: &firstSegment{"172.16.11.201", "54.86.237.188", 40354, 80, 0}},
	// tshark -r F -Y tcp | wc -l: 14; first: 10.1.3.68 → 74.125.130.188 47025 → 443, len 0
	// (eth:vlan:vlan:ip:udp:capwap.data:wlan:llc:ip:tcp, the 802.11 frame control swapped as Cisco APs send it)
	{file: "nd__capwap_data.pcapng", tcp: 14, tunnels: EncapCAPWAP, first: &firstSegment{"10.1.3.68", "74.125.130.188", 47025, 443, 0}},
	// UDP 3 (wlan:llc:ip(v6):udp, LINKTYPE_IEEE802_11).
	{file: "zk__wlanmon.pcap", udp: 3},
	// pcap version 2.1 headers (see TestOldPcapVersions). -Y tcp: 0; UDP 156
	// and 128 (eth:ip:udp:rpc, NFS v2 and v3), none fragmented.
	{file: "nd__nfsv2.pcap", udp: 156},
	{file: "nd__nfsv3.pcap", udp: 128},
	// pcap version 2.0, one NULL record of "data" (see TestOldPcapVersions).
	{file: "nd__fuzz-2021-10-13.pcap"},
}

// TestEncapsulatedCaptures reads public captures of each link type and
// tunnel and compares the TCP and UDP counts, tunnels, skipped records and
// first segment with an independent reading (tshark, tcpdump).
func TestEncapsulatedCaptures(t *testing.T) {
	for _, tc := range encapCaptures {
		t.Run(tc.file, func(t *testing.T) {
			file, err := os.ReadFile(filepath.Join(encapCapturesDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			// Without WithUDP: the TCP segments only.
			packets, stats, err := readAll(t, file)
			if err != nil {
				t.Fatal(err)
			}
			if stats.TCP != tc.tcp || stats.UDP != 0 || int64(len(packets)) != tc.tcp {
				t.Errorf("%d TCP packets (stats %+v), want %d", len(packets), stats, tc.tcp)
			}
			if !reflect.DeepEqual(stats.Skipped, tc.skipped) {
				t.Errorf("skipped %v, want %v", stats.Skipped, tc.skipped)
			}
			if tc.first != nil && len(packets) > 0 {
				p := packets[0]
				want := *tc.first
				if p.Src != netip.MustParseAddr(want.src) || p.Dst != netip.MustParseAddr(want.dst) ||
					p.SrcPort != want.srcPort || p.DstPort != want.dstPort || p.PayloadLen != want.payloadBytes {
					t.Errorf("first segment %v:%d > %v:%d, %d bytes; want %+v", p.Src, p.SrcPort, p.Dst, p.DstPort, p.PayloadLen, want)
				}
			}
			for _, p := range packets {
				if p.Protocol != ProtocolTCP || p.Tunnel&^tc.tunnels != 0 {
					t.Fatalf("packet %+v: not TCP, or a tunnel outside %v", p, tc.tunnels)
				}
			}

			// With WithUDP: the same segments, and the datagrams.
			r, err := NewReader(bytes.NewReader(file), WithUDP())
			if err != nil {
				t.Fatal(err)
			}
			var p Packet
			for r.Next(&p) == nil {
			}
			s := r.Stats()
			if s.TCP != tc.tcp || s.UDP != tc.udp {
				t.Errorf("with UDP: %d TCP and %d UDP packets, want %d and %d", s.TCP, s.UDP, tc.tcp, tc.udp)
			}
			if s.Tunnels != tc.tunnels {
				t.Errorf("tunnels %v, want %v", s.Tunnels, tc.tunnels)
			}
		})
	}
}

// TestEncapsulatedCapturesListed keeps the table and the directory in step.
func TestEncapsulatedCapturesListed(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(encapCapturesDir, "*.pcap"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no captures in %s: %v", encapCapturesDir, err)
	}
	listed := map[string]bool{}
	for _, tc := range encapCaptures {
		listed[tc.file] = true
	}
	sources, err := os.ReadFile(filepath.Join(encapCapturesDir, "SOURCES.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		if !listed[name] {
			t.Errorf("%s has no expected values in encapCaptures", name)
		}
		if !bytes.Contains(sources, []byte(name+"\t")) {
			t.Errorf("%s has no line in SOURCES.tsv", name)
		}
	}
}

// TestEncapsulatedICMP checks the tunnels whose public captures carry only
// ICMP: the decoder must reach the innermost IP header, with its addresses,
// in every ICMP record. Expected values: tshark -r F -Y icmp | wc -l, and the
// last of -T fields -e ip.src -e ip.dst of the first (for port 8472 with
// -d udp.port==8472,vxlan).
func TestEncapsulatedICMP(t *testing.T) {
	cases := []struct {
		file     string
		records  int
		src, dst string
		tunnels  Encapsulation
	}{
		{"zk__erspanI.pcap", 10, "172.16.133.2", "172.217.11.78", EncapGRE | EncapERSPAN},                 // 192.168.1.1,172.16.133.2 -> 192.168.1.2,172.217.11.78
		{"zk__erspanII.pcap", 4, "23.0.0.2", "23.0.0.3", EncapGRE | EncapERSPAN},                          // 2.2.2.2,23.0.0.2 -> 1.1.1.1,23.0.0.3
		{"zk__erspanIII.pcap", 2, "192.168.15.47", "1.1.1.1", EncapGRE | EncapERSPAN},                     // 10.0.0.1,192.168.15.47 -> 10.0.0.2,1.1.1.1
		{"zk__tunnels__gre-erspan3-dot1q.pcap", 2, "172.31.10.31", "172.31.10.2", EncapGRE | EncapERSPAN}, // 172.31.1.23,172.31.10.31 -> 172.31.1.135,172.31.10.2
		{"td__mpls-over-udp.pcap", 2, "10.3.0.10", "10.1.0.10", EncapMPLS},                                // 10.100.12.170,10.3.0.10 -> 10.100.13.157,10.1.0.10
		{"td__vxlan_port_8472.pcap", 8, "", "", EncapVXLAN},                                               // 8 of icmp with -d udp.port==8472,vxlan
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join(encapCapturesDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			pr, err := pcapgo.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			d := newDecoder()
			icmp := 0
			for {
				data, ci, err := pr.ReadPacketData()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var p Packet
				if d.decode(data, ci.Length, pr.LinkType(), &p) != decodedOther {
					continue
				}
				last := d.decoded[len(d.decoded)-1]
				next := d.layer(last).NextLayerType()
				if next != layers.LayerTypeICMPv4 && next != layers.LayerTypeICMPv6 {
					continue
				}
				icmp++
				tunnels, _ := d.tunnel()
				if tunnels != tc.tunnels {
					t.Errorf("record via %v, want %v", tunnels, tc.tunnels)
				}
				if icmp == 1 && tc.src != "" {
					src, dst := netip.AddrFrom4([4]byte(d.ipv4.SrcIP)), netip.AddrFrom4([4]byte(d.ipv4.DstIP))
					if last != layers.LayerTypeIPv4 || src.String() != tc.src || dst.String() != tc.dst {
						t.Errorf("first ICMP packet %v -> %v after %v, want %s -> %s", src, dst, gopacket.LayerType(last), tc.src, tc.dst)
					}
				}
			}
			if icmp != tc.records {
				t.Errorf("%d ICMP packets reached, want %d", icmp, tc.records)
			}
		})
	}
}
