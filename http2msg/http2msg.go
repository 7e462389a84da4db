// Package http2msg reads HTTP/2 frames from both directions of a connection's
// plaintext (TLS records decrypted by tlsdecrypt, or h2c with prior knowledge)
// and gathers them into requests, one per stream: method, authority, path,
// status, content type, where in each direction's byte stream the request and
// its response lay, and how many bytes the response took. Header blocks are
// decoded with golang.org/x/net/http2/hpack.
//
// Like tlsrec and httpmsg it is fed each direction's bytes in order with their
// stream offsets and true lengths: uncaptured bytes inside a DATA payload are
// skipped by count, while a frame header or header block that was not captured
// makes the direction lose sync (frame framing, or the HPACK table) rather than
// guess. Offsets are those of the plaintext stream handed over; package tlshttp
// maps them back to TCP stream offsets.
//
// It is not an HTTP/2 implementation: it sends nothing, enforces no flow control
// or stream states, keeps no bodies, and accepts what a peer would reject when
// that does not change the framing.
package http2msg

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"golang.org/x/net/http2/hpack"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/inorder"
)

// ClientPreface is what a client sends before its first frame (RFC 9113, 3.4).
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Frame types (RFC 9113, section 6).
const (
	FrameData         uint8 = 0x0
	FrameHeaders      uint8 = 0x1
	FramePriority     uint8 = 0x2
	FrameRSTStream    uint8 = 0x3
	FrameSettings     uint8 = 0x4
	FramePushPromise  uint8 = 0x5
	FramePing         uint8 = 0x6
	FrameGoAway       uint8 = 0x7
	FrameWindowUpdate uint8 = 0x8
	FrameContinuation uint8 = 0x9
)

// Frame flags.
const (
	FlagEndStream  uint8 = 0x1
	FlagAck        uint8 = 0x1
	FlagEndHeaders uint8 = 0x4
	FlagPadded     uint8 = 0x8
	FlagPriority   uint8 = 0x20
)

const (
	// FrameHeaderBytes is the size of a frame header.
	FrameHeaderBytes = 9
	// MaxHeaderBlockBytes bounds a header block (HEADERS or PUSH_PROMISE and its
	// CONTINUATIONs) kept for decoding; a larger one is not decoded, and the HPACK
	// state of its direction is lost.
	MaxHeaderBlockBytes = 1 << 20
	// MaxStreams bounds the streams kept; later ones are counted, not stored.
	MaxStreams = 1 << 16
	// maxFieldBytes bounds a header value kept in a Stream.
	maxFieldBytes = 2048
	// maxSpans bounds the spans kept per stream; past it the last span grows to
	// cover the rest.
	maxSpans = 4096
	// settingHeaderTableSize is SETTINGS_HEADER_TABLE_SIZE.
	settingHeaderTableSize = 0x1
	// defaultHeaderTableSize is HPACK's initial dynamic table size.
	defaultHeaderTableSize = 4096
)

// Reasons a Stream is incomplete.
const (
	ReasonHeadersNotCaptured = "a header block of this direction was not captured whole, so HPACK's table is unknown from there on"
	ReasonHeadersUndecodable = "a header block of this direction did not decode, so HPACK's table is unknown from there on"
	ReasonFramingLost        = "HTTP/2 frame framing was lost (bytes not captured or not decrypted)"
	ReasonEnded              = "the connection ended before the stream did"
	ReasonReset              = "the stream was reset"
)

// Span is a range of stream offsets, [Start, End).
type Span struct{ Start, End int64 }

