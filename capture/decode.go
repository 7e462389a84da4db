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

// decodeResult says what a record held.
type decodeResult int

const (
	decodedUndecodable decodeResult = iota // a header was cut or malformed
	decodedTCP                             // a TCP segment: the Packet is filled
	decodedFragment                        // an IP fragment
	decodedOther                           // another protocol or link type
)

// ipv4HeaderBytes and ipv6HeaderBytes are the fixed IP header sizes.
const (
	ipv4HeaderBytes = 20
	ipv6HeaderBytes = 40
)

// decoder turns one record's bytes into a Packet. It owns the layer structs the
// gopacket parsers fill, so decoding allocates nothing.
type decoder struct {
	ethernet layers.Ethernet
	vlan     layers.Dot1Q
	sll      layers.LinuxSLL
	sll2     layers.LinuxSLL2
	loopback layers.Loopback
	ipv4     layers.IPv4
	ipv6     layers.IPv6
	ipv6Ext  layers.IPv6ExtensionSkipper // hop-by-hop (after the first), routing, destination
	ipv6Frag layers.IPv6Fragment

	// One parser per first layer: gopacket fixes the first layer at creation.
	fromEthernet, fromSLL, fromSLL2, fromLoopback, fromIPv4, fromIPv6 *gopacket.DecodingLayerParser

	decoded []gopacket.LayerType
}

func newDecoder() *decoder {
	d := &decoder{decoded: make([]gopacket.LayerType, 0, 16)}
	newParser := func(first gopacket.LayerType) *gopacket.DecodingLayerParser {
		// The fragment decoder comes after the extension skipper so that it, not
		// the skipper, decodes fragment headers: a fragment must stop decoding.
		p := gopacket.NewDecodingLayerParser(first,
			&d.ethernet, &d.vlan, &d.sll, &d.sll2, &d.loopback,
			&d.ipv4, &d.ipv6, &d.ipv6Ext, &d.ipv6Frag)
		p.IgnoreUnsupported = true
		return p
	}
	d.fromEthernet = newParser(layers.LayerTypeEthernet)
	d.fromSLL = newParser(layers.LayerTypeLinuxSLL)
	d.fromSLL2 = newParser(layers.LayerTypeLinuxSLL2)
	d.fromLoopback = newParser(layers.LayerTypeLoopback)
	d.fromIPv4 = newParser(layers.LayerTypeIPv4)
	d.fromIPv6 = newParser(layers.LayerTypeIPv6)
	return d
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
	}
	return nil, false
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
	case layers.LayerTypeIPv4:
		return &d.ipv4
	case layers.LayerTypeIPv6:
		return &d.ipv6
	case layers.LayerTypeIPv6Fragment:
		return &d.ipv6Frag
	case layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Destination:
		return &d.ipv6Ext
	}
	return nil
}

// decode fills p (all but TimestampNs and Interface) from one record: data is
// what was captured, wireBytes the record's original length on the wire.
func (d *decoder) decode(data []byte, wireBytes int, linkType layers.LinkType, p *Packet) decodeResult {
	parser, known := d.parserFor(linkType, data)
	if parser == nil {
		if known {
			return decodedUndecodable // a raw IP record that is not IPv4 or IPv6
		}
		return decodedOther
	}
	if err := parser.DecodeLayers(data, &d.decoded); err != nil {
		return decodedUndecodable
	}
	if len(d.decoded) == 0 {
		return decodedUndecodable
	}
	last := d.layer(d.decoded[len(d.decoded)-1])
	if last == nil {
		return decodedUndecodable
	}
	switch last.NextLayerType() {
	case layers.LayerTypeTCP:
	case gopacket.LayerTypeFragment:
		return decodedFragment
	default:
		return decodedOther
	}

	// The innermost IP header, and where it and the TCP segment start in data.
	// Every layer's Contents and Payload are subslices of data, so their
	// offsets follow from the capacities.
	var ipHeader gopacket.LayerType
	for i := len(d.decoded) - 1; i >= 0; i-- {
		if t := d.decoded[i]; t == layers.LayerTypeIPv4 || t == layers.LayerTypeIPv6 {
			ipHeader = t
			break
		}
	}
	segment := last.LayerPayload()
	tcpOffset := cap(data) - cap(segment)
	var ipOffset, ipPacketBytes int
	switch ipHeader {
	case layers.LayerTypeIPv4:
		ipOffset = cap(data) - cap(d.ipv4.Contents)
		ipPacketBytes = int(binary.BigEndian.Uint16(d.ipv4.Contents[2:4]))
		p.Src = netip.AddrFrom4([4]byte(d.ipv4.SrcIP))
		p.Dst = netip.AddrFrom4([4]byte(d.ipv4.DstIP))
		p.IPID = d.ipv4.Id
	case layers.LayerTypeIPv6:
		ipOffset = cap(data) - cap(d.ipv6.Contents)
		ipPacketBytes = ipv6HeaderBytes + int(d.ipv6.Length)
		if d.ipv6.Length == 0 {
			ipPacketBytes = 0 // a jumbogram: use the wire length below
		}
		p.Src = netip.AddrFrom16([16]byte(d.ipv6.SrcIP))
		p.Dst = netip.AddrFrom16([16]byte(d.ipv6.DstIP))
		p.IPID = 0
	default:
		return decodedUndecodable // TCP right after a link header cannot happen
	}
	if tcpOffset < ipOffset || tcpOffset > len(data) {
		return decodedUndecodable
	}
	if ipPacketBytes == 0 {
		// Segmentation offload writes 0 in the IPv4 total length: the wire
		// length of the record is the packet's length.
		ipPacketBytes = wireBytes - ipOffset
	}
	segmentBytes := max(ipPacketBytes-(tcpOffset-ipOffset), len(segment))

	headerBytes, ok := decodeTCP(segment, p)
	if !ok || headerBytes > segmentBytes {
		return decodedUndecodable
	}
	p.HeaderLen = headerBytes
	p.PayloadLen = segmentBytes - headerBytes
	p.Payload = segment[min(headerBytes, len(segment)):]
	return decodedTCP
}
