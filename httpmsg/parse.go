package httpmsg

import (
	"bytes"
	"strings"
)

const (
	version10 = "HTTP/1.0"
	version11 = "HTTP/1.1"
	// maxMethodBytes bounds a request method token.
	maxMethodBytes = 20
	// prefixCheckBytes is how much of a stream's first line is checked as it
	// arrives, to give up early on bytes that are not HTTP.
	prefixCheckBytes = 32
)

func isTokenByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// methodName returns a static string for common methods so parsing them does
// not allocate.
func methodName(method []byte) string {
	switch string(method) {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "OPTIONS":
		return "OPTIONS"
	case "PATCH":
		return "PATCH"
	case "CONNECT":
		return "CONNECT"
	case "TRACE":
		return "TRACE"
	}
	return string(method)
}

func knownMethod(method string) bool {
	switch method {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE":
		return true
	}
	return false
}

func versionName(version []byte) string {
	switch string(version) {
	case version10:
		return version10
	case version11:
		return version11
	}
	return ""
}

// plausibleStartPrefix reports whether the first bytes of a stream's first line
// could begin an HTTP/1.x start line.
func plausibleStartPrefix(line []byte, isRequest bool) bool {
	if len(line) == 1 && line[0] == '\r' {
		return true // an empty line, tolerated before a message
	}
	line = line[:min(len(line), prefixCheckBytes)]
	if !isRequest {
		const prefix = "HTTP/1."
		n := min(len(line), len(prefix))
		if string(line[:n]) != prefix[:n] {
			return false
		}
		for i := len(prefix); i < len(line) && i < len(prefix)+5; i++ {
			switch i {
			case 7, 9, 10, 11:
				if !isDigit(line[i]) {
					return false
				}
			case 8:
				if line[i] != ' ' {
					return false
				}
			}
		}
		return true
	}
	space := bytes.IndexByte(line, ' ')
	method := line
	if space >= 0 {
		method = line[:space]
	}
	if space == 0 || len(method) > maxMethodBytes {
		return false
	}
	for _, b := range method {
		if !isTokenByte(b) {
			return false
		}
	}
	if space >= 0 {
		for _, b := range line[space+1:] {
			if b < 0x20 && b != '\r' || b == 0x7f {
				return false
			}
		}
	}
	return true
}

// parseStartLine reads a start line into the message in progress. With partial
// set the line is a prefix cut by the capture and what it shows is kept.
func (p *Parser) parseStartLine(line []byte, partial bool) bool {
	target, ok := startLine(line, p.isRequest, partial, p.message)
	if target != nil {
		p.message.Target = p.messages.intern(target)
	}
	p.sawMethod(p.message.Method)
	return ok
}

// sawMethod notes a request's method: responses to HEAD and CONNECT are
// framed apart from the others.
func (p *Parser) sawMethod(method string) {
	switch method {
	case "HEAD":
		p.sawHead = true
	case "CONNECT":
		p.sawConnect = true
	}
}

// recognizeStartLine reports whether a line cut by the capture shows enough to
// tell it starts an HTTP/1.x message (a method and a space, or "HTTP/1.x").
func recognizeStartLine(line []byte, isRequest bool, message *Message) bool {
	startLine(line, isRequest, true, message)
	return message.Method != "" || message.Version != ""
}