// Stream is one request and its response.
type Stream struct {
	ID uint32
	// Pushed reports a stream the server promised (PUSH_PROMISE): its request
	// fields come from the promise, in the server's stream.
	Pushed bool
	// Request fields; "" when not sent or not decoded.
	Method, Scheme, Authority, Path string
	// Response fields: the final (non-1xx) status, 0 if not seen; the
	// Content-Type; Content-Length, -1 if absent or not decoded.
	Status        int
	ContentType   string
	ContentLength int64
	// InterimResponses counts 1xx responses before the final one.
	InterimResponses int

	// RequestOffset is the offset of the frame that opened the stream: the
	// client's HEADERS, or for a pushed stream the server's PUSH_PROMISE; -1 if
	// not seen. RequestEnd is the end of the client's frame with END_STREAM, -1 if
	// not seen.
	RequestOffset, RequestEnd int64
	// RequestBodyBytes counts the client's DATA payload bytes, padding excluded.
	RequestBodyBytes int64
	// ResponseOffset is the offset of the first byte of the server's first frame
	// on the stream (HEADERS, or DATA), -1 if none; ResponseEnd the end of its last
	// frame seen.
	ResponseOffset, ResponseEnd int64
	// ResponseEndStream reports that the server ended the stream (END_STREAM).
	ResponseEndStream bool
	// ResponseHeaderBytes counts the server's HEADERS and CONTINUATION frames on
	// the stream, frame headers included; ResponseDataBytes its DATA frames,
	// frame headers and padding included; ResponseBodyBytes the DATA payload
	// without padding (the body as sent, possibly content-coded).
	ResponseHeaderBytes, ResponseDataBytes, ResponseBodyBytes int64
	// ResponseSpans are the server-stream ranges of the stream's frames, adjacent
	// ones merged.
	ResponseSpans []Span

	// Reset reports a RST_STREAM; ResetBy says who sent it, ResetCode its code.
	Reset     bool
	ResetBy   flow.Dir
	ResetCode uint32
	// Incomplete reports that the stream's request or response is not whole:
	// fields not decoded, or frames not seen; IncompleteReason says why.
	Incomplete       bool
	IncompleteReason string
}

// Setting is one SETTINGS parameter.
type Setting struct {
	ID    uint16
	Value uint32
}

// DirInfo is what one direction's connection-level frames said.
type DirInfo struct {
	// Settings lists the first non-ACK SETTINGS frame's parameters, in order.
	Settings []Setting
	// WindowUpdates counts WINDOW_UPDATE frames on stream 0 and the increments.
	WindowUpdates         int
	WindowIncrementsBytes int64
	// Pings counts PING frames (ACKs included).
	Pings int
	// GoAway reports a GOAWAY frame; its last stream id and error code.
	GoAway             bool
	GoAwayLastStreamID uint32
	GoAwayCode         uint32
	// Frames counts frames by type (types above 9 in FramesOther).
	Frames      [10]int64
	FramesOther int64
	// LostAt is the stream offset where framing was lost, -1 if never;
	// LostReason says why.
	LostAt     int64
	LostReason string
}

type framing uint8

const (
	framingPreface framing = iota // the client's preface
	framingHeader
	framingPayload
	framingLost
	framingNotHTTP2
	framingClosed
)

// reader follows one direction's frames.
type reader struct {
	dir     flow.Dir
	next    int64
	framing framing
	preface int // preface bytes matched

	header      [FrameHeaderBytes]byte
	headerN     int
	frameOffset int64
	frameType   uint8
	flags       uint8
	streamID    uint32
	length      int
	left        int
	payload     []byte // kept payload (not for DATA)
	keep        bool
	whole       bool // every payload byte captured
	padByte     int  // DATA: the pad length byte, -1 until read

	// Header block in progress (HEADERS or PUSH_PROMISE, then CONTINUATION).
	blockStream   uint32 // stream whose frames carry the open block
	blockOpen     bool
	blockBytes    int
	responseBlock bool // the open block is a response's (server HEADERS)
	decoder       *hpack.Decoder
	hpackLost     string // why the table is unknown, "" while it is known
	fields        *Stream
	interimStatus bool

	info DirInfo
}

// Conn reads the HTTP/2 frames of one connection. The zero value is not ready:
// use NewConn. A Conn is not safe for concurrent use.
type Conn struct {
	dirs    [2]reader
	streams []*Stream
	byID    map[uint32]*Stream
	count   int64
	decided bool
	isHTTP2 bool
}

// NewConn returns a reader for one connection.
func NewConn() *Conn {
	c := &Conn{byID: make(map[uint32]*Stream)}
	for i := range c.dirs {
		r := &c.dirs[i]
		r.dir = flow.Dir(i)
		r.framing = framingHeader
		r.info.LostAt = -1
		r.decoder = hpack.NewDecoder(defaultHeaderTableSize, nil)
		r.decoder.SetMaxStringLength(MaxHeaderBlockBytes)
		r.decoder.SetEmitFunc(r.emit)
	}
	c.dirs[flow.ToServer].framing = framingPreface
	return c
}

