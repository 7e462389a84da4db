// Package httpmsg finds HTTP/1.x message boundaries (start line, end of header,
// end of body) in one direction of a TCP byte stream, and reads the few header
// fields that frame a message: Content-Length, Transfer-Encoding and Connection.
//
// It is built for captures cut by a small snaplen: each piece of the stream comes
// with its true length, uncaptured body bytes are skipped by count, and a boundary
// that falls into uncaptured bytes (a header cut before its blank line, a chunk-size
// line not captured) leaves the message's end unknown rather than guessed. A
// conservative resynchronization at the start of a later segment is marked on the
// message it finds.
//
// It is not an HTTP implementation: it keeps no header values beyond those and the
// Host and Content-Type a report names a request by, decodes no bodies, and knows
// nothing of HTTP/2 or of TLS (see packages http2msg and tlsrec).
package httpmsg

import (
	"bytes"
	"fmt"
	"iter"

	"github.com/slowstart/slowstart/internal/inorder"
)

const (
	// MaxLineBytes bounds a start line or header line. A longer line makes the
	// parser lose sync (or, for the stream's first line, judge it not HTTP).
	MaxLineBytes = 32 << 10
	// MaxStoredMessages bounds the messages a Parser keeps; later ones are parsed
	// and counted (MessageCount) but not stored.
	MaxStoredMessages = 1 << 16
	// MaxTargetBytes bounds the request target kept in a Message.
	MaxTargetBytes = 2048
	// MaxFieldValueBytes bounds the Host and Content-Type values kept in a Message.
	MaxFieldValueBytes = 256
)

// Reasons a Message is incomplete.
const (
	ReasonStartLineNotCaptured = "start line not captured"
	ReasonHeaderNotCaptured    = "header not captured up to its blank line"
	ReasonChunkNotCaptured     = "chunk framing not captured"
	ReasonBadFraming           = "invalid message framing"
	ReasonLineTooLong          = "header line too long"
	ReasonRequestUnknown       = "request method unknown: cannot tell whether the response has a body"
	ReasonEndedInHeader        = "stream ended inside the header"
	ReasonEndedInBody          = "stream ended before the end of the body"
)

// Message is one HTTP/1.x request or response found in the stream.
type Message struct {
	// Offset is the stream offset of the message's first byte.
	Offset int64
	// HeaderEnd is the stream offset just after the header's blank line, -1 if unknown.
	HeaderEnd int64
	// End is the stream offset just after the message's last byte, -1 if unknown.
	// For a Content-Length body it is known from the header on, even when the
	// stream ends before it (then Incomplete is set).
	End int64
	// Method and Target are the request line's. Target may be a captured prefix
	// when the line was cut (then Incomplete is set), and is cut to MaxTargetBytes.
	Method, Target string
	// Version is "HTTP/1.0" or "HTTP/1.1", "" when not captured.
	Version string
	// Status is the response status code, 0 if unknown or for requests.
	Status int
	// Host is a request's Host header, ContentType a message's Content-Type (cut
	// to MaxFieldValueBytes); "" when absent or not captured.
	Host, ContentType string
	// ContentLength is the Content-Length header's value, -1 if absent or unknown.
	ContentLength int64
	// Request is, for a response, the index into the request parser's Messages of
	// the request it answers; -1 when unknown (no request parser, or sync was lost).
	Request int
	// IncompleteReason says what made the message incomplete (Incomplete).
	IncompleteReason string
	// EndInferred reports that End was not framed but taken from the start of the
	// next message found by resynchronization: the message ended there or, if whole
	// messages went uncaptured in between, earlier. Incomplete stays set.
	EndInferred bool
	// Chunked reports Transfer-Encoding: chunked.
	Chunked bool
	// KeepAlive reports that the connection stays open after this message (HTTP/1.1
	// without Connection: close, HTTP/1.0 with Connection: keep-alive).
	KeepAlive bool
	// Close reports a Connection: close header.
	Close bool
	// Incomplete reports that something needed to frame the message was not
	// captured (or not sent); IncompleteReason says what.
	Incomplete bool
	// Resynced reports that the message was found by resynchronization at the start
	// of a segment after sync was lost, not by following the previous message.
	Resynced bool
}

