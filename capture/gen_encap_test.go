package capture

// Framings for the tunnels and link types beyond Ethernet and raw IP. The
// headers are written out byte by byte from their specifications (gopacket
// serializes only the outer IP and UDP headers, for lengths and checksums), so
// the decoder is checked against the formats, not against itself.

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Outer addresses of the tunnels: a router pair, not the connection's hosts.
var (
	tunnelA4 = netip.MustParseAddr("203.0.113.1")
	tunnelB4 = netip.MustParseAddr("203.0.113.2")
	tunnelA6 = netip.MustParseAddr("2001:db8:ffff::1")
	tunnelB6 = netip.MustParseAddr("2001:db8:ffff::2")
)

// ethernetHeader is a 14-byte Ethernet header with the given EtherType.
func ethernetHeader(t layers.EthernetType) []byte {
	h := append(append([]byte{}, macB...), macA...)
	return binary.BigEndian.AppendUint16(h, uint16(t))
}

// cat joins byte slices.
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// outerIPv4 wraps payload in an IPv4 header of the given protocol between the tunnel endpoints.
func outerIPv4(t testing.TB, protocol layers.IPProtocol, payload []byte) []byte {
	return serialize(t, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: protocol,
		SrcIP: net.IP(tunnelA4.AsSlice()), DstIP: net.IP(tunnelB4.AsSlice())}, gopacket.Payload(payload))
}

// outerIPv6 wraps payload in an IPv6 header of the given next header between the tunnel endpoints.
func outerIPv6(t testing.TB, next layers.IPProtocol, payload []byte) []byte {
	return serialize(t, &layers.IPv6{Version: 6, NextHeader: next, HopLimit: 64,
		SrcIP: net.IP(tunnelA6.AsSlice()), DstIP: net.IP(tunnelB6.AsSlice())}, gopacket.Payload(payload))
}

// outerUDP wraps payload in IPv4 and UDP to the given destination port.
func outerUDP(t testing.TB, dstPort uint16, payload []byte) []byte {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP(tunnelA4.AsSlice()), DstIP: net.IP(tunnelB4.AsSlice())}
	udp := &layers.UDP{SrcPort: 49999, DstPort: layers.UDPPort(dstPort)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ip, udp, gopacket.Payload(payload))
}

// llcSNAP is an 802.2 LLC header (SNAP SAPs, unnumbered information) and a
// SNAP header with an EtherType (RFC 1042).
func llcSNAP(ipv6 bool) []byte {
	return binary.BigEndian.AppendUint16([]byte{0xaa, 0xaa, 0x03, 0, 0, 0}, uint16(etherType(ipv6)))
}

// pppHeader is PPP in HDLC-like framing: address 0xff, control 0x03, protocol.
func pppHeader(ipv6 bool) []byte {
	if ipv6 {
		return []byte{0xff, 0x03, 0x00, 0x57}
	}
	return []byte{0xff, 0x03, 0x00, 0x21}
}

// pppoeSession is a PPPoE session header (version 1, type 1, code 0) for a PPP frame.
func pppoeSession(ppp []byte) []byte {
	h := []byte{0x11, 0x00, 0x12, 0x34}
	return append(binary.BigEndian.AppendUint16(h, uint16(len(ppp))), ppp...)
}

// dot11DataHeader is an 802.11 data frame header from the distribution
// system (3 addresses), or with qos a QoS data frame with both DS bits (4
// addresses and QoS control).
func dot11DataHeader(qos bool) []byte {
	if !qos {
		h := []byte{0x08, 0x02, 0x00, 0x00} // data, FromDS
		return append(append(append(append(h, macB...), macA...), macA...), 0x10, 0x00)
	}
	h := []byte{0x88, 0x03, 0x00, 0x00} // QoS data, ToDS and FromDS
	h = append(append(append(append(h, macB...), macA...), macA...), 0x10, 0x00)
	return append(append(h, macB...), 0x00, 0x00) // fourth address, QoS control
}

func frameFDDI(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return cat([]byte{0x50}, macB, macA, llcSNAP(ipv6), ip)
}

func frame8023LLC(t testing.TB, ip []byte, ipv6 bool) []byte {
	llc := cat(llcSNAP(ipv6), ip)
	return cat(ethernetHeader(layers.EthernetType(len(llc))), llc)
}

func framePPPoEQinQ(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return cat(ethernetHeader(layers.EthernetTypeQinQ), []byte{0x00, 0xc8, 0x81, 0x00, 0x00, 0x64, 0x88, 0x64},
		pppoeSession(cat(pppHeader(ipv6)[2:], ip)))
}