// IsHTTP2 reports whether the client's stream started with the HTTP/2 preface.
func (c *Conn) IsHTTP2() bool { return c.isHTTP2 }

// Decided reports whether the client's first bytes were judged.
func (c *Conn) Decided() bool { return c.decided }

// Streams returns the streams seen, in order of their first frame. The Streams
// are owned by the Conn.
func (c *Conn) Streams() []*Stream { return c.streams }

// StreamCount counts streams, including those past MaxStreams.
func (c *Conn) StreamCount() int64 { return c.count }

// Info returns what a direction's connection-level frames said.
func (c *Conn) Info(dir flow.Dir) DirInfo { return c.dirs[dir].info }

// String summarizes the state for diagnostics.
func (c *Conn) String() string {
	return fmt.Sprintf("http2msg.Conn{streams=%d h2=%t client_next=%d server_next=%d}",
		c.count, c.isHTTP2, c.dirs[0].next, c.dirs[1].next)
}

// Write hands over the next piece of direction dir, in order: offset is the
// stream offset of data[0], length the piece's true length (len(data) <= length;
// the rest was not captured). An offset past the previous piece's end is a hole
// of known size; bytes already handed over are ignored.
func (c *Conn) Write(dir flow.Dir, offset int64, data []byte, length int) {
	if length < len(data) {
		length = len(data)
	}
	if offset < 0 || length == 0 || dir > flow.ToClient {
		return
	}
	r := &c.dirs[dir]
	gap, data, end, ok := inorder.Past(r.next, offset, data, length)
	if !ok {
		return
	}
	if gap > 0 {
		c.skip(r, gap)
	}
	c.consume(r, data)
	if uncaptured := end - r.next; uncaptured > 0 {
		c.skip(r, uncaptured)
	}
}

// Lose tells the reader that an unknown number of bytes of dir is missing at its
// current offset (a TLS record that was not decrypted and whose plaintext length
// is unknown): framing is lost from there on.
func (c *Conn) Lose(dir flow.Dir, reason string) {
	if dir > flow.ToClient {
		return
	}
	r := &c.dirs[dir]
	switch r.framing {
	case framingLost, framingNotHTTP2, framingClosed:
		return
	}
	c.lose(r, r.next, reason)
}

// Close ends both directions: streams still open are marked incomplete.
func (c *Conn) Close() {
	for i := range c.dirs {
		c.dirs[i].framing = framingClosed
	}
	for _, s := range c.streams {
		if !s.ResponseEndStream && !s.Reset {
			markIncomplete(s, ReasonEnded)
		}
	}
}

func markIncomplete(s *Stream, reason string) {
	if s.Incomplete {
		return
	}
	s.Incomplete = true
	s.IncompleteReason = reason
}

// lose gives up a direction's framing at offset.
func (c *Conn) lose(r *reader, offset int64, reason string) {
	r.framing = framingLost
	if r.info.LostAt < 0 {
		r.info.LostAt = offset
		r.info.LostReason = reason
	}
	if r.blockOpen {
		c.breakHPACK(r, ReasonHeadersNotCaptured)
	}
	// Streams this direction had not finished cannot be followed further.
	for _, s := range c.streams {
		if r.dir == flow.ToClient && !s.ResponseEndStream && !s.Reset {
			markIncomplete(s, ReasonFramingLost)
		}
		if r.dir == flow.ToServer && s.RequestEnd < 0 && !s.Pushed && !s.Reset {
			markIncomplete(s, ReasonFramingLost)
		}
	}
}

// breakHPACK records that r's HPACK table is unknown from now on.
func (c *Conn) breakHPACK(r *reader, reason string) {
	if r.fields != nil {
		markIncomplete(r.fields, reason)
	}
	r.blockOpen = false
	r.fields = nil
	if r.hpackLost == "" {
		r.hpackLost = reason
	}
}