type parseState uint8

const (
	stateStartLine      parseState = iota // before or inside a start line
	stateHeaderLine                       // inside the header
	stateBodyLength                       // inside a Content-Length body
	stateChunkSize                        // inside a chunk-size line
	stateChunkData                        // inside a chunk's data
	stateChunkDataEnd                     // the CRLF after a chunk's data
	stateTrailer                          // trailer lines after the last chunk
	stateBodyUntilClose                   // a response body that ends when the connection closes
	stateLost                             // a boundary fell into uncaptured bytes
	stateSwitched                         // the connection left HTTP/1.x (101, CONNECT)
	stateNotHTTP                          // the stream does not start like HTTP
	stateClosed                           // Close was called
)

// Parser parses one direction of an HTTP/1.x connection. The zero value is not
// ready: use NewRequestParser or NewResponseParser. A Parser is not safe for
// concurrent use.
type Parser struct {
	requests *Parser // for responses: the parser of the other direction, may be nil

	nextOffset int64
	lostAt     int64
	// firstLostAt is the offset where sync was first lost, -1 if never: requests
	// before it keep their true position in the connection.
	firstLostAt int64

	line      []byte // captured bytes of the current line, without the newline
	lineStart int64
	// whole, when not nil, is a complete line found whole in the bytes Write
	// was given (see collectLine), for handleLine to take; an empty line is
	// an empty slice of those bytes, not nil.
	whole []byte

	messages     messageStore
	messageCount int64
	// message is the message in progress (or the last one): the last one
	// stored, changed in place, or past MaxStoredMessages one not stored.
	message     *Message
	unstored    *Message
	bodyLeft    int64 // Content-Length body bytes left
	chunkLeft   int64 // chunk data bytes left
	nextRequest int   // responses: index of the request the next final response answers

	// (The small fields together: a Parser is some 40 bytes smaller.)
	state        parseState
	isRequest    bool
	decided      bool // whether the stream's first start line was judged
	isHTTP       bool
	resyncNext   bool
	lineLong     bool // the line outgrew MaxLineBytes
	inMessage    bool // a message is in progress in message
	keepAliveTok bool // Connection: keep-alive seen
	lengthBad    bool // conflicting or unparsable Content-Length
	otherCoding  bool // a Transfer-Encoding other than a final chunked
	pairingLost  bool // responses: sync was lost, so which request is answered is unknown
	sawHead      bool // requests: a HEAD request was seen
	sawConnect   bool // requests: a CONNECT request was seen
}

// NewRequestParser returns a parser for the client-to-server direction.
func NewRequestParser() *Parser {
	p := new(Parser)
	p.InitRequest()
	return p
}

// InitRequest makes p a new request parser, as NewRequestParser does, in place.
func (p *Parser) InitRequest() {
	*p = Parser{isRequest: true, lostAt: -1, firstLostAt: -1}
}

// NewResponseParser returns a parser for the server-to-client direction. requests,
// the parser of the other direction (nil if there is none), tells which responses
// answer HEAD or CONNECT requests; it should be fed in capture order alongside.
// A response sees its request's method once the request's start line is
// whole. When the request a response answers is unknown (not captured, not
// whole yet, or either side lost sync before it), the response is taken to
// answer neither HEAD nor CONNECT, unless the request stream showed such
// requests (or shows one in a start line not yet whole): then its body cannot
// be framed and the response is marked incomplete, and after a 2xx without a
// body that may answer a CONNECT, sync is given up (a tunnel may follow).
func NewResponseParser(requests *Parser) *Parser {
	p := new(Parser)
	p.InitResponse(requests)
	return p
}

// InitResponse makes p a new response parser, as NewResponseParser does, in
// place.
func (p *Parser) InitResponse(requests *Parser) {
	*p = Parser{requests: requests, lostAt: -1, firstLostAt: -1}
}

// IsHTTP reports whether an HTTP/1.x start line was found in the stream.
func (p *Parser) IsHTTP() bool { return p.isHTTP }

// Synced reports whether the parser currently knows where the next message starts
// or the current one ends.
func (p *Parser) Synced() bool { return p.state != stateLost && p.state != stateNotHTTP }

