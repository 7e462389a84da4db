package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/gopacket/gopacket/layers"
)

// The pcapng format (draft-ietf-opsawg-pcapng): blocks, each a type, a total
// length, a body and the total length again. A section header block starts
// each section and gives its byte order; interface description blocks give
// each interface's link type and timestamp resolution; enhanced, simple and
// (obsolete) packet blocks hold the records. Other blocks are skipped.
const (
	ngBlockSectionHeader       uint32 = 0x0a0d0d0a
	ngBlockInterface           uint32 = 1
	ngBlockPacketObsolete      uint32 = 2
	ngBlockSimplePacket        uint32 = 3
	ngBlockNameResolution      uint32 = 4
	ngBlockInterfaceStatistics uint32 = 5
	ngBlockEnhancedPacket      uint32 = 6
	ngBlockSystemdJournal      uint32 = 9
	ngBlockDecryptionSecrets   uint32 = 10
	ngBlockCustom              uint32 = 0x00000bad
	ngBlockCustomNoCopy        uint32 = 0x40000bad

	ngByteOrderMagic = 0x1a2b3c4d
	// ngBlockOverheadBytes is a block's type and two length fields.
	ngBlockOverheadBytes = 12
	// ngMaxBlockBytes is the longest block read (Wireshark's limit too): a
	// longer length field is damage. A packet block's packet is bounded
	// further, by MaxRecordBytes.
	ngMaxBlockBytes = 16 << 20
	// ngMaxPacketOptionBytes bounds the options of a packet block longer than
	// the read buffer: a length field further beyond the packet is damage.
	ngMaxPacketOptionBytes = 64 << 10

	ngOptionEnd               = 0
	ngOptionTimestampResol    = 9
	ngOptionTimestampOffset   = 14
	ngDefaultTimestampDecimal = 6 // microseconds, when an interface does not say
)

// ngMinBlockBytes is the shortest total length of a block of a known type;
// ok is false for types this reader does not know.
func ngMinBlockBytes(blockType uint32) (minBytes uint32, ok bool) {
	switch blockType {
	case ngBlockSectionHeader:
		return 28, true
	case ngBlockInterface:
		return 20, true
	case ngBlockEnhancedPacket, ngBlockPacketObsolete:
		return 32, true
	case ngBlockSimplePacket, ngBlockCustom, ngBlockCustomNoCopy:
		return 16, true
	case ngBlockInterfaceStatistics:
		return 24, true
	case ngBlockNameResolution, ngBlockSystemdJournal, ngBlockDecryptionSecrets:
		return ngBlockOverheadBytes, true
	}
	return ngBlockOverheadBytes, false
}

// ngInterface is what the reader keeps of an interface description.
type ngInterface struct {
	linkType       layers.LinkType
	snaplen        uint32
	unitsPerSecond uint64 // timestamp units: 10^n or 2^n per second
	nsPerUnit      uint64 // 1e9 / unitsPerSecond when that is whole, else 0
	offsetSeconds  int64  // if_tsoffset
}

// timestampNs converts a packet block's timestamp to Unix nanoseconds.
func (i *ngInterface) timestampNs(units uint64) int64 {
	seconds, fraction := units/i.unitsPerSecond, units%i.unitsPerSecond
	var ns uint64
	if i.nsPerUnit != 0 {
		ns = fraction * i.nsPerUnit
	} else { // finer than a nanosecond, or binary: fraction * 1e9 / units in 128 bits
		hi, lo := bits.Mul64(fraction, 1e9)
		ns, _ = bits.Div64(hi, lo, i.unitsPerSecond)
	}
	return (int64(seconds)+i.offsetSeconds)*1e9 + int64(ns)
}

// setResolution applies an if_tsresol option's value: the low 7 bits are an
// exponent of 10, or of 2 when the high bit is set. A resolution finer than
// a 64-bit count can hold leaves the default.
func (i *ngInterface) setResolution(v byte) {
	exponent := uint64(v & 0x7f)
	var units uint64
	switch {
	case v&0x80 != 0 && exponent <= 63:
		units = 1 << exponent
	case v&0x80 == 0 && exponent <= 19:
		units = 1
		for range exponent {
			units *= 10
		}
	default:
		return
	}
	i.unitsPerSecond = units
	i.nsPerUnit = 0
	if units <= 1e9 && 1e9%units == 0 {
		i.nsPerUnit = 1e9 / units
	}
}