// consume reads captured bytes starting at r.next.
func (c *Conn) consume(r *reader, data []byte) {
	for len(data) > 0 {
		switch r.framing {
		case framingPreface:
			n := min(len(ClientPreface)-r.preface, len(data))
			if string(data[:n]) != ClientPreface[r.preface:r.preface+n] {
				c.decided = true
				r.framing = framingNotHTTP2
				return
			}
			r.preface += n
			r.next += int64(n)
			data = data[n:]
			if r.preface == len(ClientPreface) {
				c.decided, c.isHTTP2 = true, true
				r.framing = framingHeader
			}
		case framingHeader:
			if r.headerN == 0 {
				r.frameOffset = r.next
			}
			n := copy(r.header[r.headerN:], data)
			r.headerN += n
			r.next += int64(n)
			data = data[n:]
			if r.headerN == FrameHeaderBytes {
				r.headerN = 0
				c.startFrame(r)
			}
		case framingPayload:
			n := min(r.left, len(data))
			c.payload(r, data[:n])
			r.next += int64(n)
			r.left -= n
			data = data[n:]
			if r.left == 0 {
				c.endFrame(r)
			}
		default:
			r.next += int64(len(data))
			return
		}
	}
}

// skip accounts for n bytes that were not captured.
func (c *Conn) skip(r *reader, n int64) {
	for n > 0 {
		switch r.framing {
		case framingPreface:
			// The preface was not captured: nothing says this is HTTP/2.
			c.decided = true
			r.framing = framingNotHTTP2
		case framingHeader:
			offset := r.next
			if r.headerN > 0 {
				offset = r.frameOffset
			}
			c.lose(r, offset, "a frame header was not captured")
		case framingPayload:
			step := int(min(int64(r.left), n))
			r.whole = false
			if r.frameType == FrameData && r.padByte < 0 && r.flags&FlagPadded != 0 {
				// The pad length byte itself was not captured: the body size is
				// unknown, but the framing is not.
				r.padByte = -2
			}
			r.next += int64(step)
			r.left -= step
			n -= int64(step)
			if r.left == 0 {
				c.endFrame(r)
			}
		default:
			r.next += n
			return
		}
	}
}

// startFrame reads a complete frame header.
func (c *Conn) startFrame(r *reader) {
	h := r.header[:]
	r.length = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	r.frameType = h[3]
	r.flags = h[4]
	r.streamID = binary.BigEndian.Uint32(h[5:9]) & 0x7fffffff
	r.left = r.length
	r.whole = true
	r.padByte = -1
	r.payload = r.payload[:0]
	r.keep = r.frameType != FrameData && r.length <= MaxHeaderBlockBytes
	if r.frameType < 10 {
		r.info.Frames[r.frameType]++
	} else {
		r.info.FramesOther++
	}
	if r.blockOpen && r.frameType != FrameContinuation {
		// A header block must be followed by its CONTINUATIONs only.
		c.breakHPACK(r, ReasonHeadersUndecodable)
	}
	r.framing = framingPayload
	if r.left == 0 {
		c.endFrame(r)
	}
}

// payload reads captured payload bytes of the current frame.
func (c *Conn) payload(r *reader, data []byte) {
	if r.frameType == FrameData {
		if r.padByte == -1 && r.flags&FlagPadded != 0 && len(data) > 0 && r.left == r.length {
			r.padByte = int(data[0])
		}
		return
	}
	if r.keep && r.whole {
		r.payload = append(r.payload, data...)
	}
}

// stream returns the stream with id, creating it when first seen.
func (c *Conn) stream(id uint32) *Stream {
	if s := c.byID[id]; s != nil {
		return s
	}
	c.count++
	s := &Stream{ID: id, ContentLength: -1, RequestOffset: -1, RequestEnd: -1, ResponseOffset: -1, ResponseEnd: -1}
	if len(c.streams) < MaxStreams {
		c.streams = append(c.streams, s)
		c.byID[id] = s
	}
	return s
}

// noteResponseFrame adds one of the server's frames to its stream's response.
func noteResponseFrame(s *Stream, start, end int64) {
	if s.ResponseOffset < 0 {
		s.ResponseOffset = start
	}
	s.ResponseEnd = end
	if n := len(s.ResponseSpans); n > 0 && (s.ResponseSpans[n-1].End == start || n == maxSpans) {
		s.ResponseSpans[n-1].End = end
		return
	}
	s.ResponseSpans = append(s.ResponseSpans, Span{start, end})
}

