package quic

import (
	"errors"
	"fmt"
)

// FrameType is a frame's type (RFC 9000 §19), with the STREAM types 0x08-0x0f all
// reported as FrameStream and the flags in the Frame.
type FrameType uint64

// Frame types.
const (
	FramePadding            FrameType = 0x00
	FramePing               FrameType = 0x01
	FrameAck                FrameType = 0x02
	FrameAckECN             FrameType = 0x03
	FrameResetStream        FrameType = 0x04
	FrameStopSending        FrameType = 0x05
	FrameCrypto             FrameType = 0x06
	FrameNewToken           FrameType = 0x07
	FrameStream             FrameType = 0x08
	FrameMaxData            FrameType = 0x10
	FrameMaxStreamData      FrameType = 0x11
	FrameMaxStreamsBidi     FrameType = 0x12
	FrameMaxStreamsUni      FrameType = 0x13
	FrameDataBlocked        FrameType = 0x14
	FrameStreamDataBlocked  FrameType = 0x15
	FrameStreamsBlockedBidi FrameType = 0x16
	FrameStreamsBlockedUni  FrameType = 0x17
	FrameNewConnectionID    FrameType = 0x18
	FrameRetireConnectionID FrameType = 0x19
	FramePathChallenge      FrameType = 0x1a
	FramePathResponse       FrameType = 0x1b
	FrameConnectionClose    FrameType = 0x1c
	FrameApplicationClose   FrameType = 0x1d
	FrameHandshakeDone      FrameType = 0x1e
	FrameImmediateAck       FrameType = 0x1f // draft-ietf-quic-ack-frequency
	FrameDatagram           FrameType = 0x30 // RFC 9221, without a length
	FrameDatagramLen        FrameType = 0x31 // RFC 9221, with a length
	FrameAckFrequency       FrameType = 0xaf // draft-ietf-quic-ack-frequency
	FrameResetStreamAt      FrameType = 0x24 // draft-ietf-quic-reliable-stream-reset
)

func (t FrameType) String() string {
	switch t {
	case FramePadding:
		return "PADDING"
	case FramePing:
		return "PING"
	case FrameAck, FrameAckECN:
		return "ACK"
	case FrameResetStream:
		return "RESET_STREAM"
	case FrameStopSending:
		return "STOP_SENDING"
	case FrameCrypto:
		return "CRYPTO"
	case FrameNewToken:
		return "NEW_TOKEN"
	case FrameStream:
		return "STREAM"
	case FrameMaxData:
		return "MAX_DATA"
	case FrameMaxStreamData:
		return "MAX_STREAM_DATA"
	case FrameMaxStreamsBidi, FrameMaxStreamsUni:
		return "MAX_STREAMS"
	case FrameDataBlocked:
		return "DATA_BLOCKED"
	case FrameStreamDataBlocked:
		return "STREAM_DATA_BLOCKED"
	case FrameStreamsBlockedBidi, FrameStreamsBlockedUni:
		return "STREAMS_BLOCKED"
	case FrameNewConnectionID:
		return "NEW_CONNECTION_ID"
	case FrameRetireConnectionID:
		return "RETIRE_CONNECTION_ID"
	case FramePathChallenge:
		return "PATH_CHALLENGE"
	case FramePathResponse:
		return "PATH_RESPONSE"
	case FrameConnectionClose, FrameApplicationClose:
		return "CONNECTION_CLOSE"
	case FrameHandshakeDone:
		return "HANDSHAKE_DONE"
	case FrameImmediateAck:
		return "IMMEDIATE_ACK"
	case FrameDatagram, FrameDatagramLen:
		return "DATAGRAM"
	case FrameAckFrequency:
		return "ACK_FREQUENCY"
	case FrameResetStreamAt:
		return "RESET_STREAM_AT"
	}
	return fmt.Sprintf("0x%x", uint64(t))
}

// AckRange is a range of acknowledged packet numbers, both ends included.
type AckRange struct{ Smallest, Largest int64 }

// Frame is one decoded frame. Fields not used by its type are zero.
type Frame struct {
	Type FrameType
	// StreamID: STREAM, RESET_STREAM, STOP_SENDING, MAX_STREAM_DATA, STREAM_DATA_BLOCKED.
	StreamID uint64
	// Offset and Length: the data of CRYPTO and STREAM frames; Length is also the
	// count of a run of PADDING bytes (one Frame for the run) and of DATAGRAM data.
	Offset, Length uint64
	Fin            bool
	// Data is the CRYPTO or STREAM data; it points into the packet's payload.
	Data []byte
	// AckRanges of an ACK frame, largest first; AckDelay is the encoded delay
	// (multiply by 2^ack_delay_exponent for microseconds).
	AckRanges []AckRange
	AckDelay  uint64
	// ErrorCode and Reason: CONNECTION_CLOSE, RESET_STREAM, STOP_SENDING.
	ErrorCode uint64
	Reason    string
	// Value: MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS, the BLOCKED frames, the sequence
	// number of NEW_CONNECTION_ID and RETIRE_CONNECTION_ID.
	Value uint64
	// ConnectionID of NEW_CONNECTION_ID.
	ConnectionID []byte
}

// AckEliciting reports whether a frame makes its packet ack-eliciting (RFC 9002 §2):
// every frame but ACK, PADDING and CONNECTION_CLOSE.
func (f *Frame) AckEliciting() bool {
	switch f.Type {
	case FrameAck, FrameAckECN, FramePadding, FrameConnectionClose, FrameApplicationClose:
		return false
	}
	return true
}