// pcapngReader reads the records of a pcapng file, each in place from the
// stream's buffer. A block whose length fields are impossible or disagree is
// a damaged place: the reader scans forward for the next block of a known
// type whose two length fields agree (see resync). A block that is whole but
// cannot be used (a packet of an interface that does not exist) is skipped
// and counted as damage too.
type pcapngReader struct {
	s           *byteStream
	bigEndian   bool
	ifaces      []ngInterface
	pending     int   // bytes of the block handed out last, to consume before the next
	blockStart  int64 // where the block nextBlock returned last starts in the file
	records     int64 // records handed out
	damage      *Damage
	skipSection bool // the current section's version is unknown: its blocks are skipped
	// onInterface is called for each interface description read.
	onInterface func(linkType layers.LinkType, snaplen uint32)
}

// newPcapngReader reads the first section header.
func newPcapngReader(s *byteStream, damage *Damage, onInterface func(layers.LinkType, uint32)) (*pcapngReader, error) {
	r := &pcapngReader{s: s, damage: damage, onInterface: onInterface}
	head, err := s.peek(ngBlockOverheadBytes)
	if len(head) < ngBlockOverheadBytes {
		return nil, endOfInput(len(head), err)
	}
	bigEndian, ok := ngByteOrder(head[8:12])
	if !ok {
		return nil, fmt.Errorf("the section header's byte-order magic is % x, not 1a2b3c4d in either byte order", head[8:12])
	}
	length := ngU32(bigEndian, head[4:8])
	if minBytes, _ := ngMinBlockBytes(ngBlockSectionHeader); length < minBytes || length%4 != 0 || length > uint32(s.window()) {
		return nil, fmt.Errorf("the section header's length %d is impossible", length)
	}
	block, err := s.peek(int(length))
	if len(block) < int(length) {
		return nil, endOfInput(len(block), err)
	}
	if trailer := ngU32(bigEndian, block[length-4:]); trailer != length {
		return nil, fmt.Errorf("the section header's length fields disagree (%d and %d)", length, trailer)
	}
	if major := ngU16(bigEndian, block[12:14]); major != 1 {
		return nil, fmt.Errorf("unknown pcapng version %d.%d (version 1 is read)", major, ngU16(bigEndian, block[14:16]))
	}
	r.bigEndian = bigEndian
	if err := s.discard(int(length)); err != nil {
		return nil, err
	}
	return r, nil
}

// ngByteOrder reads a section header's byte-order magic.
func ngByteOrder(b []byte) (bigEndian, ok bool) {
	switch {
	case binary.BigEndian.Uint32(b) == ngByteOrderMagic:
		return true, true
	case binary.LittleEndian.Uint32(b) == ngByteOrderMagic:
		return false, true
	}
	return false, false
}

