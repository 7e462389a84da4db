package capture

import (
	"encoding/binary"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Raw IP link types that gopacket does not name: DLT_RAW is 12 on most systems
// and 14 on OpenBSD; files from those systems may carry the DLT value.
const (
	linkTypeRawDLT12 layers.LinkType = 12
	linkTypeRawDLT14 layers.LinkType = 14
)

// Link types gopacket names but this package reads by number.
const (
	linkTypePPPEther layers.LinkType = 51  // PPPoE without the Ethernet header
	linkTypeNFLOG    layers.LinkType = 239 // Linux netfilter log
	linkTypeIPoIB    layers.LinkType = 242 // IP over InfiniBand
	linkTypePKTAP    layers.LinkType = 258 // Apple PKTAP
	linkTypeUser2    layers.LinkType = 149 // what macOS writes for PKTAP in pcap files
)

// decodeResult says what a record held.
type decodeResult int

const (
	decodedUndecodable decodeResult = iota // a header was cut or malformed
	decodedTCP                             // a TCP segment: the Packet is filled
	decodedUDP                             // a UDP datagram (only when asked for): the Packet is filled
	decodedFragment                        // an IP fragment
	decodedOther                           // another protocol
	decodedSkipped                         // an encapsulation or link type not decoded: decoder.skipped names it
)

// ipv4HeaderBytes and ipv6HeaderBytes are the fixed IP header sizes.
const (
	ipv4HeaderBytes = 20
	ipv6HeaderBytes = 40
	udpHeaderBytes  = 8
)

// decoder turns one record's bytes into a Packet. It owns the layer structs the
// gopacket parsers fill, so decoding allocates nothing. A layer type met twice
// in one record (IP in IP, VLAN in VLAN, Ethernet in VXLAN) is decoded into
// the same struct, which then holds the innermost header.
type decoder struct {
	udp bool // return UDP datagrams too

	ethernet   ethernetLayer
	vlan       dot1QLayer
	sll        layers.LinuxSLL
	sll2       layers.LinuxSLL2
	loopback   layers.Loopback
	pflog      layers.PFLog
	ipoib      ipoibLayer
	llc        layers.LLC
	snap       layers.SNAP
	pbb        etherTagLayer
	vnTag      etherTagLayer
	eTag       etherTagLayer
	fabricPath etherTagLayer
	pppoe      pppoeLayer
	ppp        pppLayer
	ciscoHDLC  ciscoHDLCLayer
	fddi       fddiLayer
	radiotap   radiotapLayer
	dot11      dot11Layer
	nflog      nflogLayer
	pktap      pktapLayer
	mpls       mplsLayer
	ipv4       layers.IPv4
	ipv6       ipv6Layer
	ipv6Ext    layers.IPv6ExtensionSkipper // hop-by-hop (after the first), routing, destination
	ipv6Frag   layers.IPv6Fragment
	ah         layers.IPSecAH
	gre        greLayer
	erspan2    layers.ERSPANII
	erspan3    erspan3Layer
	etherIP    layers.EtherIP
	udpHeader  udpLayer
	vxlan      layers.VXLAN
	vxlanGPE   vxlanGPELayer
	geneve     layers.Geneve
	gtp        layers.GTPv1U
	capwap     capwapLayer
	l2tp       l2tpLayer

	// One parser per first layer (gopacket fixes the first layer at
	// creation), all over one container of the layers above.
	fromEthernet, fromSLL, fromSLL2, fromLoopback, fromIPv4, fromIPv6, fromPPP, fromPPPoE,
	fromCiscoHDLC, fromFDDI, fromDot11, fromRadiotap, fromNFLOG, fromPFLog, fromIPoIB, fromPKTAP *gopacket.DecodingLayerParser

	decoded []gopacket.LayerType
	skipped string // what decodedSkipped skipped
}

func newDecoder() *decoder {
	d := &decoder{decoded: make([]gopacket.LayerType, 0, 32)}
	d.radiotap.dot11 = &d.dot11
	d.capwap.dot11 = &d.dot11
	d.pbb = etherTagLayer{layerType: layerTypePBB, size: 18}
	d.vnTag = etherTagLayer{layerType: layerTypeVNTag, size: 6}
	d.eTag = etherTagLayer{layerType: layerTypeETag, size: 8}
	d.fabricPath = etherTagLayer{layerType: layerTypeFabricPath, size: 2, frame: true}
	// The fragment decoder comes after the extension skipper so that it, not
	// the skipper, decodes fragment headers: a fragment must stop decoding.
	var container gopacket.DecodingLayerContainer = gopacket.DecodingLayerSparse(nil)
	for _, layer := range []gopacket.DecodingLayer{
		&d.ethernet, &d.vlan, &d.sll, &d.sll2, &d.loopback, &d.pflog, &d.ipoib, &d.llc, &d.snap,
		&d.pbb, &d.vnTag, &d.eTag, &d.fabricPath, &d.pppoe, &d.ppp, &d.ciscoHDLC, &d.fddi, &d.radiotap, &d.dot11,
		&d.nflog, &d.pktap, &d.mpls, &d.ipv4, &d.ipv6, &d.ipv6Ext, &d.ipv6Frag, &d.ah, &d.gre, &d.erspan2,
		&d.erspan3, &d.etherIP, &d.udpHeader, &d.vxlan, &d.vxlanGPE, &d.geneve, &d.gtp, &d.capwap, &d.l2tp,
	} {
		container = container.Put(layer)
	}
	newParser := func(first gopacket.LayerType) *gopacket.DecodingLayerParser {
		p := gopacket.NewDecodingLayerParser(first)
		p.SetDecodingLayerContainer(container)
		p.IgnoreUnsupported = true
		return p
	}
	d.fromEthernet = newParser(layers.LayerTypeEthernet)
	d.fromSLL = newParser(layers.LayerTypeLinuxSLL)
	d.fromSLL2 = newParser(layers.LayerTypeLinuxSLL2)
	d.fromLoopback = newParser(layers.LayerTypeLoopback)
	d.fromIPv4 = newParser(layers.LayerTypeIPv4)
	d.fromIPv6 = newParser(layers.LayerTypeIPv6)
	d.fromPPP = newParser(layers.LayerTypePPP)
	d.fromPPPoE = newParser(layers.LayerTypePPPoE)
	d.fromCiscoHDLC = newParser(layerTypeCiscoHDLC)
	d.fromFDDI = newParser(layers.LayerTypeFDDI)
	d.fromDot11 = newParser(layers.LayerTypeDot11)
	d.fromRadiotap = newParser(layers.LayerTypeRadioTap)
	d.fromNFLOG = newParser(layerTypeNFLOG)
	d.fromPFLog = newParser(layers.LayerTypePFLog)
	d.fromIPoIB = newParser(layerTypeIPoIB)
	d.fromPKTAP = newParser(layerTypePKTAP)
	return d
}

// parsers returns every parser, for tests that set their options.
func (d *decoder) parsers() []*gopacket.DecodingLayerParser {
	return []*gopacket.DecodingLayerParser{d.fromEthernet, d.fromSLL, d.fromSLL2, d.fromLoopback, d.fromIPv4,
		d.fromIPv6, d.fromPPP, d.fromPPPoE, d.fromCiscoHDLC, d.fromFDDI, d.fromDot11, d.fromRadiotap, d.fromNFLOG,
		d.fromPFLog, d.fromIPoIB, d.fromPKTAP}
}

// parserFor picks the parser for a record of the given link type, or nil for
// a link type (or raw IP version) this package does not decode.
func (d *decoder) parserFor(linkType layers.LinkType, data []byte) (parser *gopacket.DecodingLayerParser, known bool) {
	switch linkType {
	case layers.LinkTypeEthernet:
		return d.fromEthernet, true
	case layers.LinkTypeLinuxSLL:
		return d.fromSLL, true
	case layers.LinkTypeLinuxSLL2:
		return d.fromSLL2, true
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		return d.fromLoopback, true
	case layers.LinkTypeIPv4:
		return d.fromIPv4, true
	case layers.LinkTypeIPv6:
		return d.fromIPv6, true
	case layers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14:
		if len(data) == 0 {
			return nil, true
		}
		switch data[0] >> 4 {
		case 4:
			return d.fromIPv4, true
		case 6:
			return d.fromIPv6, true
		}
		return nil, true
	case layers.LinkTypePPP, layers.LinkTypePPP_HDLC:
		// PPP (in HDLC-like framing or not), or Cisco HDLC frames (address
		// 0x0f or 0x8f, which no PPP protocol number starts with) that the same
		// serial links carry; tshark reads both under either link type.
		if len(data) > 0 && (data[0] == 0x0f || data[0] == 0x8f) {
			return d.fromCiscoHDLC, true
		}
		return d.fromPPP, true
	case linkTypePPPEther:
		return d.fromPPPoE, true
	case layers.LinkTypeC_HDLC:
		return d.fromCiscoHDLC, true
	case layers.LinkTypeFDDI:
		return d.fromFDDI, true
	case layers.LinkTypeIEEE802_11:
		return d.fromDot11, true
	case layers.LinkTypeIEEE80211Radio:
		return d.fromRadiotap, true
	case linkTypeNFLOG:
		return d.fromNFLOG, true
	case layers.LinkTypePFLog:
		return d.fromPFLog, true
	case linkTypeIPoIB:
		return d.fromIPoIB, true
	case linkTypePKTAP, linkTypeUser2:
		return d.fromPKTAP, true
	}
	return nil, false
}

// EtherTypes the direct path reads (the VLAN tags as etherTypeLayer maps them).
const (
	etherTypeIPv4   = 0x0800
	etherTypeIPv6   = 0x86dd
	etherTypeDot1Q  = 0x8100
	etherTypeQinQ   = 0x88a8
	etherTypeQinQ91 = 0x9100
	ethernetBytes   = 14
	vlanTagBytes    = 4
)

// direct decodes the commonest records without the gopacket parser: an
// Ethernet frame (with any number of 802.1Q, 802.1ad or 0x9100 VLAN tags) or a
// raw IP record, holding an IPv4 packet without options or fragmentation or an
// IPv6 packet with no extension header, holding TCP. It reads the bytes as the
// parser's layers do and fills p to the same result (the test decodes every
// record of the corpora both ways). ok is false for any other record, which
// the parser then decodes from the start: the parser's dispatch on each layer
// costs several times the decoding itself.
func (d *decoder) direct(data []byte, wireBytes int, linkType layers.LinkType, p *Packet) (result decodeResult, ok bool) {
	ipOffset := 0
	switch linkType {
	case layers.LinkTypeEthernet:
		if len(data) < ethernetBytes {
			return 0, false
		}
		etherType := binary.BigEndian.Uint16(data[12:14])
		ipOffset = ethernetBytes
		for etherType == etherTypeDot1Q || etherType == etherTypeQinQ || etherType == etherTypeQinQ91 {
			if len(data) < ipOffset+vlanTagBytes {
				return 0, false
			}
			etherType = binary.BigEndian.Uint16(data[ipOffset+2 : ipOffset+4])
			ipOffset += vlanTagBytes
		}
		switch etherType {
		case etherTypeIPv4:
			if len(data) <= ipOffset || data[ipOffset]>>4 != 4 {
				return 0, false
			}
		case etherTypeIPv6:
			if len(data) <= ipOffset || data[ipOffset]>>4 != 6 {
				return 0, false
			}
		default:
			return 0, false
		}
	case layers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14:
	default:
		return 0, false
	}
	ip := data[ipOffset:]
	if len(ip) == 0 {
		return 0, false
	}
	var segment []byte
	var ipPacketBytes int
	switch ip[0] >> 4 {
	case 4:
		// No options (IHL 5), TCP, not a fragment (no MF flag, offset 0).
		if len(ip) < ipv4HeaderBytes || ip[0]&0x0f != 5 || ip[9] != ProtocolTCP || binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 {
			return 0, false
		}
		ipPacketBytes = int(binary.BigEndian.Uint16(ip[2:4]))
		length := ipPacketBytes
		if length == 0 {
			length = len(ip) // segmentation offload: as gopacket reads it
		}
		if length < ipv4HeaderBytes {
			return 0, false
		}
		segment = ip[ipv4HeaderBytes:min(len(ip), length)]
		p.Src = netip.AddrFrom4([4]byte(ip[12:16]))
		p.Dst = netip.AddrFrom4([4]byte(ip[16:20]))
		p.IPID = binary.BigEndian.Uint16(ip[4:6])
	case 6:
		// TCP right after the fixed header, and a payload length (0 is a
		// jumbogram or offload, which the parser's layer reads).
		if len(ip) < ipv6HeaderBytes || ip[6] != ProtocolTCP {
			return 0, false
		}
		payloadBytes := int(binary.BigEndian.Uint16(ip[4:6]))
		if payloadBytes == 0 {
			return 0, false
		}
		ipPacketBytes = ipv6HeaderBytes + payloadBytes
		segment = ip[ipv6HeaderBytes:min(len(ip), ipPacketBytes)]
		p.Src = netip.AddrFrom16([16]byte(ip[8:24]))
		p.Dst = netip.AddrFrom16([16]byte(ip[24:40]))
		p.IPID = 0
	default:
		return 0, false
	}
	return d.fillTCP(data, wireBytes, p, segment, ipOffset, ipPacketBytes, 0), true
}

// layer returns the struct that decoded a layer of the given type.
func (d *decoder) layer(layerType gopacket.LayerType) gopacket.DecodingLayer {
	switch layerType {
	case layers.LayerTypeEthernet:
		return &d.ethernet
	case layers.LayerTypeDot1Q:
		return &d.vlan
	case layers.LayerTypeLinuxSLL:
		return &d.sll
	case layers.LayerTypeLinuxSLL2:
		return &d.sll2
	case layers.LayerTypeLoopback:
		return &d.loopback
	case layers.LayerTypePFLog:
		return &d.pflog
	case layerTypeIPoIB:
		return &d.ipoib
	case layers.LayerTypeLLC:
		return &d.llc
	case layers.LayerTypeSNAP:
		return &d.snap
	case layerTypePBB:
		return &d.pbb
	case layerTypeVNTag:
		return &d.vnTag
	case layerTypeETag:
		return &d.eTag
	case layerTypeFabricPath:
		return &d.fabricPath
	case layers.LayerTypePPPoE:
		return &d.pppoe
	case layers.LayerTypePPP:
		return &d.ppp
	case layerTypeCiscoHDLC:
		return &d.ciscoHDLC
	case layers.LayerTypeFDDI:
		return &d.fddi
	case layers.LayerTypeRadioTap:
		return &d.radiotap
	case layers.LayerTypeDot11:
		return &d.dot11
	case layerTypeNFLOG:
		return &d.nflog
	case layerTypePKTAP:
		return &d.pktap
	case layers.LayerTypeMPLS:
		return &d.mpls
	case layers.LayerTypeIPv4:
		return &d.ipv4
	case layers.LayerTypeIPv6:
		return &d.ipv6
	case layers.LayerTypeIPv6Fragment:
		return &d.ipv6Frag
	case layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Destination:
		return &d.ipv6Ext
	case layers.LayerTypeIPSecAH:
		return &d.ah
	case layers.LayerTypeGRE:
		return &d.gre
	case layers.LayerTypeERSPANII:
		return &d.erspan2
	case layerTypeERSPAN3:
		return &d.erspan3
	case layers.LayerTypeEtherIP:
		return &d.etherIP
	case layers.LayerTypeUDP:
		return &d.udpHeader
	case layers.LayerTypeVXLAN:
		return &d.vxlan
	case layerTypeVXLANGPE:
		return &d.vxlanGPE
	case layers.LayerTypeGeneve:
		return &d.geneve
	case layers.LayerTypeGTPv1U:
		return &d.gtp
	case layerTypeCAPWAP:
		return &d.capwap
	case layerTypeL2TP:
		return &d.l2tp
	}
	return nil
}

// encapsulation is what a decoded layer adds to Packet.Tunnel.
func encapsulation(layerType gopacket.LayerType) Encapsulation {
	switch layerType {
	case layers.LayerTypePPPoE:
		return EncapPPPoE
	case layers.LayerTypeMPLS:
		return EncapMPLS
	case layers.LayerTypeGRE:
		return EncapGRE
	case layers.LayerTypeERSPANII, layerTypeERSPAN3:
		return EncapERSPAN
	case layers.LayerTypeVXLAN, layerTypeVXLANGPE:
		return EncapVXLAN
	case layers.LayerTypeGeneve:
		return EncapGeneve
	case layers.LayerTypeGTPv1U:
		return EncapGTPU
	case layerTypeCAPWAP:
		return EncapCAPWAP
	case layerTypeL2TP:
		return EncapL2TP
	case layers.LayerTypeEtherIP:
		return EncapEtherIP
	}
	return 0
}

// tunnel is the set of encapsulations in the decoded layers, and the index of
// the innermost IP header (-1 if none).
func (d *decoder) tunnel() (encap Encapsulation, innermostIP int) {
	innermostIP = -1
	previousIP := false // the previous layer is an IP header or one of its extensions
	for i, t := range d.decoded {
		isIP := false
		switch t {
		case layers.LayerTypeIPv4, layers.LayerTypeIPv6:
			if previousIP {
				encap |= EncapIPinIP
			}
			innermostIP = i
			isIP = true
		case layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Destination, layers.LayerTypeIPSecAH:
			isIP = previousIP
		case layers.LayerTypeGRE:
			// ERSPAN type I has no header of its own: GRE protocol 0x88be.
			if d.gre.Protocol == layers.EthernetTypeERSPAN {
				encap |= EncapERSPAN
			}
			encap |= EncapGRE
		default:
			encap |= encapsulation(t)
		}
		previousIP = isIP
	}
	return encap, innermostIP
}

// skippedEtherType names an EtherType of an encapsulation that may carry IP
// but is not decoded, or returns "".
func skippedEtherType(t layers.EthernetType) string {
	switch t {
	case etherTypeMACsec:
		return "MACsec"
	case etherTypeNSH:
		return "NSH"
	case etherTypeCiscoMeta:
		return "Cisco MetaData"
	}
	return ""
}

// skippedName names the encapsulation the decoding stopped at when it may
// carry TCP but is not decoded, or returns "" (another protocol: ARP, ICMP,
// routing protocols, 802.11 management frames...).
func (d *decoder) skippedName(last gopacket.LayerType, next gopacket.LayerType) string {
	if next == layers.LayerTypeIPSecESP {
		return "IPsec ESP"
	}
	switch last {
	case layers.LayerTypeEthernet:
		return skippedEtherType(d.ethernet.EthernetType)
	case layers.LayerTypeDot1Q:
		return skippedEtherType(d.vlan.Type)
	case layers.LayerTypeLinuxSLL:
		return skippedEtherType(d.sll.EthernetType)
	case layers.LayerTypeLinuxSLL2:
		return skippedEtherType(d.sll2.ProtocolType)
	case layers.LayerTypeSNAP:
		return skippedEtherType(d.snap.Type)
	case layerTypeCiscoHDLC:
		return skippedEtherType(d.ciscoHDLC.protocol)
	case layers.LayerTypeGRE:
		if name := skippedEtherType(d.gre.Protocol); name != "" {
			return name
		}
		if next == gopacket.LayerTypeZero {
			return "GRE with an unknown protocol"
		}
	case layers.LayerTypePPP:
		return skippedPPP(d.ppp.protocol)
	case layers.LayerTypeMPLS:
		return "MPLS with an unknown payload"
	case layers.LayerTypeDot11:
		if d.dot11.protected {
			return "encrypted 802.11"
		}
	}
	return ""
}

// decode fills p (all but TimestampNs and Interface) from one record: data is
// what was captured, wireBytes the record's original length on the wire.
func (d *decoder) decode(data []byte, wireBytes int, linkType layers.LinkType, p *Packet) decodeResult {
	if result, ok := d.direct(data, wireBytes, linkType, p); ok {
		return result
	}
	return d.decodeWithParser(data, wireBytes, linkType, p)
}

// decodeWithParser is decode through the gopacket parser for the link type.
func (d *decoder) decodeWithParser(data []byte, wireBytes int, linkType layers.LinkType, p *Packet) decodeResult {
	parser, known := d.parserFor(linkType, data)
	if parser == nil {
		if known {
			return decodedUndecodable // a raw IP record that is not IPv4 or IPv6
		}
		return decodedSkipped // the Reader names the link type
	}
	d.radiotap.recordCut = len(data) < wireBytes
	d.dot11.padded = false
	if err := parser.DecodeLayers(data, &d.decoded); err != nil {
		return decodedUndecodable
	}
	return d.fill(data, wireBytes, p)
}

// fill fills p from the record's layers as decoded (d.decoded and the layer structs).
func (d *decoder) fill(data []byte, wireBytes int, p *Packet) decodeResult {
	if len(d.decoded) == 0 {
		return decodedUndecodable
	}
	lastType := d.decoded[len(d.decoded)-1]
	last := d.layer(lastType)
	if last == nil {
		return decodedUndecodable
	}
	protocol := ProtocolTCP
	switch next := last.NextLayerType(); {
	case next == layers.LayerTypeTCP:
	case lastType == layers.LayerTypeUDP:
		if !d.udp {
			return decodedOther
		}
		protocol = ProtocolUDP
	case next == gopacket.LayerTypeFragment:
		return decodedFragment
	default:
		if d.skipped = d.skippedName(lastType, next); d.skipped != "" {
			return decodedSkipped
		}
		return decodedOther
	}

	// The innermost IP header, and where it and the transport header start in
	// data. Every layer's Contents and Payload are subslices of data, so their
	// offsets follow from the capacities.
	tunnel, innermost := d.tunnel()
	if innermost < 0 {
		return decodedUndecodable // TCP right after a link header cannot happen
	}
	return d.fillFrom(data, wireBytes, p, last, protocol, tunnel, innermost)
}

// fillFrom fills p from the decoded layers, given the last one, the transport
// in it, the encapsulations and the index in d.decoded of the innermost IP header.
func (d *decoder) fillFrom(data []byte, wireBytes int, p *Packet, last gopacket.DecodingLayer, protocol uint8, tunnel Encapsulation, innermost int) decodeResult {
	var segment []byte
	if protocol == ProtocolUDP {
		segment = d.udpHeader.Contents[:len(d.udpHeader.Contents)+len(d.udpHeader.Payload)]
	} else {
		segment = last.LayerPayload()
	}
	var ipOffset, ipPacketBytes int
	switch d.decoded[innermost] {
	case layers.LayerTypeIPv4:
		if d.ipv4.Version != 4 {
			return decodedUndecodable // gopacket does not check the version
		}
		ipOffset = cap(data) - cap(d.ipv4.Contents)
		ipPacketBytes = int(binary.BigEndian.Uint16(d.ipv4.Contents[2:4]))
		p.Src = netip.AddrFrom4([4]byte(d.ipv4.SrcIP))
		p.Dst = netip.AddrFrom4([4]byte(d.ipv4.DstIP))
		p.IPID = d.ipv4.Id
	default:
		if d.ipv6.Version != 6 {
			return decodedUndecodable
		}
		ipOffset = cap(data) - cap(d.ipv6.Contents)
		ipPacketBytes = ipv6HeaderBytes + int(d.ipv6.Length)
		if d.ipv6.Length == 0 {
			ipPacketBytes = 0 // a jumbogram: use the wire length below
		}
		p.Src = netip.AddrFrom16([16]byte(d.ipv6.SrcIP))
		p.Dst = netip.AddrFrom16([16]byte(d.ipv6.DstIP))
		p.IPID = 0
	}
	if protocol == ProtocolUDP {
		return d.fillUDP(data, wireBytes, p, segment, ipOffset, ipPacketBytes, tunnel)
	}
	return d.fillTCP(data, wireBytes, p, segment, ipOffset, ipPacketBytes, tunnel)
}

// segmentBytes is the length of the transport segment that starts at segment
// (a subslice of data) in an IP packet at ipOffset of ipPacketBytes (0: the
// rest of the wire length); -1 when the offsets are wrong.
func segmentBytes(data []byte, wireBytes int, segment []byte, ipOffset, ipPacketBytes int) int {
	segmentOffset := cap(data) - cap(segment)
	if segmentOffset < ipOffset || segmentOffset > len(data) {
		return -1
	}
	if ipPacketBytes == 0 {
		// Segmentation offload writes 0 in the IPv4 total length: the wire
		// length of the record is the packet's length.
		ipPacketBytes = wireBytes - ipOffset
	}
	if wireBytes == len(data) && ipPacketBytes > len(data)-ipOffset {
		// Nothing was cut (the record is all of the frame), yet the IP header
		// claims more than the frame holds: the header is wrong, the bytes are
		// what was sent.
		ipPacketBytes = len(data) - ipOffset
	}
	return max(ipPacketBytes-(segmentOffset-ipOffset), len(segment))
}

// fillUDP fills p's UDP fields from the decoded UDP header.
func (d *decoder) fillUDP(data []byte, wireBytes int, p *Packet, segment []byte, ipOffset, ipPacketBytes int, tunnel Encapsulation) decodeResult {
	n := segmentBytes(data, wireBytes, segment, ipOffset, ipPacketBytes)
	if n < 0 {
		return decodedUndecodable
	}
	p.Protocol = ProtocolUDP
	p.Tunnel = tunnel
	p.SrcPort, p.DstPort = uint16(d.udpHeader.SrcPort), uint16(d.udpHeader.DstPort)
	p.Seq, p.Ack, p.Flags, p.Window = 0, 0, 0, 0
	p.Options = TCPOptions{WindowScale: -1}
	p.HeaderLen = udpHeaderBytes
	p.PayloadLen = max(n, udpHeaderBytes) - udpHeaderBytes
	p.Payload = d.udpHeader.Payload[:min(len(d.udpHeader.Payload), p.PayloadLen)]
	return decodedUDP
}

// fillTCP fills p's TCP fields from segment, the captured part of the TCP
// segment (a subslice of data) in an IP packet at ipOffset of ipPacketBytes.
func (d *decoder) fillTCP(data []byte, wireBytes int, p *Packet, segment []byte, ipOffset, ipPacketBytes int, tunnel Encapsulation) decodeResult {
	n := segmentBytes(data, wireBytes, segment, ipOffset, ipPacketBytes)
	if n < 0 {
		return decodedUndecodable
	}
	p.Protocol = ProtocolTCP
	p.Tunnel = tunnel
	headerBytes, ok := decodeTCP(segment, p)
	if !ok || headerBytes > n {
		return decodedUndecodable
	}
	p.HeaderLen = headerBytes
	p.PayloadLen = n - headerBytes
	p.Payload = segment[min(headerBytes, len(segment)):]
	return decodedTCP
}
