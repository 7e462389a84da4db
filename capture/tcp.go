package capture

import "encoding/binary"

// tcpFixedHeaderBytes is the size of the TCP header without options.
const tcpFixedHeaderBytes = 20

// TCP option kinds (IANA).
const (
	tcpOptionEnd           = 0
	tcpOptionNop           = 1
	tcpOptionMSS           = 2
	tcpOptionWindowScale   = 3
	tcpOptionSACKPermitted = 4
	tcpOptionSACK          = 5
	tcpOptionTimestamps    = 8
)

// maxWindowScale is the largest shift RFC 7323 allows; larger values are read as it.
const maxWindowScale = 14

// decodeTCP fills p's TCP fields from segment, which holds the captured part of
// a TCP segment. It needs the fixed 20-byte header; options cut off by the
// snaplen are left absent. It returns the header length the data offset
// declares (which may exceed len(segment)).
func decodeTCP(segment []byte, p *Packet) (headerBytes int, ok bool) {
	if len(segment) < tcpFixedHeaderBytes {
		return 0, false
	}
	headerBytes = int(segment[12]>>4) * 4
	if headerBytes < tcpFixedHeaderBytes {
		return 0, false
	}
	p.SrcPort = binary.BigEndian.Uint16(segment[0:2])
	p.DstPort = binary.BigEndian.Uint16(segment[2:4])
	p.Seq = binary.BigEndian.Uint32(segment[4:8])
	p.Ack = binary.BigEndian.Uint32(segment[8:12])
	p.Flags = segment[13]
	p.Window = binary.BigEndian.Uint16(segment[14:16])
	decodeTCPOptions(segment[tcpFixedHeaderBytes:min(headerBytes, len(segment))], &p.Options)
	return headerBytes, true
}

// decodeTCPOptions fills opts from the option bytes of a TCP header. It stops
// at the end-of-options kind, at a malformed length and at an option cut short;
// an option of a known kind with the wrong length is ignored.
func decodeTCPOptions(raw []byte, opts *TCPOptions) {
	// The commonest options by far: two NOPs and the timestamps, on every
	// segment after the handshake of a connection that has them.
	if len(raw) == 12 && raw[0] == tcpOptionNop && raw[1] == tcpOptionNop && raw[2] == tcpOptionTimestamps && raw[3] == 10 {
		*opts = TCPOptions{WindowScale: -1, HasTimestamps: true,
			TSVal: binary.BigEndian.Uint32(raw[4:8]), TSEcr: binary.BigEndian.Uint32(raw[8:12])}
		return
	}
	*opts = TCPOptions{WindowScale: -1}
	for len(raw) > 0 {
		kind := raw[0]
		if kind == tcpOptionEnd {
			return
		}
		if kind == tcpOptionNop {
			raw = raw[1:]
			continue
		}
		if len(raw) < 2 {
			return // cut after the kind byte
		}
		length := int(raw[1])
		if length < 2 || length > len(raw) {
			return // malformed, or cut by the snaplen
		}
		value := raw[2:length]
		raw = raw[length:]
		switch kind {
		case tcpOptionMSS:
			if len(value) == 2 {
				opts.MSS = binary.BigEndian.Uint16(value)
			}
		case tcpOptionWindowScale:
			if len(value) == 1 {
				opts.WindowScale = int8(min(value[0], maxWindowScale))
			}
		case tcpOptionSACKPermitted:
			if len(value) == 0 {
				opts.SACKPermitted = true
			}
		case tcpOptionTimestamps:
			if len(value) == 8 {
				opts.HasTimestamps = true
				opts.TSVal = binary.BigEndian.Uint32(value[0:4])
				opts.TSEcr = binary.BigEndian.Uint32(value[4:8])
			}
		case tcpOptionSACK:
			if len(value)%8 != 0 {
				break
			}
			for len(value) >= 8 && opts.NumSACK < len(opts.SACK) {
				opts.SACK[opts.NumSACK] = SACKBlock{
					Left:  binary.BigEndian.Uint32(value[0:4]),
					Right: binary.BigEndian.Uint32(value[4:8]),
				}
				opts.NumSACK++
				value = value[8:]
			}
		}
	}
}