func ngU16(bigEndian bool, b []byte) uint16 {
	if bigEndian {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func ngU32(bigEndian bool, b []byte) uint32 {
	if bigEndian {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *pcapngReader) u16(b []byte) uint16 { return ngU16(r.bigEndian, b) }
func (r *pcapngReader) u32(b []byte) uint32 { return ngU32(r.bigEndian, b) }

// next reads the next record.
func (r *pcapngReader) next(rec *record) error {
	for {
		blockType, body, err := r.nextBlock()
		if err != nil {
			return err
		}
		if r.skipSection && blockType != ngBlockSectionHeader {
			r.damage.Bytes += int64(len(body) + ngBlockOverheadBytes)
			continue
		}
		switch blockType {
		case ngBlockEnhancedPacket, ngBlockPacketObsolete:
			var iface int
			if blockType == ngBlockEnhancedPacket {
				iface = int(r.u32(body[0:4]))
			} else {
				iface = int(r.u16(body[0:2]))
			}
			captured, wire := r.u32(body[12:16]), r.u32(body[16:20])
			if iface >= len(r.ifaces) || int64(captured) > int64(len(body)-20) {
				r.unusable(body)
				continue
			}
			in := &r.ifaces[iface]
			rec.data = body[20 : 20+captured]
			rec.timestampNs = in.timestampNs(uint64(r.u32(body[4:8]))<<32 | uint64(r.u32(body[8:12])))
			rec.wireBytes = int(wire)
			rec.linkType = in.linkType
			rec.iface = iface
		case ngBlockSimplePacket:
			if len(r.ifaces) == 0 {
				r.unusable(body)
				continue
			}
			in := &r.ifaces[0]
			wire := r.u32(body[0:4])
			captured := min(int64(wire), int64(len(body)-4))
			if in.snaplen != 0 {
				captured = min(captured, int64(in.snaplen))
			}
			rec.data = body[4 : 4+captured]
			rec.timestampNs = 0 // a simple packet block has no timestamp
			rec.wireBytes = int(wire)
			rec.linkType = in.linkType
			rec.iface = 0
		case ngBlockSectionHeader:
			r.section(body)
			continue
		case ngBlockInterface:
			r.addInterface(body)
			continue
		default:
			continue
		}
		r.records++
		return nil
	}
}

// unusable counts a whole block that cannot be used as a damaged place.
func (r *pcapngReader) unusable(body []byte) {
	r.damage.place(r.records+1, r.blockStart)
	r.damage.Bytes += int64(len(body) + ngBlockOverheadBytes)
}

// section starts a new section: its interfaces start afresh. A section of
// an unknown version is skipped, and counted as damage.
func (r *pcapngReader) section(body []byte) {
	r.ifaces = r.ifaces[:0]
	r.skipSection = r.u16(body[4:6]) != 1
	if r.skipSection {
		r.unusable(body)
	}
}

// addInterface reads an interface description block.
func (r *pcapngReader) addInterface(body []byte) {
	in := ngInterface{linkType: layers.LinkType(r.u16(body[0:2])), snaplen: r.u32(body[4:8])}
	in.setResolution(ngDefaultTimestampDecimal)
	for opts := body[8:]; len(opts) >= 4; {
		code, n := r.u16(opts[0:2]), int(r.u16(opts[2:4]))
		if code == ngOptionEnd || 4+n > len(opts) {
			break
		}
		value := opts[4 : 4+n]
		switch {
		case code == ngOptionTimestampResol && n >= 1:
			in.setResolution(value[0])
		case code == ngOptionTimestampOffset && n >= 8:
			if r.bigEndian {
				in.offsetSeconds = int64(binary.BigEndian.Uint64(value))
			} else {
				in.offsetSeconds = int64(binary.LittleEndian.Uint64(value))
			}
		}
		opts = opts[min(4+(n+3)&^3, len(opts)):]
	}
	r.ifaces = append(r.ifaces, in)
	if r.onInterface != nil {
		r.onInterface(in.linkType, in.snaplen)
	}
}

// nextBlock returns the next block whose length fields agree: its type and
// its body (without the type and length fields), which is long enough for
// the type's fixed fields. It skips damaged places.
func (r *pcapngReader) nextBlock() (blockType uint32, body []byte, err error) {
	if r.pending > 0 {
		if err := r.s.discard(r.pending); err != nil {
			return 0, nil, err
		}
		r.pending = 0
	}
	for {
		head, err := r.s.peek(ngBlockOverheadBytes)
		if len(head) < ngBlockOverheadBytes {
			return 0, nil, endOfInput(len(head), err)
		}
		blockType, length, bigEndian, ok := r.blockHeader(head)
		if !ok {
			if err := r.damaged(1); err != nil {
				return 0, nil, err
			}
			continue
		}
		if int(length)+ngBlockOverheadBytes <= r.s.window() {
			block, err := r.s.peek(int(length) + ngBlockOverheadBytes)
			if len(block) < int(length) {
				// The input ends inside the block: cut short, or its length is
				// wrong, which a good block starting inside it would show.
				if errors.Is(err, io.EOF) {
					if skip := r.blockInside(int(length)); skip > 0 {
						if err := r.s.skipDamage(r.damage, r.records+1, skip); err != nil {
							return 0, nil, err
						}
						continue
					}
				}
				return 0, nil, endOfInput(len(block), err)
			}
			if ngU32(bigEndian, block[length-4:]) != length {
				if err := r.damaged(1); err != nil {
					return 0, nil, err
				}
				continue
			}
			if len(block) == int(length)+ngBlockOverheadBytes && !r.looksLikeBlock(block[length:]) {
				// What follows is not a block: this block's length fields
				// may agree by chance (a block cut short whose trailer field
				// reads the next block's length), which a good block
				// starting inside it would show.
				if skip := r.blockInside(int(length)); skip > 0 {
					if err := r.s.skipDamage(r.damage, r.records+1, skip); err != nil {
						return 0, nil, err
					}
					continue
				}
				block, _ = r.s.peek(int(length)) // blockInside may have moved the buffer
			}
			r.pending = int(length)
			r.bigEndian = bigEndian
			r.blockStart = r.s.offset
			return blockType, block[8 : length-4], nil
		}
		// A block longer than the read buffer: check what can be checked
		// before its bytes are consumed, then read it whole.
		if blockType == ngBlockEnhancedPacket || blockType == ngBlockPacketObsolete {
			head, err := r.s.peek(28)
			if len(head) < 28 {
				return 0, nil, endOfInput(len(head), err)
			}
			captured := int64(ngU32(bigEndian, head[20:24]))
			if options := int64(length) - 32 - captured; options < 0 || options > ngMaxPacketOptionBytes || captured > MaxRecordBytes {
				if err := r.damaged(1); err != nil {
					return 0, nil, err
				}
				continue
			}
		}
		start := r.s.offset
		if err := r.s.discard(8); err != nil {
			return 0, nil, err
		}
		block, err := r.s.readLarge(int(length) - 8)
		if err != nil {
			return 0, nil, err
		}
		if ngU32(bigEndian, block[len(block)-4:]) != length {
			r.damage.place(r.records+1, start)
			r.damage.Bytes += int64(length)
			if err := r.resync(0); err != nil {
				return 0, nil, err
			}
			continue
		}
		r.bigEndian = bigEndian
		r.blockStart = start
		return blockType, block[:len(block)-4], nil
	}
}

// blockHeader reads a block's type and length from its first 12 bytes, in
// the byte order the block is in (a section header's own), and reports
// whether the length can be that of a block of the type.
func (r *pcapngReader) blockHeader(head []byte) (blockType, length uint32, bigEndian, ok bool) {
	bigEndian = r.bigEndian
	blockType = ngU32(bigEndian, head[0:4])
	if blockType == ngBlockSectionHeader { // the same bytes in either order
		if bigEndian, ok = ngByteOrder(head[8:12]); !ok {
			return blockType, 0, false, false
		}
	}
	length = ngU32(bigEndian, head[4:8])
	minBytes, _ := ngMinBlockBytes(blockType)
	return blockType, length, bigEndian, length >= minBytes && length%4 == 0 && length <= ngMaxBlockBytes
}

// looksLikeBlock reports whether head, the first 12 bytes of what follows a
// block, starts a block of a known type with a possible length.
func (r *pcapngReader) looksLikeBlock(head []byte) bool {
	blockType, _, _, ok := r.blockHeader(head)
	_, known := ngMinBlockBytes(blockType)
	return ok && known
}

// blockInside looks for a good block (see blockAt) that starts inside the
// block at the stream's position, blockBytes long, and returns its offset (0
// when there is none).
func (r *pcapngReader) blockInside(blockBytes int) int {
	buf, err := r.s.peek(r.s.window())
	eof := err != nil
	for at := 1; at < blockBytes && at < len(buf); at++ {
		if r.blockAt(buf, at, eof) == runFound {
			return at
		}
	}
	return 0
}

// damaged counts a damaged place at the stream's position and skips it,
// looking for the next good block from skip bytes on.
func (r *pcapngReader) damaged(skip int) error {
	r.damage.place(r.records+1, r.s.offset)
	return r.resync(skip)
}

// blockAt reports whether a good block starts at offset at of buf, the bytes
// at hand (all that remain of the input when eof): a block of a known type
// whose two length fields agree, and for a packet block, of an interface of
// the section with room for its packet; no longer than half the read buffer.
func (r *pcapngReader) blockAt(buf []byte, at int, eof bool) runResult {
	if at+ngBlockOverheadBytes > len(buf) {
		if eof {
			return runNone
		}
		return runUnknown
	}
	blockType, length, bigEndian, ok := r.blockHeader(buf[at:])
	if _, known := ngMinBlockBytes(blockType); !ok || !known {
		return runNone
	}
	if int(length) > r.s.window()/2 {
		// Too long a block to check in the buffer with room to spare: a
		// place to read again must be decided by the next refill at the
		// latest, or a scan could refill for every byte.
		return runNone
	}
	if at+int(length) > len(buf) {
		if eof {
			return runNone
		}
		return runUnknown
	}
	block := buf[at : at+int(length)]
	if ngU32(bigEndian, block[length-4:]) != length {
		return runNone
	}
	switch blockType {
	case ngBlockEnhancedPacket:
		iface, captured := ngU32(bigEndian, block[8:12]), ngU32(bigEndian, block[20:24])
		if int64(iface) >= int64(len(r.ifaces)) || int64(captured) > int64(length)-32 {
			return runNone
		}
	case ngBlockSimplePacket:
		if len(r.ifaces) == 0 {
			return runNone
		}
	}
	return runFound
}

// pcapngLengthField is a block's total length, never 0 in a good block.
var pcapngLengthField = lengthField{offset: 4, size: 4}

// resync consumes bytes from the stream, from skip bytes after its position
// on, up to the next good block (see blockAt) or the end of the input. It
// counts the bytes skipped and returns only read errors.
func (r *pcapngReader) resync(skip int) error {
	return r.s.resync(skip, r.damage, pcapngLengthField, r.blockAt)
}
