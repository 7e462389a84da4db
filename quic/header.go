package quic

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version1 is QUIC version 1 (RFC 9000).
const Version1 uint32 = 0x00000001

// MaxConnectionIDBytes is the longest connection ID of QUIC version 1.
const MaxConnectionIDBytes = 20

// PacketType is the type of a QUIC packet.
type PacketType uint8

// Packet types.
const (
	PacketInitial PacketType = iota + 1
	PacketZeroRTT
	PacketHandshake
	PacketRetry
	PacketVersionNegotiation
	PacketOneRTT
)

func (t PacketType) String() string {
	switch t {
	case PacketInitial:
		return "initial"
	case PacketZeroRTT:
		return "0rtt"
	case PacketHandshake:
		return "handshake"
	case PacketRetry:
		return "retry"
	case PacketVersionNegotiation:
		return "version_negotiation"
	case PacketOneRTT:
		return "1rtt"
	}
	return "unknown"
}

// Space is a packet number space (RFC 9000 §12.3).
type Space uint8

// Packet number spaces.
const (
	SpaceInitial Space = iota
	SpaceHandshake
	SpaceApplication
	SpaceNone // Retry and Version Negotiation packets have no packet number
)

func (s Space) String() string {
	switch s {
	case SpaceInitial:
		return "initial"
	case SpaceHandshake:
		return "handshake"
	case SpaceApplication:
		return "application"
	}
	return "none"
}

// Space returns the packet number space of a packet type.
func (t PacketType) Space() Space {
	switch t {
	case PacketInitial:
		return SpaceInitial
	case PacketHandshake:
		return SpaceHandshake
	case PacketZeroRTT, PacketOneRTT:
		return SpaceApplication
	}
	return SpaceNone
}

// Errors of header parsing.
var (
	ErrShort      = errors.New("quic: packet shorter than its header says")
	ErrNotQUIC    = errors.New("quic: the fixed bit is not set: not a QUIC packet")
	ErrBadVersion = errors.New("quic: version not supported")
)

// Header is the unprotected part of a packet's header, as it is before header
// protection is removed (so without the packet number).
type Header struct {
	Type    PacketType
	Version uint32 // 0 for short headers
	DCID    []byte // points into the datagram
	SCID    []byte // long headers only
	Token   []byte // Initial and Retry
	// PacketNumberOffset is the offset of the (protected) packet number from the
	// packet's start; 0 for Retry and Version Negotiation.
	PacketNumberOffset int
	// Size is the packet's length in the datagram: the long header's Length field
	// plus the header before it, or the rest of the datagram for short headers,
	// Retry and Version Negotiation.
	Size int
}

// IsLongHeader reports whether the first byte of a packet announces a long header.
func IsLongHeader(first byte) bool { return first&0x80 != 0 }

// ParseHeader reads the header of the packet at the start of b, a datagram or the rest
// of one after coalesced packets. shortDCIDBytes is the length of the Destination
// Connection ID in short headers, which the header does not say (the receiver chose it).
func ParseHeader(b []byte, shortDCIDBytes int) (Header, error) {
	var h Header
	if len(b) < 1 {
		return h, ErrShort
	}
	first := b[0]
	if !IsLongHeader(first) {
		if first&0x40 == 0 {
			return h, ErrNotQUIC
		}
		if shortDCIDBytes < 0 || shortDCIDBytes > MaxConnectionIDBytes || len(b) < 1+shortDCIDBytes+1 {
			return h, ErrShort
		}
		h.Type = PacketOneRTT
		h.DCID = b[1 : 1+shortDCIDBytes]
		h.PacketNumberOffset = 1 + shortDCIDBytes
		h.Size = len(b)
		return h, nil
	}
	if len(b) < 7 {
		return h, ErrShort
	}
	h.Version = binary.BigEndian.Uint32(b[1:5])
	pos := 5
	readCID := func() ([]byte, error) {
		if pos >= len(b) {
			return nil, ErrShort
		}
		n := int(b[pos])
		pos++
		if n > 255 || pos+n > len(b) {
			return nil, ErrShort
		}
		id := b[pos : pos+n]
		pos += n
		return id, nil
	}
	var err error
	if h.DCID, err = readCID(); err != nil {
		return h, err
	}
	if h.SCID, err = readCID(); err != nil {
		return h, err
	}
	if h.Version == 0 {
		h.Type, h.Size = PacketVersionNegotiation, len(b)
		return h, nil
	}
	if h.Version != Version1 {
		h.Size = len(b)
		return h, fmt.Errorf("%w: %#08x", ErrBadVersion, h.Version)
	}
	if len(h.DCID) > MaxConnectionIDBytes || len(h.SCID) > MaxConnectionIDBytes {
		return h, fmt.Errorf("quic: connection ID longer than %d bytes", MaxConnectionIDBytes)
	}
	if first&0x40 == 0 {
		return h, ErrNotQUIC
	}
	switch (first >> 4) & 0x03 {
	case 0:
		h.Type = PacketInitial
	case 1:
		h.Type = PacketZeroRTT
	case 2:
		h.Type = PacketHandshake
	case 3:
		h.Type = PacketRetry
		h.Token = b[pos:]
		h.Size = len(b)
		return h, nil
	}
	if h.Type == PacketInitial {
		tokenLen, n, err := ReadVarint(b[pos:])
		if err != nil {
			return h, ErrShort
		}
		pos += n
		if tokenLen > uint64(len(b)-pos) {
			return h, ErrShort
		}
		h.Token = b[pos : pos+int(tokenLen)]
		pos += int(tokenLen)
	}
	length, n, err := ReadVarint(b[pos:])
	if err != nil {
		return h, ErrShort
	}
	pos += n
	if length > uint64(len(b)-pos) {
		return h, ErrShort
	}
	h.PacketNumberOffset = pos
	h.Size = pos + int(length)
	return h, nil
}

// ReadVarint reads a variable-length integer (RFC 9000 §16) and returns it with the
// bytes it took.
func ReadVarint(b []byte) (uint64, int, error) {
	if len(b) == 0 {
		return 0, 0, ErrShort
	}
	n := 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0, ErrShort
	}
	v := uint64(b[0] & 0x3f)
	for i := 1; i < n; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v, n, nil
}

// DecodePacketNumber expands a truncated packet number of pnBytes bytes, given the
// largest packet number received so far in its space (-1 for none), as RFC 9000
// Appendix A.3 does.
func DecodePacketNumber(largest int64, truncated uint64, pnBytes int) int64 {
	expected := largest + 1
	window := int64(1) << (8 * pnBytes)
	half := window / 2
	mask := window - 1
	candidate := (expected &^ mask) | int64(truncated)
	switch {
	case candidate <= expected-half && candidate < (1<<62)-window:
		return candidate + window
	case candidate > expected+half && candidate >= window:
		return candidate - window
	}
	return candidate
}