// startLine reads a request line (METHOD SP target SP HTTP/1.x) or a status
// line (HTTP/1.x SP 3DIGIT [SP reason]) into message, all but the target,
// which it returns as the line's bytes (non-nil when the line shows one,
// though it may be empty) for the caller to keep as a string or only to look
// at: a keep-alive connection's requests name a few targets again and again,
// and a string made for each was most of what parsing them allocated. With
// partial set it keeps whatever fields the prefix shows and reports whether
// the prefix is consistent.
func startLine(line []byte, isRequest, partial bool, message *Message) (target []byte, ok bool) {
	if !isRequest {
		if len(line) < 8 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || !isDigit(line[7]) {
			return nil, partial && plausibleStartPrefix(line, false)
		}
		message.Version = versionName(line[:8])
		if len(line) < 12 || line[8] != ' ' || !isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) ||
			len(line) > 12 && line[12] != ' ' {
			return nil, partial && plausibleStartPrefix(line, false)
		}
		message.Status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
		return nil, message.Status >= 100
	}

	space := bytes.IndexByte(line, ' ')
	if space <= 0 || space > maxMethodBytes {
		return nil, false
	}
	for _, b := range line[:space] {
		if !isTokenByte(b) {
			return nil, false
		}
	}
	message.Method = methodName(line[:space])
	rest := line[space+1:]
	targetEnd := bytes.IndexByte(rest, ' ')
	if targetEnd < 0 {
		if partial {
			return rest[:min(len(rest), MaxTargetBytes)], true
		}
		return nil, false
	}
	if targetEnd == 0 {
		return nil, false
	}
	target = rest[:min(targetEnd, MaxTargetBytes)]
	version := rest[targetEnd+1:]
	message.Version = versionName(version)
	if message.Version == "" {
		return target, partial && len(version) < len(version11) && bytes.HasPrefix([]byte(version11), version)
	}
	return target, true
}

// trimSpace removes spaces and tabs around a header value.
func trimSpace(value []byte) []byte {
	for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
		value = value[1:]
	}
	for n := len(value); n > 0 && (value[n-1] == ' ' || value[n-1] == '\t'); n-- {
		value = value[:n-1]
	}
	return value
}

// headerField reads one header line of the message in progress.
func (p *Parser) headerField(line []byte) {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
		return // a continuation line or a malformed one: not a framing field
	}
	field := framingField(line[:colon])
	if field == fieldOther {
		return
	}
	value := trimSpace(line[colon+1:])
	switch field {
	case fieldContentLength:
		length, ok := parseContentLength(value)
		switch {
		case !ok:
			p.lengthBad = true
		case p.message.ContentLength >= 0 && p.message.ContentLength != length:
			p.lengthBad = true
		default:
			p.message.ContentLength = length
		}
	case fieldTransferEncoding:
		codings := value
		if comma := bytes.LastIndexByte(codings, ','); comma >= 0 {
			codings = codings[comma+1:]
		}
		last := trimSpace(codings)
		p.message.Chunked = bytes.EqualFold(last, []byte("chunked"))
		p.otherCoding = !p.message.Chunked
	case fieldHost:
		p.message.Host = p.fieldValue(value)
	case fieldContentType:
		p.message.ContentType = p.fieldValue(value)
	case fieldConnection:
		for value := value; len(value) > 0; {
			token := value
			if comma := bytes.IndexByte(value, ','); comma >= 0 {
				token, value = value[:comma], value[comma+1:]
			} else {
				value = nil
			}
			token = trimSpace(token)
			switch {
			case bytes.EqualFold(token, []byte("close")):
				p.message.Close = true
			case bytes.EqualFold(token, []byte("keep-alive")):
				p.keepAliveTok = true
			}
		}
	}
}

// The header fields headerField reads.
const (
	fieldOther = iota
	fieldContentLength
	fieldTransferEncoding
	fieldHost
	fieldContentType
	fieldConnection
)

// framingField tells which of the fields headerField reads name is, or
// fieldOther. Their names differ in length: most fields (Date, Server,
// ETag...) are passed over by their length alone, and a name is compared with
// one of them at most.
func framingField(name []byte) int {
	var want string
	field := fieldOther
	switch len(name) {
	case len("content-length"):
		want, field = "content-length", fieldContentLength
	case len("transfer-encoding"):
		want, field = "transfer-encoding", fieldTransferEncoding
	case len("host"):
		want, field = "host", fieldHost
	case len("content-type"):
		want, field = "content-type", fieldContentType
	case len("connection"):
		want, field = "connection", fieldConnection
	default:
		return fieldOther
	}
	if !bytes.EqualFold(name, []byte(want)) {
		return fieldOther
	}
	return field
}