// LostAt is the stream offset where sync was most recently lost, -1 if never.
func (p *Parser) LostAt() int64 { return p.lostAt }

// Messages returns the messages found so far, in stream order; the last one may
// still be in progress. The slice is the caller's (MessagesFrom and Message read
// them without making one).
func (p *Parser) Messages() []Message { return p.messages.All() }

// AppendMessages appends the messages Messages returns to dst (a slice the
// caller reuses) and returns the extended slice.
func (p *Parser) AppendMessages(dst []Message) []Message { return p.messages.AppendAll(dst) }

// Count is the number of messages Messages returns.
func (p *Parser) Count() int { return p.messages.Len() }

// Message returns message i (0 <= i < Count) of Messages. The last one is at
// hand; another is read from where the messages are kept, after at most 15 of
// those before it.
func (p *Parser) Message(i int) Message { return p.messages.At(i) }

// MessageEnd is message i's End (see Message), read without copying the
// message when it is the last one.
func (p *Parser) MessageEnd(i int) int64 {
	if last := p.messages.Last(); last != nil && i == p.messages.Len()-1 {
		return last.End
	}
	return p.messages.At(i).End
}

// MessagesFrom yields the messages of Messages from index i on, with their
// indexes, in order.
func (p *Parser) MessagesFrom(i int) iter.Seq2[int, Message] { return p.messages.From(i) }

// MessageCount is the number of messages found, including those past
// MaxStoredMessages.
func (p *Parser) MessageCount() int64 { return p.messageCount }

// String summarizes the parser's state for diagnostics.
func (p *Parser) String() string {
	return fmt.Sprintf("httpmsg.Parser{request=%t messages=%d next=%d synced=%t lost_at=%d http=%t}",
		p.isRequest, p.messageCount, p.nextOffset, p.Synced(), p.lostAt, p.isHTTP)
}

// Write hands over the next piece of the stream, in order. offset is the stream
// offset of data[0] (bytes since the first byte of the direction's stream, 0-based);
// length is the segment's true payload length; len(data) <= length (the rest was not
// captured). Pieces arrive in increasing offset order without overlap; offset may be
// larger than the end of the previous piece (bytes missing from the capture: a hole).
// Bytes that overlap what was already handed over are ignored.
func (p *Parser) Write(offset int64, data []byte, length int) {
	if length < len(data) {
		length = len(data)
	}
	if offset < 0 || length == 0 {
		return
	}
	switch p.state {
	case stateNotHTTP, stateSwitched, stateClosed:
		return
	}
	gap, data, end, ok := inorder.Past(p.nextOffset, offset, data, length)
	if !ok {
		return
	}
	if gap > 0 {
		p.skip(gap)
	}
	if p.state == stateLost {
		p.tryResync(data)
	}
	p.consume(data)
	if uncaptured := end - p.nextOffset; uncaptured > 0 {
		p.skip(uncaptured)
	}
}

// Close tells the parser the stream ended (FIN, RST or the end of the capture).
// A body that runs until the connection closes ends here; a message still in
// progress is marked incomplete.
func (p *Parser) Close() {
	switch p.state {
	case stateBodyUntilClose:
		p.message.End = p.nextOffset
		p.finishMessage()
	case stateStartLine:
		if (p.decided || p.recognizedPartialStartLine()) && len(p.line) > 0 {
			p.beginMessage(p.lineStart)
			p.parseStartLine(p.line, true)
			p.markIncomplete(ReasonEndedInHeader)
		}
	case stateHeaderLine:
		p.markIncomplete(ReasonEndedInHeader)
	case stateBodyLength, stateChunkSize, stateChunkData, stateChunkDataEnd, stateTrailer:
		p.markIncomplete(ReasonEndedInBody)
	}
	p.state = stateClosed
}

// recognizedPartialStartLine reports whether the captured prefix of a start line
// shows enough to tell the stream is HTTP: "HTTP/1.x" for a response, a common
// method and a space for a request.
func (p *Parser) recognizedPartialStartLine() bool {
	var partial Message
	return recognizeStartLine(p.line, p.isRequest, &partial) && (!p.isRequest || knownMethod(partial.Method))
}

