package capture

import (
	"encoding/binary"
	"errors"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// This file holds the decoding layers for encapsulations gopacket has no
// allocation-free DecodingLayer for. Each decodes one header in place, like
// gopacket's layers, and says which layer follows. Where gopacket has a layer
// type for the header (PPP, PPPoE, MPLS, FDDI, radiotap, 802.11), the layer
// here claims it, so that gopacket's own NextLayerType tables lead to it.
//
// Why not gopacket's: PPP, PPPoE, MPLS and FDDI have no DecodingLayer there;
// its radiotap and 802.11 decoders allocate for every frame (present-bitmap
// and QoS structs, a data-layer struct per frame) and its 802.11 decoder
// always strips a 4-byte FCS, which Aruba's GRE and most LINKTYPE_IEEE802_11
// captures do not have. The 802.11 and radiotap readers here read only the
// fields that locate the payload.

// Layer types for headers gopacket does not know. 1000-1999 is the range
// gopacket sets aside for application layer types.
var (
	layerTypeCiscoHDLC  = gopacket.RegisterLayerType(1961, gopacket.LayerTypeMetadata{Name: "Cisco HDLC"})
	layerTypeNFLOG      = gopacket.RegisterLayerType(1962, gopacket.LayerTypeMetadata{Name: "NFLOG"})
	layerTypeERSPAN3    = gopacket.RegisterLayerType(1963, gopacket.LayerTypeMetadata{Name: "ERSPAN Type III"})
	layerTypeVXLANGPE   = gopacket.RegisterLayerType(1964, gopacket.LayerTypeMetadata{Name: "VXLAN-GPE"})
	layerTypeCAPWAP     = gopacket.RegisterLayerType(1975, gopacket.LayerTypeMetadata{Name: "CAPWAP"})
	layerTypeL2TP       = gopacket.RegisterLayerType(1976, gopacket.LayerTypeMetadata{Name: "L2TPv2"})
	layerTypeIPoIB      = gopacket.RegisterLayerType(1965, gopacket.LayerTypeMetadata{Name: "IP over InfiniBand"})
	layerTypePBB        = gopacket.RegisterLayerType(1966, gopacket.LayerTypeMetadata{Name: "802.1ah PBB"})
	layerTypeVNTag      = gopacket.RegisterLayerType(1967, gopacket.LayerTypeMetadata{Name: "VN-Tag"})
	layerTypeETag       = gopacket.RegisterLayerType(1968, gopacket.LayerTypeMetadata{Name: "802.1BR E-Tag"})
	layerTypePKTAP      = gopacket.RegisterLayerType(1969, gopacket.LayerTypeMetadata{Name: "PKTAP"})
	layerTypeFabricPath = gopacket.RegisterLayerType(1970, gopacket.LayerTypeMetadata{Name: "Cisco FabricPath"})
)

// Errors of the layers here, made once: a decode error must not allocate.
var (
	errHeaderCut       = errors.New("header cut short")
	errTooManyLabels   = errors.New("MPLS label stack of more than 16 labels")
	errRadiotapVersion = errors.New("radiotap version is not 0")
	errDot11Version    = errors.New("802.11 protocol version is not 0")
	errNFLOGTLV        = errors.New("malformed NFLOG TLV")
)

// Frame types and protocol numbers the layers here read.
const (
	etherTypeERSPAN3          layers.EthernetType = 0x22eb
	etherTypeWCCP             layers.EthernetType = 0x883e
	etherTypeQinQ9100         layers.EthernetType = 0x9100 // pre-802.1ad double tagging
	etherTypePBB              layers.EthernetType = 0x88e7 // 802.1ah I-TAG
	etherTypeVNTag            layers.EthernetType = 0x8926
	etherTypeETag             layers.EthernetType = 0x893f // 802.1BR
	etherTypeFabricPath       layers.EthernetType = 0x8903 // Cisco FabricPath (DCE)
	etherTypeMACsec           layers.EthernetType = 0x88e5
	etherTypeNSH              layers.EthernetType = 0x894f
	etherTypeCiscoMeta        layers.EthernetType = 0x8909
	pppProtocolIPv4                               = 0x0021
	pppProtocolIPv6                               = 0x0057
	pppProtocolMPLS                               = 0x0281
	pppProtocolMPLSMcast                          = 0x0283
	pppProtocolVJComp                             = 0x002d
	pppProtocolVJUncomp                           = 0x002f
	pppProtocolMultilink                          = 0x003d
	pppProtocolCompressed                         = 0x00fd
	pppProtocolCompressedLink                     = 0x00fb
)

// ipVersionLayer is the layer of an IP packet told by its first nibble, or
// LayerTypePayload when it is neither IPv4 nor IPv6.
func ipVersionLayer(data []byte) gopacket.LayerType {
	if len(data) == 0 {
		return gopacket.LayerTypePayload
	}
	switch data[0] >> 4 {
	case 4:
		return layers.LayerTypeIPv4
	case 6:
		return layers.LayerTypeIPv6
	}
	return gopacket.LayerTypePayload
}

// etherTypeLayer is the layer for an EtherType, including the tags gopacket
// does not map.
func etherTypeLayer(t layers.EthernetType) gopacket.LayerType {
	switch t {
	case etherTypeQinQ9100:
		return layers.LayerTypeDot1Q
	case etherTypePBB:
		return layerTypePBB
	case etherTypeVNTag:
		return layerTypeVNTag
	case etherTypeETag:
		return layerTypeETag
	case etherTypeFabricPath:
		return layerTypeFabricPath
	}
	return t.LayerType()
}

// ipv6Layer is layers.IPv6 that also reads a packet whose payload length is
// 0 without a jumbo payload option: segmentation offload (TSO, GRO, Linux's
// BIG TCP) leaves it so, and the packet runs to the end of the record, as
// gopacket reads an IPv4 total length of 0. The decoder then takes the
// length from the record's wire length.
type ipv6Layer struct{ layers.IPv6 }

func (l *ipv6Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < ipv6HeaderBytes || data[4] != 0 || data[5] != 0 || layers.IPProtocol(data[6]) == layers.IPProtocolIPv6HopByHop {
		return l.IPv6.DecodeFromBytes(data, df)
	}
	l.Version = data[0] >> 4
	l.TrafficClass = uint8(binary.BigEndian.Uint16(data[0:2]) >> 4)
	l.FlowLabel = binary.BigEndian.Uint32(data[0:4]) & 0x000fffff
	l.Length = 0
	l.NextHeader = layers.IPProtocol(data[6])
	l.HopLimit = data[7]
	l.SrcIP, l.DstIP = data[8:24], data[24:40]
	l.HopByHop = nil
	l.Contents, l.Payload = data[:ipv6HeaderBytes], data[ipv6HeaderBytes:]
	return nil
}

// ethernetLayer is layers.Ethernet with the EtherTypes of etherTypeLayer.
type ethernetLayer struct{ layers.Ethernet }

func (l *ethernetLayer) NextLayerType() gopacket.LayerType {
	return etherTypeLayer(l.EthernetType)
}

// dot1QLayer is layers.Dot1Q with the EtherTypes of etherTypeLayer.
type dot1QLayer struct{ layers.Dot1Q }

func (l *dot1QLayer) NextLayerType() gopacket.LayerType { return etherTypeLayer(l.Type) }

// etherTagLayer skips a tag that sits between an EtherType and the next one.
// One instance per kind: 802.1ah PBB (an I-TAG and the customer MAC
// addresses), Cisco VN-Tag and 802.1BR E-Tag end with the next EtherType;
// Cisco FabricPath's 2-byte tag is followed by a whole Ethernet frame.
type etherTagLayer struct {
	layers.BaseLayer
	layerType gopacket.LayerType
	size      int  // the tag's bytes, its closing EtherType included
	frame     bool // an Ethernet frame follows, not an EtherType's payload
	next      layers.EthernetType
}

func (l *etherTagLayer) CanDecode() gopacket.LayerClass { return l.layerType }
func (l *etherTagLayer) NextLayerType() gopacket.LayerType {
	if l.frame {
		return layers.LayerTypeEthernet
	}
	return etherTypeLayer(l.next)
}

func (l *etherTagLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < l.size {
		df.SetTruncated()
		return errHeaderCut
	}
	if !l.frame {
		l.next = layers.EthernetType(binary.BigEndian.Uint16(data[l.size-2 : l.size]))
	}
	l.Contents, l.Payload = data[:l.size], data[l.size:]
	return nil
}

// pppoeLayer is the 6-byte PPPoE header (RFC 2516). Only session packets
// (code 0) carry PPP; discovery packets end the decoding.
type pppoeLayer struct {
	layers.BaseLayer
	session bool
}

func (l *pppoeLayer) CanDecode() gopacket.LayerClass { return layers.LayerTypePPPoE }
func (l *pppoeLayer) NextLayerType() gopacket.LayerType {
	if l.session {
		return layers.LayerTypePPP
	}
	return gopacket.LayerTypePayload
}

func (l *pppoeLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 6 {
		df.SetTruncated()
		return errHeaderCut
	}
	l.session = data[1] == 0
	end := min(6+int(binary.BigEndian.Uint16(data[4:6])), len(data))
	l.Contents, l.Payload = data[:6], data[6:end]
	return nil
}

// pppLayer is a PPP header (RFC 1661): the optional 0xff 0x03 address and
// control bytes (HDLC-like framing, RFC 1662), then a 1- or 2-byte protocol.
type pppLayer struct {
	layers.BaseLayer
	protocol uint16
}

func (l *pppLayer) CanDecode() gopacket.LayerClass { return layers.LayerTypePPP }
func (l *pppLayer) NextLayerType() gopacket.LayerType {
	switch l.protocol {
	case pppProtocolIPv4:
		return layers.LayerTypeIPv4
	case pppProtocolIPv6:
		return layers.LayerTypeIPv6
	case pppProtocolMPLS, pppProtocolMPLSMcast:
		return layers.LayerTypeMPLS
	}
	return gopacket.LayerTypePayload
}

func (l *pppLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	offset := 0
	if len(data) >= 2 && data[0] == 0xff && data[1] == 0x03 {
		offset = 2
	}
	if len(data) < offset+1 {
		df.SetTruncated()
		return errHeaderCut
	}
	if data[offset]&1 == 1 { // protocol-field compression: one byte
		l.protocol = uint16(data[offset])
		offset++
	} else {
		if len(data) < offset+2 {
			df.SetTruncated()
			return errHeaderCut
		}
		l.protocol = binary.BigEndian.Uint16(data[offset : offset+2])
		offset += 2
	}
	l.Contents, l.Payload = data[:offset], data[offset:]
	return nil
}

// skippedPPP names a PPP protocol that may hold TCP but is not decoded, or "".
func skippedPPP(protocol uint16) string {
	switch protocol {
	case pppProtocolVJComp, pppProtocolVJUncomp:
		return "PPP Van Jacobson compressed TCP"
	case pppProtocolMultilink:
		return "PPP multilink fragments"
	case pppProtocolCompressed, pppProtocolCompressedLink:
		return "PPP compressed datagrams"
	}
	return ""
}

// ciscoHDLCLayer is Cisco HDLC framing (LINKTYPE_C_HDLC 104): address,
// control, then an EtherType.
type ciscoHDLCLayer struct {
	layers.BaseLayer
	protocol layers.EthernetType
}

func (l *ciscoHDLCLayer) CanDecode() gopacket.LayerClass    { return layerTypeCiscoHDLC }
func (l *ciscoHDLCLayer) NextLayerType() gopacket.LayerType { return etherTypeLayer(l.protocol) }

func (l *ciscoHDLCLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 4 {
		df.SetTruncated()
		return errHeaderCut
	}
	l.protocol = layers.EthernetType(binary.BigEndian.Uint16(data[2:4]))
	l.Contents, l.Payload = data[:4], data[4:]
	return nil
}

// fddiLayer is the FDDI MAC header (LINKTYPE_FDDI 10): frame control and two
// addresses. LLC frames go on to the LLC header; other frame classes (SMT,
// MAC frames) end the decoding.
type fddiLayer struct {
	layers.BaseLayer
	llc bool
}

func (l *fddiLayer) CanDecode() gopacket.LayerClass { return layers.LayerTypeFDDI }
func (l *fddiLayer) NextLayerType() gopacket.LayerType {
	if l.llc {
		return layers.LayerTypeLLC
	}
	return gopacket.LayerTypePayload
}

func (l *fddiLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 13 {
		df.SetTruncated()
		return errHeaderCut
	}
	l.llc = data[0]&0x30 == 0x10 // frame control CLFFZZZZ with FF = 01: an LLC frame
	l.Contents, l.Payload = data[:13], data[13:]
	return nil
}

// ipoibLayer is the 44-byte header of LINKTYPE_IPOIB (242): 20-byte
// destination and source hardware addresses, an EtherType and two reserved
// bytes (the layout tcpdump reads).
type ipoibLayer struct {
	layers.BaseLayer
	protocol layers.EthernetType
}

const ipoibHeaderBytes = 44

func (l *ipoibLayer) CanDecode() gopacket.LayerClass    { return layerTypeIPoIB }
func (l *ipoibLayer) NextLayerType() gopacket.LayerType { return etherTypeLayer(l.protocol) }

func (l *ipoibLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < ipoibHeaderBytes {
		df.SetTruncated()
		return errHeaderCut
	}
	l.protocol = layers.EthernetType(binary.BigEndian.Uint16(data[40:42]))
	l.Contents, l.Payload = data[:ipoibHeaderBytes], data[ipoibHeaderBytes:]
	return nil
}

// maxMPLSLabels bounds the label stack a record may have.
const maxMPLSLabels = 16

// mplsLayer is a whole MPLS label stack (RFC 3032), read to the entry with
// the bottom-of-stack bit. What follows has no type field: like Wireshark, it
// is told by its first nibble: 4 is IPv4, 6 IPv6, 0 a pseudowire control word
// (RFC 4385) before an Ethernet frame.
type mplsLayer struct {
	layers.BaseLayer
	next gopacket.LayerType
}

func (l *mplsLayer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeMPLS }
func (l *mplsLayer) NextLayerType() gopacket.LayerType { return l.next }

func (l *mplsLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	offset := 0
	for labels := 0; ; labels++ {
		if labels == maxMPLSLabels {
			return errTooManyLabels
		}
		if len(data) < offset+4 {
			df.SetTruncated()
			return errHeaderCut
		}
		bottom := data[offset+2]&1 == 1
		offset += 4
		if bottom {
			break
		}
	}
	payload := data[offset:]
	l.next = ipVersionLayer(payload)
	if len(payload) >= 4+14 && payload[0]>>4 == 0 {
		offset += 4 // the control word
		l.next = layers.LayerTypeEthernet
	}
	l.Contents, l.Payload = data[:offset], data[offset:]
	return nil
}

// Radiotap header (LINKTYPE_IEEE802_11_RADIOTAP 127) fields read here.
const (
	radiotapPresentTSFT  = 1 << 0
	radiotapPresentFlags = 1 << 1
	radiotapPresentExt   = 1 << 31
	radiotapFlagFCS      = 0x10 // the frame ends with a 4-byte FCS
	radiotapFlagDataPad  = 0x20 // the 802.11 header is padded to 32 bits
)

// radiotapLayer reads a radiotap header's length and, when present, its
// flags: whether the frame carries an FCS and whether the 802.11 header is
// padded. It passes the padding flag to the 802.11 layer that follows.
type radiotapLayer struct {
	layers.BaseLayer
	dot11     *dot11Layer
	recordCut bool // the record was cut by the snaplen: no FCS was captured
}

func (l *radiotapLayer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeRadioTap }
func (l *radiotapLayer) NextLayerType() gopacket.LayerType { return layers.LayerTypeDot11 }

func (l *radiotapLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 8 {
		df.SetTruncated()
		return errHeaderCut
	}
	if data[0] != 0 {
		return errRadiotapVersion
	}
	length := int(binary.LittleEndian.Uint16(data[2:4]))
	if length < 8 || length > len(data) {
		df.SetTruncated()
		return errHeaderCut
	}
	present := binary.LittleEndian.Uint32(data[4:8])
	offset := 8
	for word := present; word&radiotapPresentExt != 0; { // further present words come before the fields
		if offset+4 > length {
			return errHeaderCut
		}
		word = binary.LittleEndian.Uint32(data[offset : offset+4])
		offset += 4
	}
	var flags byte
	if present&radiotapPresentTSFT != 0 {
		offset = (offset + 7) &^ 7 // 8-byte aligned from the start of the header
		offset += 8
	}
	if present&radiotapPresentFlags != 0 && offset < length {
		flags = data[offset]
	}
	end := len(data)
	if flags&radiotapFlagFCS != 0 && !l.recordCut && end-length >= 4 {
		end -= 4
	}
	l.dot11.padded = flags&radiotapFlagDataPad != 0
	l.Contents, l.Payload = data[:length], data[length:end]
	return nil
}

// 802.11 frame control fields read here.
const (
	dot11TypeData      = 2
	dot11FlagsToFromDS = 0x03
	dot11FlagProtected = 0x40
	dot11FlagOrder     = 0x80
	dot11QoSAMSDU      = 0x80 // in the first QoS control byte
)

// dot11Layer reads an 802.11 data frame's header (IEEE 802.11-2020 9.2.4):
// its length depends on the fourth address, the QoS control field and the HT
// control field. Data frames go on to the LLC header (through the first
// subframe's header of an A-MSDU); management and control frames, null data
// frames and protected (encrypted) frames end the decoding.
type dot11Layer struct {
	layers.BaseLayer
	padded    bool // set by the radiotap layer: the header is padded to 32 bits
	data      bool // a data frame with a payload in the clear
	protected bool
	// mayBeSwapped is set by a CAPWAP header before the frame: its frame control
	// bytes may come swapped.
	mayBeSwapped bool
}

func (l *dot11Layer) CanDecode() gopacket.LayerClass { return layers.LayerTypeDot11 }
func (l *dot11Layer) NextLayerType() gopacket.LayerType {
	if l.data {
		return layers.LayerTypeLLC
	}
	return gopacket.LayerTypePayload
}

func (l *dot11Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	l.data, l.protected = false, false
	swapped := l.mayBeSwapped
	l.mayBeSwapped = false
	if len(data) < 2 {
		df.SetTruncated()
		return errHeaderCut
	}
	fc0, fc1 := data[0], data[1]
	if swapped && fc0&0x03 != 0 && fc1&0x03 == 0 {
		// Cisco access points send the frame control bytes swapped in CAPWAP
		// (Wireshark's capwap.swap_fc): the version bits tell.
		fc0, fc1 = fc1, fc0
	}
	if fc0&0x03 != 0 {
		return errDot11Version
	}
	frameType, subtype, flags := (fc0>>2)&0x03, fc0>>4, fc1
	if frameType != dot11TypeData || subtype&0x04 != 0 { // not data, or a null (no data) subtype
		l.Contents, l.Payload = data, nil
		return nil
	}
	header := 24
	if flags&dot11FlagsToFromDS == dot11FlagsToFromDS {
		header += 6 // the fourth address
	}
	qos := subtype&0x08 != 0
	qosOffset := header
	if qos {
		header += 2
		if flags&dot11FlagOrder != 0 {
			header += 4 // HT control
		}
	}
	if l.padded {
		header = (header + 3) &^ 3
	}
	if len(data) < header {
		df.SetTruncated()
		return errHeaderCut
	}
	payload := data[header:]
	if flags&dot11FlagProtected != 0 {
		l.protected = true
		l.Contents, l.Payload = data[:header], payload
		return nil
	}
	if qos && data[qosOffset]&dot11QoSAMSDU != 0 {
		// An A-MSDU: subframes of destination, source and length, then the
		// LLC header. The first subframe is decoded.
		if len(payload) < 14 {
			df.SetTruncated()
			return errHeaderCut
		}
		subframe := int(binary.BigEndian.Uint16(payload[12:14]))
		header += 14
		payload = payload[14:min(14+subframe, len(payload))]
	}
	l.data = true
	l.Contents, l.Payload = data[:header], payload
	return nil
}

// greLayer is layers.GRE with the protocols gopacket does not map: ERSPAN
// type I (protocol 0x88be without a sequence number) and III (0x22eb),
// Aruba's 802.11 frames (0x8200-0x8370 and 0x9000, as Wireshark reads them)
// and WCCP redirection (0x883e, with or without its 4-byte header).
type greLayer struct{ layers.GRE }

func (l *greLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.GRE.DecodeFromBytes(data, df); err != nil {
		return err
	}
	if l.Protocol == etherTypeWCCP && len(l.Payload) >= 4 && l.Payload[0]>>4 != 4 {
		l.Payload = l.Payload[4:] // the WCCP redirect header
	}
	return nil
}

func (l *greLayer) NextLayerType() gopacket.LayerType {
	p := l.Protocol
	switch {
	case p == layers.EthernetTypeERSPAN && !l.SeqPresent:
		return layers.LayerTypeEthernet // type I: no ERSPAN header
	case p == etherTypeERSPAN3:
		return layerTypeERSPAN3
	case isArubaGRE(p):
		return layers.LayerTypeDot11
	case p == etherTypeWCCP:
		return ipVersionLayer(l.Payload)
	}
	return etherTypeLayer(p)
}

// isArubaGRE reports whether a GRE protocol is one of Aruba's for 802.11
// frames from an access point to its controller.
func isArubaGRE(p layers.EthernetType) bool {
	return (p >= 0x8200 && p <= 0x8370 && p&0x0f == 0) || p == 0x9000
}

// erspan3Layer is the ERSPAN type III header (12 bytes, and an 8-byte
// platform-specific subheader when its O bit is set). Its frame type says
// whether an Ethernet frame (0) or an IP packet (2) follows.
type erspan3Layer struct {
	layers.BaseLayer
	frameType byte
}

func (l *erspan3Layer) CanDecode() gopacket.LayerClass { return layerTypeERSPAN3 }
func (l *erspan3Layer) NextLayerType() gopacket.LayerType {
	switch l.frameType {
	case 0:
		return layers.LayerTypeEthernet
	case 2:
		return ipVersionLayer(l.Payload)
	}
	return gopacket.LayerTypePayload
}

func (l *erspan3Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 12 {
		df.SetTruncated()
		return errHeaderCut
	}
	header := 12
	if data[11]&0x01 != 0 {
		header += 8
	}
	if len(data) < header {
		df.SetTruncated()
		return errHeaderCut
	}
	l.frameType = (data[10] >> 2) & 0x1f
	l.Contents, l.Payload = data[:header], data[header:]
	return nil
}

// vxlanGPELayer is the VXLAN Generic Protocol Extension header (UDP 4790):
// its next-protocol byte says what follows when the P flag is set.
type vxlanGPELayer struct {
	layers.BaseLayer
	next byte
}

func (l *vxlanGPELayer) CanDecode() gopacket.LayerClass { return layerTypeVXLANGPE }
func (l *vxlanGPELayer) NextLayerType() gopacket.LayerType {
	switch l.next {
	case 1:
		return layers.LayerTypeIPv4
	case 2:
		return layers.LayerTypeIPv6
	case 3:
		return layers.LayerTypeEthernet
	case 5:
		return layers.LayerTypeMPLS
	}
	return gopacket.LayerTypePayload
}

func (l *vxlanGPELayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 8 {
		df.SetTruncated()
		return errHeaderCut
	}
	l.next = 3 // without the P flag, Ethernet as in VXLAN
	if data[0]&0x04 != 0 {
		l.next = data[3]
	}
	l.Contents, l.Payload = data[:8], data[8:]
	return nil
}

// UDP ports of the tunnels decoded inside UDP (destination port).
const (
	portVXLAN      = 4789
	portVXLANLinux = 8472 // the Linux kernel's default VXLAN port, also flannel's
	portVXLANGPE   = 4790
	portGeneve     = 6081
	portGTPU       = 2152
	portGREinUDP   = 4754 // RFC 8086
	portMPLSinUDP  = 6635 // RFC 7510
	portCAPWAPData = 5247 // RFC 5415: a wireless controller's data channel
	portL2TP       = 1701 // RFC 2661: L2TP (either end)
)

// udpLayer is layers.UDP that goes on into a tunnel only on the tunnel's
// destination port and when the tunnel header is plausible, so that a
// datagram of another protocol on that port stays a UDP datagram.
type udpLayer struct{ layers.UDP }

func (l *udpLayer) NextLayerType() gopacket.LayerType {
	p := l.Payload
	switch l.DstPort {
	case portVXLAN, portVXLANLinux:
		// The I flag, then an Ethernet frame whose EtherType is one this
		// package decodes.
		if len(p) >= 8+14 && p[0]&0x08 != 0 {
			if next := etherTypeLayer(layers.EthernetType(binary.BigEndian.Uint16(p[8+12 : 8+14]))); next != gopacket.LayerTypeZero && next != gopacket.LayerTypePayload {
				return layers.LayerTypeVXLAN
			}
		}
	case portVXLANGPE:
		if len(p) >= 8 && p[0]&0x08 != 0 {
			return layerTypeVXLANGPE
		}
	case portGeneve:
		if len(p) >= 8 && p[0]>>6 == 0 {
			switch layers.EthernetType(binary.BigEndian.Uint16(p[2:4])) {
			case layers.EthernetTypeTransparentEthernetBridging, layers.EthernetTypeIPv4, layers.EthernetTypeIPv6:
				return layers.LayerTypeGeneve
			}
		}
	case portGTPU:
		// Version 1, protocol type GTP, message type G-PDU (user data).
		if len(p) >= 8 && p[0]>>5 == 1 && p[0]&0x10 != 0 && p[1] == 0xff {
			return layers.LayerTypeGTPv1U
		}
	case portGREinUDP:
		if len(p) >= 4 && p[1]&0x07 == 0 {
			switch layers.EthernetType(binary.BigEndian.Uint16(p[2:4])) {
			case layers.EthernetTypeIPv4, layers.EthernetTypeIPv6, layers.EthernetTypeMPLSUnicast, layers.EthernetTypeTransparentEthernetBridging:
				return layers.LayerTypeGRE
			}
		}
	case portMPLSinUDP:
		if len(p) >= 4 {
			return layers.LayerTypeMPLS
		}
	}
	if (l.DstPort == portL2TP || l.SrcPort == portL2TP) && l2tpDataHeader(p) > 0 {
		return layerTypeL2TP
	}
	if l.DstPort == portCAPWAPData || l.SrcPort == portCAPWAPData {
		// The controller's port, either way. Preamble version 0 type 0 (not
		// DTLS-encrypted), and a header length that fits.
		if len(p) >= 8 && p[0] == 0 && int(p[1]>>3)*4 >= 8 && int(p[1]>>3)*4 <= len(p) {
			return layerTypeCAPWAP
		}
	}
	return gopacket.LayerTypePayload
}

// l2tpDataHeader is the length of an L2TPv2 data message's header at the start of
// p (RFC 2661 §3.1), or 0 when p holds none: a control message (T set), another
// version, or a header longer than p.
func l2tpDataHeader(p []byte) int {
	if len(p) < 6 || p[0]&0x80 != 0 || p[1]&0x0f != 2 {
		return 0
	}
	n := 2
	if p[0]&0x40 != 0 { // L: a length field
		n += 2
	}
	n += 4              // tunnel and session IDs
	if p[0]&0x08 != 0 { // S: Ns and Nr
		n += 4
	}
	if p[0]&0x02 != 0 { // O: an offset size and its padding
		if len(p) < n+2 {
			return 0
		}
		n += 2 + int(binary.BigEndian.Uint16(p[n:n+2]))
	}
	if n > len(p) {
		return 0
	}
	return n
}

// l2tpLayer is an L2TPv2 data message's header; a PPP frame follows.
type l2tpLayer struct{ layers.BaseLayer }

func (l *l2tpLayer) CanDecode() gopacket.LayerClass    { return layerTypeL2TP }
func (l *l2tpLayer) NextLayerType() gopacket.LayerType { return layers.LayerTypePPP }

func (l *l2tpLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	n := l2tpDataHeader(data)
	if n == 0 {
		df.SetTruncated()
		return errHeaderCut
	}
	l.Contents, l.Payload = data[:n], data[n:]
	return nil
}

// capwapLayer is a CAPWAP data channel header (RFC 5415 §4.3): what follows is
// an 802.11 frame (T set and wireless binding 1) or an 802.3 frame (T clear).
type capwapLayer struct {
	layers.BaseLayer
	next  gopacket.LayerType
	dot11 *dot11Layer // the decoder's, told that the frame control may be swapped
}

func (l *capwapLayer) CanDecode() gopacket.LayerClass    { return layerTypeCAPWAP }
func (l *capwapLayer) NextLayerType() gopacket.LayerType { return l.next }

func (l *capwapLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 8 {
		df.SetTruncated()
		return errHeaderCut
	}
	header := int(data[1]>>3) * 4
	if header < 8 || header > len(data) {
		df.SetTruncated()
		return errHeaderCut
	}
	// Bits: preamble (8), HLEN (5), RID (5), WBID (5), T, F, L, W, M, K, flags (3).
	wirelessBinding := (data[2] >> 1) & 0x1f
	nativeFrame := data[2]&0x01 != 0
	fragment := data[3]&0x80 != 0
	switch {
	case fragment:
		l.next = gopacket.LayerTypePayload // a fragment: nothing to decode alone
	case nativeFrame && wirelessBinding == 1:
		l.next = layers.LayerTypeDot11
		if l.dot11 != nil {
			l.dot11.mayBeSwapped = true
		}
	case !nativeFrame:
		l.next = layers.LayerTypeEthernet
	default:
		l.next = gopacket.LayerTypePayload
	}
	l.Contents, l.Payload = data[:header], data[header:]
	return nil
}

// NFLOG (LINKTYPE_NFLOG 239): a 4-byte header, then TLVs whose length and
// type are in the capturing host's byte order.
const (
	nflogTypePayload = 9      // NFULA_PAYLOAD: the packet, from its network header
	nflogTypeMask    = 0x3fff // without the nested and byte-order flags
	maxNFLOGTLVs     = 64
)

// nflogLayer finds the packet in an NFLOG record's TLVs.
type nflogLayer struct {
	layers.BaseLayer
	family byte
}

func (l *nflogLayer) CanDecode() gopacket.LayerClass { return layerTypeNFLOG }
func (l *nflogLayer) NextLayerType() gopacket.LayerType {
	switch l.family {
	case 2: // AF_INET
		return layers.LayerTypeIPv4
	case 10: // AF_INET6
		return layers.LayerTypeIPv6
	}
	return ipVersionLayer(l.Payload)
}

func (l *nflogLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 4 {
		df.SetTruncated()
		return errHeaderCut
	}
	l.family = data[0]
	// The first TLV (the packet header, type 1) tells the byte order: its type
	// read in the wrong order is 256 or more.
	var order binary.ByteOrder = binary.LittleEndian
	if len(data) >= 8 && binary.LittleEndian.Uint16(data[6:8])&nflogTypeMask >= 0x100 {
		order = binary.BigEndian
	}
	offset := 4
	for range maxNFLOGTLVs {
		if len(data)-offset < 4 {
			break // no packet TLV in what was captured
		}
		length := int(order.Uint16(data[offset : offset+2]))
		if length < 4 {
			return errNFLOGTLV
		}
		if order.Uint16(data[offset+2:offset+4])&nflogTypeMask == nflogTypePayload {
			l.Contents, l.Payload = data[:offset+4], data[offset+4:min(offset+length, len(data))]
			return nil
		}
		offset += (length + 3) &^ 3
	}
	l.Contents, l.Payload = data, nil
	return nil
}

// pktapLayer is Apple's PKTAP header (macOS tcpdump -k, the pktap interface;
// LINKTYPE_PKTAP 258, and 149 in files macOS writes): its length, record
// type and the link type of the packet that follows, in little-endian. The
// process and interface fields are not read.
type pktapLayer struct {
	layers.BaseLayer
	linkType uint32
	packet   bool
}

func (l *pktapLayer) CanDecode() gopacket.LayerClass { return layerTypePKTAP }
func (l *pktapLayer) NextLayerType() gopacket.LayerType {
	if !l.packet {
		return gopacket.LayerTypePayload
	}
	switch layers.LinkType(l.linkType) {
	case layers.LinkTypeEthernet:
		return layers.LayerTypeEthernet
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		return layers.LayerTypeLoopback
	case layers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return ipVersionLayer(l.Payload)
	case layers.LinkTypePPP:
		return layers.LayerTypePPP
	}
	return gopacket.LayerTypePayload
}

func (l *pktapLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 12 {
		df.SetTruncated()
		return errHeaderCut
	}
	length := binary.LittleEndian.Uint32(data[0:4])
	if length < 12 || int64(length) > int64(len(data)) {
		df.SetTruncated()
		return errHeaderCut
	}
	l.packet = binary.LittleEndian.Uint32(data[4:8]) == 1 // PTH_RECORD_TYPE_PACKET
	l.linkType = binary.LittleEndian.Uint32(data[8:12])
	l.Contents, l.Payload = data[:length], data[length:]
	return nil
}