// fieldValue keeps a header value, cut to MaxFieldValueBytes (a string the
// messages before named, when it is one of them).
func (p *Parser) fieldValue(value []byte) string {
	return p.messages.intern(value[:min(len(value), MaxFieldValueBytes)])
}

// parseContentLength reads a Content-Length value; a list of equal values
// ("12, 12") is accepted as RFC 9110 allows.
func parseContentLength(value []byte) (int64, bool) {
	length := int64(-1)
	for len(value) > 0 {
		item := value
		if comma := bytes.IndexByte(value, ','); comma >= 0 {
			item, value = value[:comma], value[comma+1:]
		} else {
			value = nil
		}
		item = trimSpace(item)
		if len(item) == 0 || len(item) > 18 {
			return 0, false
		}
		var n int64
		for _, b := range item {
			if !isDigit(b) {
				return 0, false
			}
			n = n*10 + int64(b-'0')
		}
		if length >= 0 && n != length {
			return 0, false
		}
		length = n
	}
	return length, length >= 0
}

// parseChunkSize reads a chunk-size line: hex digits, then optional extensions.
func parseChunkSize(line []byte) (int64, bool) {
	var size int64
	digits := 0
	for _, b := range line {
		var digit int64
		switch {
		case isDigit(b):
			digit = int64(b - '0')
		case b >= 'a' && b <= 'f':
			digit = int64(b-'a') + 10
		case b >= 'A' && b <= 'F':
			digit = int64(b-'A') + 10
		case b == ';' || b == ' ' || b == '\t':
			return size, digits > 0
		default:
			return 0, false
		}
		if digits == 15 {
			return 0, false // too large to be real
		}
		size = size<<4 | digit
		digits++
	}
	return size, digits > 0
}

// answeredRequest is, for a response starting now, the index of the request it
// answers in the request parser's messages and that request's method; -1 and ""
// when it cannot be known.
func (p *Parser) answeredRequest() (index int, method string) {
	requests := p.requests
	if requests == nil || p.pairingLost || p.nextRequest >= requests.messages.Len() {
		return -1, ""
	}
	request := requests.messages.At(p.nextRequest)
	if requests.firstLostAt >= 0 && request.Offset > requests.firstLostAt {
		// The request parser lost sync before this request started, so whole
		// requests may have gone unseen: its index may be wrong.
		return -1, ""
	}
	return p.nextRequest, request.Method
}

// pendingMethod is the method of the start line the request parser is
// reading, not yet whole ("" if none shows): a response that comes first
// cannot tell its request, and that one may be it.
func (p *Parser) pendingMethod() string {
	if p.state != stateStartLine || len(p.line) == 0 {
		return ""
	}
	var partial Message
	startLine(p.line, true, true, &partial)
	return partial.Method
}

// endHeader decides how the body of the message in progress is framed.
func (p *Parser) endHeader() {
	message := p.message
	switch message.Version {
	case version11:
		message.KeepAlive = !message.Close
	case version10:
		message.KeepAlive = p.keepAliveTok && !message.Close
	}
	if p.isRequest {
		p.endRequestHeader()
	} else {
		p.endResponseHeader()
	}
}

func (p *Parser) endRequestHeader() {
	message := p.message
	switch {
	case message.Chunked:
		p.state = stateChunkSize
	case p.otherCoding || p.lengthBad:
		p.lose(p.nextOffset, ReasonBadFraming)
	case message.ContentLength > 0:
		p.bodyLeft = message.ContentLength
		message.End = message.HeaderEnd + message.ContentLength
		p.state = stateBodyLength
	default:
		connect := message.Method == "CONNECT"
		p.finishMessage()
		if connect {
			p.state = stateSwitched // a tunnel follows, if the server agrees
		}
	}
}