// Acks reports whether the ACK frame f acknowledges packet number pn.
func (f *Frame) Acks(pn int64) bool {
	for _, r := range f.AckRanges {
		if pn >= r.Smallest && pn <= r.Largest {
			return true
		}
	}
	return false
}

// ErrFrame reports a frame that could not be decoded; the frames before it were.
var ErrFrame = errors.New("quic: malformed frame")

// maxAckRanges bounds the ranges read from one ACK frame (a packet of 1,500 bytes
// holds fewer than 750).
const maxAckRanges = 1024

// ParseFrames decodes the frames of a packet's payload and appends them to frames. It
// stops at the first frame it cannot decode and returns what came before with an
// error: a frame of unknown type cannot be skipped, as its length is unknown.
func ParseFrames(payload []byte, frames []Frame) ([]Frame, error) {
	r := reader{b: payload}
	for len(r.b) > 0 {
		start := len(r.b)
		typ := r.varint()
		if r.err != nil {
			return frames, fmt.Errorf("%w: frame type: %v", ErrFrame, r.err)
		}
		f := Frame{Type: FrameType(typ)}
		switch {
		case typ == 0x00:
			n := 1
			for len(r.b) > 0 && r.b[0] == 0 {
				r.b = r.b[1:]
				n++
			}
			f.Length = uint64(n)
		case typ == 0x01, typ == 0x1e, typ == 0x1f:
		case typ == 0x02 || typ == 0x03:
			largest := r.varint()
			f.AckDelay = r.varint()
			count := r.varint()
			first := r.varint()
			if r.err == nil && (first > largest || count > maxAckRanges) {
				r.err = errors.New("ACK range beyond packet number 0")
			}
			if r.err != nil {
				break
			}
			smallest := int64(largest) - int64(first)
			f.AckRanges = make([]AckRange, 0, count+1)
			f.AckRanges = append(f.AckRanges, AckRange{smallest, int64(largest)})
			for i := uint64(0); i < count && r.err == nil; i++ {
				gap := r.varint()
				length := r.varint()
				top := smallest - int64(gap) - 2
				if r.err == nil && (gap > 1<<62 || length > 1<<62 || top < 0 || int64(length) > top) {
					r.err = errors.New("ACK range beyond packet number 0")
				}
				if r.err != nil {
					break
				}
				smallest = top - int64(length)
				f.AckRanges = append(f.AckRanges, AckRange{smallest, top})
			}
			if typ == 0x03 {
				r.varint()
				r.varint()
				r.varint()
			}
		case typ == 0x04:
			f.StreamID, f.ErrorCode, f.Value = r.varint(), r.varint(), r.varint()
		case typ == 0x05:
			f.StreamID, f.ErrorCode = r.varint(), r.varint()
		case typ == 0x06:
			f.Offset = r.varint()
			f.Length = r.varint()
			f.Data = r.take(f.Length)
		case typ == 0x07:
			r.take(r.varint())
		case typ >= 0x08 && typ <= 0x0f:
			f.Type = FrameStream
			f.StreamID = r.varint()
			if typ&0x04 != 0 {
				f.Offset = r.varint()
			}
			if typ&0x02 != 0 {
				f.Length = r.varint()
			} else {
				f.Length = uint64(len(r.b))
			}
			f.Fin = typ&0x01 != 0
			f.Data = r.take(f.Length)
		case typ == 0x10, typ == 0x12, typ == 0x13, typ == 0x14, typ == 0x16, typ == 0x17, typ == 0x19:
			f.Value = r.varint()
		case typ == 0x11, typ == 0x15:
			f.StreamID, f.Value = r.varint(), r.varint()
		case typ == 0x18:
			f.Value = r.varint()
			r.varint() // retire prior to
			n := r.byte()
			if r.err == nil && (n < 1 || n > MaxConnectionIDBytes) {
				r.err = errors.New("connection ID length out of range")
			}
			f.ConnectionID = r.take(uint64(n))
			r.take(16) // stateless reset token
		case typ == 0x1a, typ == 0x1b:
			r.take(8)
		case typ == 0x1c, typ == 0x1d:
			f.ErrorCode = r.varint()
			if typ == 0x1c {
				r.varint() // the frame type that caused it
			}
			f.Reason = string(r.take(r.varint()))
		case typ == 0x30:
			f.Length = uint64(len(r.b))
			r.take(f.Length)
		case typ == 0x31:
			f.Length = r.varint()
			r.take(f.Length)
		case typ == 0x24:
			f.StreamID, f.ErrorCode, f.Value = r.varint(), r.varint(), r.varint()
			r.varint() // reliable size
		case typ == 0xaf:
			r.varint()
			r.varint()
			r.varint()
			r.varint()
		default:
			return frames, fmt.Errorf("%w: unknown frame type %#x at byte %d", ErrFrame, typ, len(payload)-start)
		}
		if r.err != nil {
			return frames, fmt.Errorf("%w: %s frame at byte %d: %v", ErrFrame, f.Type, len(payload)-start, r.err)
		}
		frames = append(frames, f)
	}
	return frames, nil
}

// reader reads varints and byte strings; after the first failure every read fails.
type reader struct {
	b   []byte
	err error
}

func (r *reader) varint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n, err := ReadVarint(r.b)
	if err != nil {
		r.err = errors.New("cut inside a variable-length integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() uint8 {
	if b := r.take(1); len(b) == 1 {
		return b[0]
	}
	return 0
}

func (r *reader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%d bytes announced, %d left", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