// endFrame acts on a complete frame.
func (c *Conn) endFrame(r *reader) {
	r.framing = framingHeader
	frameEnd := r.next
	frameBytes := int64(FrameHeaderBytes + r.length)
	p := r.payload
	switch r.frameType {
	case FrameData:
		if r.streamID == 0 {
			return
		}
		s := c.stream(r.streamID)
		body := int64(r.length)
		if r.flags&FlagPadded != 0 {
			switch {
			case r.padByte >= 0 && r.padByte < r.length:
				body -= int64(r.padByte) + 1
			case r.padByte == -2:
				markIncomplete(s, "the pad length of a DATA frame was not captured")
				body = 0
			default:
				body = 0
			}
		}
		if r.dir == flow.ToServer {
			s.RequestBodyBytes += body
			if r.flags&FlagEndStream != 0 {
				s.RequestEnd = frameEnd
			}
			return
		}
		noteResponseFrame(s, r.frameOffset, frameEnd)
		s.ResponseDataBytes += frameBytes
		s.ResponseBodyBytes += body
		if r.flags&FlagEndStream != 0 {
			s.ResponseEndStream = true
		}
	case FrameHeaders, FramePushPromise:
		c.headers(r, p, frameEnd, frameBytes)
	case FrameContinuation:
		if r.dir == flow.ToClient && r.streamID != 0 {
			s := c.stream(r.streamID)
			noteResponseFrame(s, r.frameOffset, frameEnd)
			s.ResponseHeaderBytes += frameBytes
		}
		if !r.blockOpen || r.streamID != r.blockStream {
			return
		}
		c.fragment(r, p, r.flags&FlagEndHeaders != 0)
	case FrameRSTStream:
		if r.streamID == 0 {
			return
		}
		s := c.stream(r.streamID)
		s.Reset, s.ResetBy = true, r.dir
		if r.whole && len(p) >= 4 {
			s.ResetCode = binary.BigEndian.Uint32(p)
		}
		if r.dir == flow.ToClient {
			noteResponseFrame(s, r.frameOffset, frameEnd)
		}
		if !s.ResponseEndStream {
			markIncomplete(s, ReasonReset)
		}
	case FrameSettings:
		if r.flags&FlagAck != 0 || !r.whole {
			return
		}
		first := r.info.Settings == nil
		for len(p) >= 6 {
			setting := Setting{ID: binary.BigEndian.Uint16(p), Value: binary.BigEndian.Uint32(p[2:])}
			p = p[6:]
			if first {
				r.info.Settings = append(r.info.Settings, setting)
			}
			if setting.ID == settingHeaderTableSize {
				// This side's decoder limit bounds the peer's encoder table.
				c.dirs[1-r.dir].decoder.SetAllowedMaxDynamicTableSize(setting.Value)
			}
		}
		if first && r.info.Settings == nil {
			r.info.Settings = []Setting{}
		}
	case FrameWindowUpdate:
		if r.streamID == 0 {
			r.info.WindowUpdates++
			if r.whole && len(p) >= 4 {
				r.info.WindowIncrementsBytes += int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
			}
		}
	case FramePing:
		r.info.Pings++
	case FrameGoAway:
		r.info.GoAway = true
		if r.whole && len(p) >= 8 {
			r.info.GoAwayLastStreamID = binary.BigEndian.Uint32(p) & 0x7fffffff
			r.info.GoAwayCode = binary.BigEndian.Uint32(p[4:])
		}
	}
}