func (p *Parser) endResponseHeader() {
	message := p.message
	status := message.Status
	if status >= 100 && status < 200 && status != 101 {
		p.finishMessage() // an interim response: the final one follows
		return
	}
	requestIndex, method := p.answeredRequest()
	message.Request = requestIndex
	if !p.pairingLost {
		p.nextRequest++
	}
	// The request unknown, the response may answer a HEAD or CONNECT one
	// (methodUnknown) or a CONNECT one (connectPossible) if the stream showed
	// such requests, or shows one now in a start line not yet whole.
	var methodUnknown, connectPossible bool
	if method == "" && p.requests != nil {
		pending := p.requests.pendingMethod()
		connectPossible = p.requests.sawConnect || pending == "CONNECT"
		methodUnknown = connectPossible || p.requests.sawHead || pending == "HEAD"
	}
	success := status >= 200 && status < 300
	switch {
	case status == 101, method == "CONNECT" && success:
		p.finishMessage()
		p.state = stateSwitched
	case connectPossible && success && (status == 204 || message.ContentLength == 0 && !message.Chunked && !p.otherCoding && !p.lengthBad):
		// No body, whatever the request; but after a CONNECT's a tunnel
		// may follow: sync is given up until a status line shows again.
		p.finishMessage()
		p.lose(p.nextOffset, "")
	case method == "HEAD", status == 204, status == 304:
		p.finishMessage()
	case message.Chunked:
		if methodUnknown {
			p.lose(p.nextOffset, ReasonRequestUnknown)
			return
		}
		p.state = stateChunkSize
	case p.otherCoding:
		if methodUnknown {
			p.lose(p.nextOffset, ReasonRequestUnknown)
			return
		}
		p.state = stateBodyUntilClose
	case p.lengthBad:
		p.lose(p.nextOffset, ReasonBadFraming)
	case message.ContentLength == 0:
		p.finishMessage()
	case message.ContentLength > 0:
		if methodUnknown {
			p.lose(p.nextOffset, ReasonRequestUnknown)
			return
		}
		p.bodyLeft = message.ContentLength
		message.End = message.HeaderEnd + message.ContentLength
		p.state = stateBodyLength
	default:
		if methodUnknown {
			p.lose(p.nextOffset, ReasonRequestUnknown)
			return
		}
		p.state = stateBodyUntilClose
	}
}

// tryResync looks for a start line at the very start of a segment's captured
// bytes after sync was lost: a status line "HTTP/1.x DDD" for responses, a whole
// request line with a common method and "HTTP/1.x" for requests.
func (p *Parser) tryResync(data []byte) {
	if !resyncCandidate(data, p.isRequest) {
		return
	}
	if last := p.messages.Last(); last != nil && last.End < 0 && last.Offset < p.nextOffset {
		// The message before the gap ends no later than where this one starts.
		last.End = p.nextOffset
		last.EndInferred = true
	}
	p.state = stateStartLine
	p.resyncNext = true
	p.decided = true
	p.isHTTP = true
}

func resyncCandidate(data []byte, isRequest bool) bool {
	// A status line starts "HTTP/1.", a request line with a known method, all
	// in capitals: the body bytes a lost parser is handed (a bulk download
	// whose header was not captured, segment after segment) are turned away
	// at their first byte.
	if len(data) == 0 || !isRequest && data[0] != 'H' || isRequest && (data[0] < 'A' || data[0] > 'Z') {
		return false
	}
	if !isRequest {
		if len(data) < 12 {
			return false
		}
		var message Message
		line := data[:min(len(data), 13)]
		if len(line) == 13 && (line[12] == '\r' || line[12] == '\n') {
			line = line[:12]
		}
		_, ok := startLine(line, false, false, &message)
		return ok && message.Version != "" && message.Status < 600
	}
	newline := bytes.IndexByte(data[:min(len(data), MaxLineBytes)], '\n')
	if newline < 0 {
		return false
	}
	line := data[:newline]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	var message Message
	target, ok := startLine(line, true, false, &message)
	if !ok || !knownMethod(message.Method) {
		return false
	}
	return target[0] == '/' || string(target) == "*" || len(target) > 4 && string(target[:4]) == "http" || message.Method == "CONNECT"
}