// consume parses captured bytes starting at p.nextOffset.
func (p *Parser) consume(data []byte) {
	for len(data) > 0 {
		switch p.state {
		case stateStartLine, stateHeaderLine, stateChunkSize, stateChunkDataEnd, stateTrailer:
			n, complete := p.collectLine(data)
			data = data[n:]
			p.nextOffset += int64(n)
			switch {
			case p.lineLong:
				p.lineTooLong()
			case complete:
				p.handleLine()
			}
		case stateBodyLength:
			n := int(min(p.bodyLeft, int64(len(data))))
			data = data[n:]
			p.nextOffset += int64(n)
			p.bodyLeft -= int64(n)
			if p.bodyLeft == 0 {
				p.finishMessage()
			}
		case stateChunkData:
			n := int(min(p.chunkLeft, int64(len(data))))
			data = data[n:]
			p.nextOffset += int64(n)
			p.chunkLeft -= int64(n)
			if p.chunkLeft == 0 {
				p.state = stateChunkDataEnd
			}
		default: // body until close, lost, switched, not HTTP
			p.nextOffset += int64(len(data))
			return
		}
	}
}

// collectLine adds data up to and including the next newline to the current line.
// It returns the bytes used and whether the line is complete.
func (p *Parser) collectLine(data []byte) (used int, complete bool) {
	newline := bytes.IndexByte(data, '\n')
	if len(p.line) == 0 && !p.lineLong {
		p.lineStart = p.nextOffset
		if newline >= 0 && newline <= MaxLineBytes && (p.state != stateStartLine || p.decided) {
			// The whole line is in data: handleLine reads it there, not from a
			// copy in p.line (whose buffer, apart from the connection's other
			// state, was a cache miss at each line of a keep-alive
			// connection among thousands).
			p.whole = data[:newline] // not nil: data holds the newline
			return newline + 1, true
		}
	}
	chunk := data
	if newline >= 0 {
		chunk = data[:newline]
	}
	if room := MaxLineBytes - len(p.line); len(chunk) > room {
		p.line = append(p.line, chunk[:room]...)
		p.lineLong = true
	} else {
		p.line = append(p.line, chunk...)
	}
	if p.state == stateStartLine && !p.decided && !plausibleStartPrefix(p.line, p.isRequest) {
		p.decided = true
		p.state = stateNotHTTP
		return len(data), false
	}
	if newline < 0 {
		return len(data), false
	}
	return newline + 1, true
}