func framePPP(_ testing.TB, ip []byte, ipv6 bool) []byte { return cat(pppHeader(ipv6), ip) }

// framePPPCompressed uses address-and-control-field and protocol-field compression.
func framePPPCompressed(_ testing.TB, ip []byte, ipv6 bool) []byte {
	if ipv6 {
		return cat([]byte{0x57}, ip)
	}
	return cat([]byte{0x21}, ip)
}

func framePPPEther(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return pppoeSession(cat(pppHeader(ipv6)[2:], ip))
}

func frameCiscoHDLC(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return cat(binary.BigEndian.AppendUint16([]byte{0x0f, 0x00}, uint16(etherType(ipv6))), ip)
}

func frameDot11(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return cat(dot11DataHeader(ipv6), llcSNAP(ipv6), ip)
}

// frameRadiotap writes a radiotap header with a TSFT and flags (FCS
// present; for IPv6 also data padding), then a QoS data frame and its FCS.
func frameRadiotap(_ testing.TB, ip []byte, ipv6 bool) []byte {
	flags := byte(radiotapFlagFCS)
	if ipv6 {
		flags |= radiotapFlagDataPad
	}
	// version, pad, length 20; present: TSFT, flags, rate; TSFT (at 8,
	// aligned); flags; rate; 2 bytes of padding.
	rt := []byte{0, 0, 20, 0, 0x07, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, flags, 0x0c, 0, 0}
	header := dot11DataHeader(true) // 32 bytes: padding changes nothing
	if ipv6 {
		header = dot11DataHeader(true)[:26] // no fourth address: 26 bytes, padded to 28
		header[1] = 0x01                    // ToDS only
		header = append(header, 0, 0)
	}
	return cat(rt, header, llcSNAP(ipv6), ip, []byte{0xde, 0xad, 0xbe, 0xef})
}

// frameNFLOG writes an NFLOG record: header, a packet-header TLV, a prefix
// TLV of odd length (padded), the payload TLV, in little-endian host order.
func frameNFLOG(_ testing.TB, ip []byte, ipv6 bool) []byte {
	family := byte(2)
	if ipv6 {
		family = 10
	}
	out := []byte{family, 0, 0, 1}
	out = append(out, 8, 0, 1, 0, 0x08, 0x00, 3, 0)  // NFULA_PACKET_HDR
	out = append(out, 7, 0, 10, 0, 'a', 'b', 'c', 0) // NFULA_PREFIX "abc", length 7, padded to 8
	out = binary.LittleEndian.AppendUint16(out, uint16(4+len(ip)))
	out = binary.LittleEndian.AppendUint16(out, 9) // NFULA_PAYLOAD
	return cat(out, ip)
}

func framePFLog(_ testing.TB, ip []byte, ipv6 bool) []byte {
	h := make([]byte, 61+3) // length 61, padded to 64
	h[0] = 61
	h[1] = 2 // AF_INET
	if ipv6 {
		h[1] = 24 // AF_INET6 on OpenBSD
	}
	copy(h[4:], "em0")
	return cat(h, ip)
}

// frameIPoIB writes two 20-byte InfiniBand hardware addresses, the EtherType, two reserved bytes.
func frameIPoIB(_ testing.TB, ip []byte, ipv6 bool) []byte {
	h := make([]byte, 40)
	for i := range h {
		h[i] = byte(i + 1)
	}
	return cat(binary.BigEndian.AppendUint16(h, uint16(etherType(ipv6))), []byte{0, 0}, ip)
}

// frameMPLS writes two labels (the second at the bottom of the stack).
func frameMPLS(_ testing.TB, ip []byte, _ bool) []byte {
	return cat(ethernetHeader(layers.EthernetTypeMPLSUnicast), []byte{0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40}, ip)
}

// frameMPLSPseudowire writes an Ethernet pseudowire: a label, the control word, a frame.
func frameMPLSPseudowire(t testing.TB, ip []byte, ipv6 bool) []byte {
	return cat(ethernetHeader(layers.EthernetTypeMPLSUnicast), []byte{0x00, 0x03, 0x01, 0x40, 0, 0, 0, 0}, frameEthernet(t, ip, ipv6))
}

// frameGREKey writes GRE with a key and a sequence number (RFC 2890).
func frameGREKey(t testing.TB, ip []byte, ipv6 bool) []byte {
	gre := binary.BigEndian.AppendUint16([]byte{0x30, 0x00}, uint16(etherType(ipv6)))
	gre = append(gre, 0, 0, 0x12, 0x34, 0, 0, 0, 7)
	return frameEthernet(t, outerIPv4(t, layers.IPProtocolGRE, cat(gre, ip)), false)
}