// headers starts a header block: HEADERS or PUSH_PROMISE.
func (c *Conn) headers(r *reader, p []byte, frameEnd int64, frameBytes int64) {
	if r.streamID == 0 {
		return
	}
	s := c.stream(r.streamID)
	target := s
	if r.frameType == FrameHeaders {
		if r.dir == flow.ToServer {
			if s.RequestOffset < 0 {
				s.RequestOffset = r.frameOffset
			}
			if r.flags&FlagEndStream != 0 {
				s.RequestEnd = frameEnd
			}
		} else {
			noteResponseFrame(s, r.frameOffset, frameEnd)
			s.ResponseHeaderBytes += frameBytes
			if r.flags&FlagEndStream != 0 {
				s.ResponseEndStream = true
			}
		}
	} else if r.dir == flow.ToClient {
		noteResponseFrame(s, r.frameOffset, frameEnd)
		s.ResponseHeaderBytes += frameBytes
	}

	r.blockStream = r.streamID
	r.blockOpen = true
	r.responseBlock = r.dir == flow.ToClient && r.frameType == FrameHeaders
	r.blockBytes = 0
	r.interimStatus = false
	if !r.whole {
		if r.frameType == FramePushPromise && r.dir == flow.ToClient {
			// The promised stream id may be lost too: only this stream is known.
			markIncomplete(s, ReasonHeadersNotCaptured)
		}
		c.breakHPACK(r, ReasonHeadersNotCaptured)
		markIncomplete(target, ReasonHeadersNotCaptured)
		return
	}
	// Strip padding and priority.
	padding := 0
	if r.flags&FlagPadded != 0 {
		if len(p) < 1 {
			c.breakHPACK(r, ReasonHeadersUndecodable)
			return
		}
		padding = int(p[0])
		p = p[1:]
	}
	if r.frameType == FramePushPromise {
		if len(p) < 4 {
			c.breakHPACK(r, ReasonHeadersUndecodable)
			return
		}
		promised := binary.BigEndian.Uint32(p) & 0x7fffffff
		p = p[4:]
		target = c.stream(promised)
		target.Pushed = true
		target.RequestOffset = r.frameOffset
		target.RequestEnd = frameEnd
	} else if r.flags&FlagPriority != 0 {
		if len(p) < 5 {
			c.breakHPACK(r, ReasonHeadersUndecodable)
			return
		}
		p = p[5:]
	}
	if padding > len(p) {
		c.breakHPACK(r, ReasonHeadersUndecodable)
		return
	}
	p = p[:len(p)-padding]
	r.fields = target
	if r.hpackLost != "" {
		markIncomplete(target, r.hpackLost)
		r.fields = nil
	}
	c.fragment(r, p, r.flags&FlagEndHeaders != 0)
}

// fragment decodes one fragment of the open header block.
func (c *Conn) fragment(r *reader, fragment []byte, endHeaders bool) {
	if !r.whole {
		c.breakHPACK(r, ReasonHeadersNotCaptured)
		return
	}
	r.blockBytes += len(fragment)
	if r.blockBytes > MaxHeaderBlockBytes {
		c.breakHPACK(r, ReasonHeadersUndecodable)
		return
	}
	if r.hpackLost == "" {
		if _, err := r.decoder.Write(fragment); err != nil {
			c.breakHPACK(r, ReasonHeadersUndecodable)
			return
		}
	}
	if !endHeaders {
		return
	}
	if r.hpackLost == "" {
		if err := r.decoder.Close(); err != nil {
			c.breakHPACK(r, ReasonHeadersUndecodable)
			return
		}
	}
	r.blockOpen = false
	r.fields = nil
}

// emit receives one decoded header field of the open block.
func (r *reader) emit(f hpack.HeaderField) {
	s := r.fields
	if s == nil {
		return
	}
	value := f.Value
	if len(value) > maxFieldBytes {
		value = value[:maxFieldBytes]
	}
	switch f.Name {
	case ":method":
		s.Method = value
	case ":scheme":
		s.Scheme = value
	case ":authority":
		s.Authority = value
	case ":path":
		s.Path = value
	case "host":
		if s.Authority == "" {
			s.Authority = value
		}
	case ":status":
		if !r.responseBlock {
			return
		}
		status, err := strconv.Atoi(value)
		if err != nil {
			return
		}
		if status >= 100 && status < 200 {
			s.InterimResponses++
			r.interimStatus = true
			return
		}
		r.interimStatus = false
		s.Status = status
	case "content-type":
		if r.responseBlock && !r.interimStatus {
			s.ContentType = value
		}
	case "content-length":
		if !r.responseBlock || r.interimStatus {
			return
		}
		if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 {
			s.ContentLength = n
		}
	}
}