// takeLine returns the complete line without its CR and resets the buffer; the
// returned slice is valid until the next line is collected.
func (p *Parser) takeLine() (line []byte) {
	line = p.line
	if p.whole != nil {
		line, p.whole = p.whole, nil
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	p.line = p.line[:0]
	p.lineLong = false
	return line
}

func (p *Parser) lineTooLong() {
	if p.state == stateStartLine && !p.decided {
		p.decided = true
		p.state = stateNotHTTP
		return
	}
	if p.state == stateStartLine {
		p.beginMessage(p.lineStart)
		p.parseStartLine(p.line, true)
	}
	p.lose(p.lineStart, ReasonLineTooLong)
}

// handleLine acts on a complete line in the current state.
func (p *Parser) handleLine() {
	line := p.takeLine()
	switch p.state {
	case stateStartLine:
		if len(line) == 0 {
			return // empty lines between messages are tolerated
		}
		var parsed Message
		target, ok := startLine(line, p.isRequest, false, &parsed)
		if !ok {
			if !p.decided {
				p.decided = true
				p.state = stateNotHTTP
				return
			}
			p.beginMessage(p.lineStart)
			p.parseStartLine(line, true)
			p.lose(p.lineStart, ReasonBadFraming)
			return
		}
		p.beginMessage(p.lineStart)
		p.message.Method = parsed.Method
		if target != nil {
			p.message.Target = p.messages.intern(target)
		}
		p.message.Version, p.message.Status = parsed.Version, parsed.Status
		p.sawMethod(parsed.Method)
		p.decided = true
		p.isHTTP = true
		p.state = stateHeaderLine
	case stateHeaderLine:
		if len(line) == 0 {
			p.message.HeaderEnd = p.nextOffset
			p.endHeader()
			return
		}
		p.headerField(line)
	case stateChunkSize:
		size, ok := parseChunkSize(line)
		switch {
		case !ok:
			p.lose(p.lineStart, ReasonBadFraming)
		case size == 0:
			p.state = stateTrailer
		default:
			p.chunkLeft = size
			p.state = stateChunkData
		}
	case stateChunkDataEnd:
		if len(line) != 0 {
			p.lose(p.lineStart, ReasonBadFraming)
			return
		}
		p.state = stateChunkSize
	case stateTrailer:
		if len(line) == 0 {
			p.message.End = p.nextOffset
			p.finishMessage()
		}
	}
}

// skip accounts for n stream bytes that were not captured.
func (p *Parser) skip(n int64) {
	for n > 0 {
		switch p.state {
		case stateStartLine:
			if len(p.line) == 0 && !p.lineLong {
				if !p.decided {
					// The stream's first bytes are missing: nothing says a message
					// starts here, nor that this is HTTP at all.
					p.lose(p.nextOffset, "")
					continue
				}
				// A message follows, from here on: where it ended, as a
				// request's empty lines before its start line are not
				// seen (those captured are skipped).
				p.beginMessage(p.nextOffset)
				p.lose(p.nextOffset, ReasonStartLineNotCaptured)
				continue
			}
			// A start line cut by the capture: keep what it shows, if it shows
			// enough to tell this is HTTP.
			if !p.recognizedPartialStartLine() && !p.decided {
				p.lose(p.lineStart, "")
				continue
			}
			p.decided = true
			p.isHTTP = true
			p.beginMessage(p.lineStart)
			p.parseStartLine(p.line, true)
			p.lose(p.lineStart, ReasonStartLineNotCaptured)
		case stateHeaderLine:
			p.lose(p.nextOffset, ReasonHeaderNotCaptured)
		case stateChunkSize, stateChunkDataEnd, stateTrailer:
			p.lose(p.nextOffset, ReasonChunkNotCaptured)
		case stateBodyLength:
			step := min(p.bodyLeft, n)
			p.nextOffset += step
			n -= step
			p.bodyLeft -= step
			if p.bodyLeft == 0 {
				p.finishMessage()
			}
		case stateChunkData:
			step := min(p.chunkLeft, n)
			p.nextOffset += step
			n -= step
			p.chunkLeft -= step
			if p.chunkLeft == 0 {
				p.state = stateChunkDataEnd
			}
		default:
			p.nextOffset += n
			return
		}
	}
}

// lose gives up sync at offset; the message in progress (if any) gets reason.
func (p *Parser) lose(offset int64, reason string) {
	if p.inMessage {
		p.markIncomplete(reason)
		p.message.End = -1
	}
	p.inMessage = false
	p.line = p.line[:0]
	p.lineLong = false
	p.state = stateLost
	p.lostAt = offset
	if p.firstLostAt < 0 {
		p.firstLostAt = offset
	}
	p.pairingLost = true
}

func (p *Parser) markIncomplete(reason string) {
	if reason == "" || p.message.Incomplete {
		return
	}
	p.message.Incomplete = true
	p.message.IncompleteReason = reason
}

// beginMessage starts a new message at offset and stores it.
func (p *Parser) beginMessage(offset int64) {
	m := Message{Offset: offset, HeaderEnd: -1, End: -1, ContentLength: -1, Request: -1, Resynced: p.resyncNext}
	p.inMessage = true
	p.resyncNext = false
	p.keepAliveTok = false
	p.lengthBad = false
	p.otherCoding = false
	if !p.isRequest {
		m.Request, _ = p.answeredRequest()
	}
	p.messageCount++
	if p.messages.Len() < MaxStoredMessages {
		// Stored at once, and parsed in place: the store's last message
		// is the message in progress (Append encodes the one before).
		p.messages.Append(m)
		p.message = p.messages.Last()
		return
	}
	if p.unstored == nil {
		p.unstored = new(Message)
	}
	*p.unstored = m
	p.message = p.unstored
}

// finishMessage ends the message in progress at p.nextOffset (unless End is known).
func (p *Parser) finishMessage() {
	if p.message.End < 0 {
		p.message.End = p.nextOffset
	}
	p.inMessage = false
	p.state = stateStartLine
}