// frameGREBridged writes GRE over IPv6 carrying an Ethernet frame (0x6558).
func frameGREBridged(t testing.TB, ip []byte, ipv6 bool) []byte {
	return frameEthernet(t, outerIPv6(t, layers.IPProtocolGRE, cat([]byte{0, 0, 0x65, 0x58}, frameEthernet(t, ip, ipv6))), true)
}

func frameERSPAN1(t testing.TB, ip []byte, ipv6 bool) []byte {
	return frameEthernet(t, outerIPv4(t, layers.IPProtocolGRE, cat([]byte{0, 0, 0x88, 0xbe}, frameVLAN(t, ip, ipv6))), false)
}

func frameERSPAN2(t testing.TB, ip []byte, ipv6 bool) []byte {
	gre := []byte{0x10, 0x00, 0x88, 0xbe, 0, 0, 0, 9}    // sequence number 9
	erspan := []byte{0x10, 0x64, 0x00, 0x05, 0, 0, 0, 1} // version 1, VLAN 100, session 5, index 1
	return frameEthernet(t, outerIPv4(t, layers.IPProtocolGRE, cat(gre, erspan, frameEthernet(t, ip, ipv6))), false)
}

func frameERSPAN3(t testing.TB, ip []byte, ipv6 bool) []byte {
	gre := []byte{0x10, 0x00, 0x22, 0xeb, 0, 0, 0, 9}
	erspan := []byte{0x20, 0x64, 0x00, 0x05, 1, 2, 3, 4, 0, 0, 0x00, 0x01} // version 2, frame type 0, O bit
	platform := []byte{0x0c, 0, 0, 0, 0, 0, 0, 0}
	return frameEthernet(t, outerIPv4(t, layers.IPProtocolGRE, cat(gre, erspan, platform, frameEthernet(t, ip, ipv6))), false)
}

// frameArubaGRE writes an Aruba access point's tunnel: GRE protocol 0x8200, an
// 802.11 frame without FCS, LLC/SNAP.
func frameArubaGRE(t testing.TB, ip []byte, ipv6 bool) []byte {
	return frameVLAN(t, outerIPv4(t, layers.IPProtocolGRE, cat([]byte{0, 0, 0x82, 0x00}, dot11DataHeader(true), llcSNAP(ipv6), ip)), false)
}

func frameVXLAN(port uint16) func(testing.TB, []byte, bool) []byte {
	return func(t testing.TB, ip []byte, ipv6 bool) []byte {
		vxlan := []byte{0x08, 0, 0, 0, 0, 0x12, 0x34, 0}
		return frameEthernet(t, outerUDP(t, port, cat(vxlan, frameEthernet(t, ip, ipv6))), false)
	}
}

func frameVXLANGPE(t testing.TB, ip []byte, ipv6 bool) []byte {
	next := byte(1)
	if ipv6 {
		next = 2
	}
	return frameEthernet(t, outerUDP(t, portVXLANGPE, cat([]byte{0x0c, 0, 0, next, 0, 0x12, 0x34, 0}, ip)), false)
}

// frameGeneve writes Geneve with one 8-byte option, carrying an Ethernet frame.
func frameGeneve(t testing.TB, ip []byte, ipv6 bool) []byte {
	geneve := []byte{0x02, 0x00, 0x65, 0x58, 0, 0, 0x0a, 0, 0x01, 0x02, 0x03, 0x01, 0, 0, 0, 1}
	return frameEthernet(t, outerUDP(t, portGeneve, cat(geneve, frameEthernet(t, ip, ipv6))), false)
}

// frameL2TP writes an ISP's L2TP tunnel as a subscriber's line sees it: PPPoE (in
// QinQ) carrying PPP and IPv4, UDP to port 1701, an L2TPv2 data message with its
// length and sequence numbers, and PPP carrying the packet.
func frameL2TP(t testing.TB, ip []byte, ipv6 bool) []byte {
	inner := cat(pppHeader(ipv6), ip)
	l2tp := []byte{0x48, 0x02} // L (a length) and S (sequence numbers), version 2
	l2tp = binary.BigEndian.AppendUint16(l2tp, uint16(12+len(inner)))
	l2tp = append(l2tp, 0x00, 0x07, 0x00, 0x2a, 0x00, 0x01, 0x00, 0x00) // tunnel 7, session 42, Ns 1, Nr 0
	return framePPPoEQinQ(t, outerUDP(t, portL2TP, cat(l2tp, inner)), false)
}

// frameGTPU writes a GTP-U G-PDU with a sequence number.
func frameGTPU(t testing.TB, ip []byte, _ bool) []byte {
	gtp := binary.BigEndian.AppendUint16([]byte{0x32, 0xff}, uint16(4+len(ip)))
	gtp = append(gtp, 0, 0, 0, 1, 0, 5, 0, 0) // TEID 1, sequence 5, N-PDU, next extension 0
	return frameEthernet(t, outerUDP(t, portGTPU, cat(gtp, ip)), false)
}

func frameIPinIPv4(t testing.TB, ip []byte, ipv6 bool) []byte {
	protocol := layers.IPProtocolIPv4
	if ipv6 {
		protocol = layers.IPProtocolIPv6 // 6in4
	}
	return frameEthernet(t, outerIPv4(t, protocol, ip), false)
}

func frameIPinIPv6(t testing.TB, ip []byte, ipv6 bool) []byte {
	next := layers.IPProtocolIPv4 // 4in6
	if ipv6 {
		next = layers.IPProtocolIPv6
	}
	return frameEthernet(t, outerIPv6(t, next, ip), true)
}

func frameEtherIP(t testing.TB, ip []byte, ipv6 bool) []byte {
	return frameEthernet(t, outerIPv4(t, layers.IPProtocolEtherIP, cat([]byte{0x30, 0x00}, frameEthernet(t, ip, ipv6))), false)
}

// frameAHTunnel writes IPsec AH in tunnel mode (RFC 4302): an outer IPv4
// header, AH with a 12-byte ICV (payload length 4: 24 bytes in 32-bit words,
// less 2), then the inner packet.
func frameAHTunnel(t testing.TB, ip []byte, ipv6 bool) []byte {
	next := byte(layers.IPProtocolIPv4)
	if ipv6 {
		next = byte(layers.IPProtocolIPv6)
	}
	ah := []byte{next, 4, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 1}
	ah = append(ah, bytes.Repeat([]byte{0xa5}, 12)...)
	return frameEthernet(t, outerIPv4(t, layers.IPProtocolAH, cat(ah, ip)), false)
}

// frameVNTag writes a Cisco VN-Tag, frameQinQ9100 the old 0x9100 double tag.
func frameVNTag(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return cat(ethernetHeader(etherTypeVNTag), binary.BigEndian.AppendUint16([]byte{0x80, 0x01, 0x00, 0x02}, uint16(etherType(ipv6))), ip)
}

func frameQinQ9100(_ testing.TB, ip []byte, ipv6 bool) []byte {
	return cat(ethernetHeader(etherTypeQinQ9100), binary.BigEndian.AppendUint16([]byte{0x00, 0x0a}, uint16(etherType(ipv6))), ip)
}

// framePKTAP writes Apple's PKTAP header (156 bytes, little-endian) before an
// Ethernet frame, or for IPv6 before a raw packet (DLT_RAW 12).
func framePKTAP(t testing.TB, ip []byte, ipv6 bool) []byte {
	h := make([]byte, 156)
	binary.LittleEndian.PutUint32(h[0:4], 156)
	binary.LittleEndian.PutUint32(h[4:8], 1) // a packet record
	copy(h[12:], "en0")
	if ipv6 {
		binary.LittleEndian.PutUint32(h[8:12], 12)
		return cat(h, ip)
	}
	binary.LittleEndian.PutUint32(h[8:12], 1)
	return cat(h, frameEthernet(t, ip, ipv6))
}

// encapFramings are the framings of this file, with the tunnels a packet must report.
var encapFramings = []linkFraming{
	{"pppoe-qinq-ipv4", layers.LinkTypeEthernet, false, framePPPoEQinQ, EncapPPPoE},
	{"pppoe-qinq-ipv6", layers.LinkTypeEthernet, true, framePPPoEQinQ, EncapPPPoE},
	{"ppp9-ipv4", layers.LinkTypePPP, false, framePPP, 0},
	{"ppp9-compressed-ipv6", layers.LinkTypePPP, true, framePPPCompressed, 0},
	{"ppp-hdlc50-ipv6", layers.LinkTypePPP_HDLC, true, framePPP, 0},
	{"ppp-hdlc50-cisco-ipv4", layers.LinkTypePPP_HDLC, false, frameCiscoHDLC, 0},
	{"pppoe51-ipv4", linkTypePPPEther, false, framePPPEther, EncapPPPoE},
	{"cisco-hdlc104-ipv4", layers.LinkTypeC_HDLC, false, frameCiscoHDLC, 0},
	{"cisco-hdlc104-ipv6", layers.LinkTypeC_HDLC, true, frameCiscoHDLC, 0},
	{"fddi10-ipv4", layers.LinkTypeFDDI, false, frameFDDI, 0},
	{"ethernet-8023-llc-ipv6", layers.LinkTypeEthernet, true, frame8023LLC, 0},
	{"dot11-105-ipv4", layers.LinkTypeIEEE802_11, false, frameDot11, 0},
	{"dot11-105-qos-4addr-ipv6", layers.LinkTypeIEEE802_11, true, frameDot11, 0},
	{"radiotap127-fcs-ipv4", layers.LinkTypeIEEE80211Radio, false, frameRadiotap, 0},
	{"radiotap127-fcs-datapad-ipv6", layers.LinkTypeIEEE80211Radio, true, frameRadiotap, 0},
	{"nflog239-ipv4", linkTypeNFLOG, false, frameNFLOG, 0},
	{"nflog239-ipv6", linkTypeNFLOG, true, frameNFLOG, 0},
	{"pflog117-ipv4", layers.LinkTypePFLog, false, framePFLog, 0},
	{"pflog117-ipv6", layers.LinkTypePFLog, true, framePFLog, 0},
	{"ipoib242-ipv4", linkTypeIPoIB, false, frameIPoIB, 0},
	{"pktap258-ethernet-ipv4", linkTypePKTAP, false, framePKTAP, 0},
	{"pktap149-raw-ipv6", linkTypeUser2, true, framePKTAP, 0},
	{"mpls-stack-ipv4", layers.LinkTypeEthernet, false, frameMPLS, EncapMPLS},
	{"mpls-stack-ipv6", layers.LinkTypeEthernet, true, frameMPLS, EncapMPLS},
	{"mpls-pseudowire-ipv4", layers.LinkTypeEthernet, false, frameMPLSPseudowire, EncapMPLS},
	{"gre-key-seq-ipv4", layers.LinkTypeEthernet, false, frameGREKey, EncapGRE},
	{"gre-key-seq-6in4", layers.LinkTypeEthernet, true, frameGREKey, EncapGRE},
	{"gre-ipv6-bridged-ipv4", layers.LinkTypeEthernet, false, frameGREBridged, EncapGRE},
	{"erspan1-ipv4", layers.LinkTypeEthernet, false, frameERSPAN1, EncapGRE | EncapERSPAN},
	{"erspan2-ipv6", layers.LinkTypeEthernet, true, frameERSPAN2, EncapGRE | EncapERSPAN},
	{"erspan3-ipv4", layers.LinkTypeEthernet, false, frameERSPAN3, EncapGRE | EncapERSPAN},
	{"aruba-gre-ipv4", layers.LinkTypeEthernet, false, frameArubaGRE, EncapGRE},
	{"vxlan4789-ipv4", layers.LinkTypeEthernet, false, frameVXLAN(portVXLAN), EncapVXLAN},
	{"vxlan8472-ipv6", layers.LinkTypeEthernet, true, frameVXLAN(portVXLANLinux), EncapVXLAN},
	{"vxlan-gpe-ipv6", layers.LinkTypeEthernet, true, frameVXLANGPE, EncapVXLAN},
	{"geneve-ipv4", layers.LinkTypeEthernet, false, frameGeneve, EncapGeneve},
	{"gtpu-ipv4", layers.LinkTypeEthernet, false, frameGTPU, EncapGTPU},
	{"pppoe-l2tp-ppp-ipv6", layers.LinkTypeEthernet, true, frameL2TP, EncapPPPoE | EncapL2TP},
	{"ipip-ipv4", layers.LinkTypeEthernet, false, frameIPinIPv4, EncapIPinIP},
	{"6in4-ipv6", layers.LinkTypeEthernet, true, frameIPinIPv4, EncapIPinIP},
	{"4in6-ipv4", layers.LinkTypeEthernet, false, frameIPinIPv6, EncapIPinIP},
	{"6in6-ipv6", layers.LinkTypeEthernet, true, frameIPinIPv6, EncapIPinIP},
	{"etherip-ipv4", layers.LinkTypeEthernet, false, frameEtherIP, EncapEtherIP},
	{"ah-tunnel-ipv4", layers.LinkTypeEthernet, false, frameAHTunnel, EncapIPinIP},
	{"ah-tunnel-ipv6", layers.LinkTypeEthernet, true, frameAHTunnel, EncapIPinIP},
	{"vntag-ipv4", layers.LinkTypeEthernet, false, frameVNTag, 0},
	{"qinq9100-ipv6", layers.LinkTypeEthernet, true, frameQinQ9100, 0},
}
