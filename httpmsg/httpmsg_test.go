package httpmsg

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/streamtest"
)

// piece is one Write call.
type piece = streamtest.Piece

// segmentizeWrites cuts stream as TCP would send it: a segment never spans two
// writes (each write pushed at once, as on an idle connection) and holds at most
// mss bytes, of which the first capturedBytes are captured.
func segmentizeWrites(stream []byte, writes []int, mss, capturedBytes int) []piece {
	var pieces []piece
	start := 0
	for _, size := range writes {
		for end := start + size; start < end; {
			segmentEnd := min(start+mss, end)
			captured := min(start+capturedBytes, segmentEnd)
			pieces = append(pieces, piece{Offset: int64(start), Data: stream[start:captured], Length: segmentEnd - start})
			start = segmentEnd
		}
	}
	return pieces
}

// parsePair feeds both directions, requests first within each step, and closes both.
func parsePair(requestPieces, responsePieces []piece) (requests, responses *Parser) {
	requests = NewRequestParser()
	responses = NewResponseParser(requests)
	for _, p := range requestPieces {
		requests.Write(p.Offset, p.Data, p.Length)
	}
	for _, p := range responsePieces {
		responses.Write(p.Offset, p.Data, p.Length)
	}
	requests.Close()
	responses.Close()
	return requests, responses
}

func checkTiling(t *testing.T, name string, messages []Message, streamBytes int) {
	t.Helper()
	for i, message := range messages {
		if message.Incomplete || message.HeaderEnd < 0 || message.End < message.HeaderEnd {
			t.Errorf("%s message %d: %+v, want a complete message", name, i, message)
		}
		if i > 0 && message.Offset != messages[i-1].End {
			t.Errorf("%s message %d starts at %d, previous ends at %d", name, i, message.Offset, messages[i-1].End)
		}
	}
	if len(messages) == 0 || messages[len(messages)-1].End != int64(streamBytes) {
		t.Errorf("%s messages do not end at the stream's end (%d bytes)", name, streamBytes)
	}
}

func TestNetHTTPExchange(t *testing.T) {
	recorded := runExchange(t, exchangeRequests)
	requests, responses := parsePair(streamtest.Whole(recorded.requestStream), streamtest.Whole(recorded.responseStream))
	if !requests.IsHTTP() || !responses.IsHTTP() {
		t.Fatalf("IsHTTP request=%t response=%t", requests.IsHTTP(), responses.IsHTTP())
	}
	checkTiling(t, "request", requests.Messages(), len(recorded.requestStream))
	checkTiling(t, "response", responses.Messages(), len(recorded.responseStream))
	if len(requests.Messages()) != len(exchangeRequests) || len(responses.Messages()) != len(exchangeRequests) {
		t.Fatalf("%d requests and %d responses, want %d of each", len(requests.Messages()), len(responses.Messages()), len(exchangeRequests))
	}
	for i, want := range exchangeRequests {
		request, response := requests.Messages()[i], responses.Messages()[i]
		if request.Method != want.method || request.Target != want.target || request.Version != "HTTP/1.1" || !request.KeepAlive {
			t.Errorf("request %d: %+v, want %s %s HTTP/1.1 kept alive", i, request, want.method, want.target)
		}
		if want.body != "" && request.End-request.HeaderEnd != int64(len(want.body)) {
			t.Errorf("request %d: body of %d bytes, want %d", i, request.End-request.HeaderEnd, len(want.body))
		}
		if response.Status != want.wantStatus || response.Chunked != want.wantChunked || response.Request != i {
			t.Errorf("response %d: %+v, want status %d chunked %t answering request %d", i, response, want.wantStatus, want.wantChunked, i)
		}
		if want.wantLength != -2 && response.ContentLength != want.wantLength {
			t.Errorf("response %d: Content-Length %d, want %d", i, response.ContentLength, want.wantLength)
		}
		if request.Host != "server.test" {
			t.Errorf("request %d: Host %q, want server.test", i, request.Host)
		}
		if want.target == "/bytes" && response.ContentType != "application/octet-stream" {
			t.Errorf("response %d: Content-Type %q, want the one the handler set", i, response.ContentType)
		}
		if want.method == "HEAD" && response.End != response.HeaderEnd {
			t.Errorf("response %d to HEAD has a body of %d bytes", i, response.End-response.HeaderEnd)
		}
	}
}

// TestSplitsAndSnaplen feeds the recorded exchange in 1-byte pieces and in
// segments (same result as one piece), then cut by a snaplen and with holes (no
// invented boundaries).
func TestSplitsAndSnaplen(t *testing.T) {
	recorded := runExchange(t, exchangeRequests)
	truthRequests, truthResponses := parsePair(streamtest.Whole(recorded.requestStream), streamtest.Whole(recorded.responseStream))
	for _, split := range []struct {
		name         string
		segmentBytes int
	}{{"1-byte pieces", 1}, {"7-byte pieces", 7}, {"1448-byte segments", 1448}} {
		requests, responses := parsePair(streamtest.Segmentize(recorded.requestStream, split.segmentBytes, 0),
			streamtest.Segmentize(recorded.responseStream, split.segmentBytes, 0))
		if !reflect.DeepEqual(requests.Messages(), truthRequests.Messages()) ||
			!reflect.DeepEqual(responses.Messages(), truthResponses.Messages()) {
			t.Errorf("%s: messages differ from the one-piece parse", split.name)
		}
	}
	for _, cut := range []struct {
		name          string
		capturedBytes int
		holes         []int
	}{
		{"snaplen 200", 148, nil},
		{"snaplen 100", 48, nil},
		{"holes", 0, []int{1, 4}},
		{"snaplen 200 and holes", 148, []int{2}},
	} {
		t.Run(cut.name, func(t *testing.T) {
			requests, responses := parsePair(streamtest.Segmentize(recorded.requestStream, 1448, cut.capturedBytes, cut.holes...),
				streamtest.Segmentize(recorded.responseStream, 1448, cut.capturedBytes, cut.holes...))
			checkNoInventedBoundaries(t, requests.Messages(), truthRequests.Messages())
			checkNoInventedBoundaries(t, responses.Messages(), truthResponses.Messages())
			if len(responses.Messages()) == 0 || responses.Messages()[0].Status != 200 {
				t.Errorf("first response not found: %+v", responses.Messages())
			}
		})
	}
}

// TestSnaplenWithWriteAlignedSegments cuts segments where the sender's writes
// end, as on a real connection, so messages start at segment starts: every
// message must be found again, by following or by resynchronization.
func TestSnaplenWithWriteAlignedSegments(t *testing.T) {
	recorded := runExchange(t, exchangeRequests)
	truthRequests, truthResponses := parsePair(streamtest.Whole(recorded.requestStream), streamtest.Whole(recorded.responseStream))
	requests, responses := parsePair(segmentizeWrites(recorded.requestStream, recorded.requestWrites, 1448, 148),
		segmentizeWrites(recorded.responseStream, recorded.responseWrites, 1448, 148))
	checkNoInventedBoundaries(t, requests.Messages(), truthRequests.Messages())
	checkNoInventedBoundaries(t, responses.Messages(), truthResponses.Messages())
	offsets := func(messages []Message) []int64 {
		var all []int64
		for _, message := range messages {
			all = append(all, message.Offset)
		}
		return all
	}
	if got, want := offsets(requests.Messages()), offsets(truthRequests.Messages()); !reflect.DeepEqual(got, want) {
		t.Errorf("requests at %v, want %v", got, want)
	}
	if got, want := offsets(responses.Messages()), offsets(truthResponses.Messages()); !reflect.DeepEqual(got, want) {
		t.Errorf("responses at %v, want %v", got, want)
	}
	for i, message := range responses.Messages() {
		if message.Status != exchangeRequests[i].wantStatus {
			t.Errorf("response %d: status %d, want %d", i, message.Status, exchangeRequests[i].wantStatus)
		}
	}
}

// checkNoInventedBoundaries fails if got holds a message offset, header end or end
// that the fully captured parse (truth) does not have. An inferred end may only be
// later than the true one (whole messages may have been missed before the next),
// and a message none of whose start line was captured may begin in the empty
// lines before a real one.
func checkNoInventedBoundaries(t *testing.T, got, truth []Message) {
	t.Helper()
	byOffset := make(map[int64]Message, len(truth))
	for _, message := range truth {
		byOffset[message.Offset] = message
	}
	for _, message := range got {
		want, ok := byOffset[message.Offset]
		switch {
		case !ok && message.IncompleteReason == ReasonStartLineNotCaptured && message.Method == "" && message.Status == 0 &&
			betweenMessages(truth, message.Offset):
			// A message none of whose start line was captured begins where
			// the one before ended: the empty lines a request may carry
			// before its start line (skipped when seen) count into it.
		case !ok:
			t.Errorf("message at %d is not a real message start", message.Offset)
		case message.HeaderEnd >= 0 && message.HeaderEnd != want.HeaderEnd:
			t.Errorf("message at %d: header end %d, want %d", message.Offset, message.HeaderEnd, want.HeaderEnd)
		case message.End >= 0 && !message.EndInferred && message.End != want.End:
			t.Errorf("message at %d: end %d, want %d", message.Offset, message.End, want.End)
		case message.EndInferred && message.End < want.End:
			t.Errorf("message at %d: inferred end %d before the true end %d", message.Offset, message.End, want.End)
		case message.Status != 0 && message.Status != want.Status, message.Method != "" && message.Method != want.Method:
			t.Errorf("message at %d: %+v, want %+v", message.Offset, message, want)
		}
	}
}

// betweenMessages reports whether offset lies before a message of messages
// (those of a whole stream) and inside none: in empty lines skipped between
// two.
func betweenMessages(messages []Message, offset int64) bool {
	before := false
	for _, m := range messages {
		if m.Offset <= offset && (m.End < 0 || offset < m.End) {
			return false
		}
		before = before || m.Offset > offset
	}
	return before
}

// Synthetic exchanges.

const (
	getA    = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
	headA   = "HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n"
	getB    = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
	resp5   = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	respHd  = "HTTP/1.1 200 OK\r\ncontent-LENGTH: 5\r\n\r\n"
	chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n"
)

// wantMessage lists the fields a test checks; other fields are not compared.
type wantMessage struct {
	offset, headerEnd, end int64
	status                 int
	method                 string
	contentLength          int64
	chunked, keepAlive     bool
	incomplete             bool
	request                int
	resynced, endInferred  bool
}

func summarize(messages []Message) []wantMessage {
	var summary []wantMessage
	for _, m := range messages {
		summary = append(summary, wantMessage{m.Offset, m.HeaderEnd, m.End, m.Status, m.Method, m.ContentLength,
			m.Chunked, m.KeepAlive, m.Incomplete, m.Request, m.Resynced, m.EndInferred})
	}
	return summary
}

func TestSynthetic(t *testing.T) {
	n := func(s string) int64 { return int64(len(s)) }
	tests := []struct {
		name           string
		requests       string
		responses      string
		responsePieces func(stream []byte) []piece // nil: whole
		wantRequests   []wantMessage
		wantResponses  []wantMessage
		wantHTTP       bool
	}{
		{
			name:      "pipelined requests and back-to-back responses with HEAD",
			requests:  getA + headA + getB,
			responses: resp5 + respHd + resp5,
			wantHTTP:  true,
			wantRequests: []wantMessage{
				{0, n(getA), n(getA), 0, "GET", -1, false, true, false, -1, false, false},
				{n(getA), n(getA + headA), n(getA + headA), 0, "HEAD", -1, false, true, false, -1, false, false},
				{n(getA + headA), n(getA + headA + getB), n(getA + headA + getB), 0, "GET", -1, false, true, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, n(resp5) - 5, n(resp5), 200, "", 5, false, true, false, 0, false, false},
				{n(resp5), n(resp5 + respHd), n(resp5 + respHd), 200, "", 5, false, true, false, 1, false, false},
				{n(resp5 + respHd), n(resp5+respHd+resp5) - 5, n(resp5 + respHd + resp5), 200, "", 5, false, true, false, 2, false, false},
			},
		},
		{
			name:      "chunked with extension and trailer, then interim 100 and a 304",
			requests:  getA + getB,
			responses: chunked + "HTTP/1.1 100 Continue\r\n\r\n" + "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
			wantHTTP:  true,
			wantRequests: []wantMessage{
				{0, n(getA), n(getA), 0, "GET", -1, false, true, false, -1, false, false},
				{n(getA), n(getA + getB), n(getA + getB), 0, "GET", -1, false, true, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, 53, n(chunked), 200, "", -1, true, true, false, 0, false, false},
				{n(chunked), n(chunked) + 25, n(chunked) + 25, 100, "", -1, false, true, false, 1, false, false},
				{n(chunked) + 25, n(chunked) + 74, n(chunked) + 74, 304, "", 99, false, true, false, 1, false, false},
			},
		},
		{
			name:      "HTTP/1.0 body until close",
			requests:  "GET / HTTP/1.0\r\n\r\n",
			responses: "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody bytes until the end",
			wantHTTP:  true,
			wantRequests: []wantMessage{
				{0, 18, 18, 0, "GET", -1, false, false, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, 30, 54, 200, "", -1, false, false, false, 0, false, false},
			},
		},
		{
			name:      "101 switches protocols",
			requests:  "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
			responses: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05hello",
			wantHTTP:  true,
			wantRequests: []wantMessage{
				{0, 61, 61, 0, "GET", -1, false, true, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, 56, 56, 101, "", -1, false, true, false, 0, false, false},
			},
		},
		{
			name:      "not HTTP",
			requests:  "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
			responses: "\x16\x03\x03\x00\x7a\x02\x00\x00\x76\x03\x03",
			wantHTTP:  false,
		},
		{
			// The response header is cut by the snaplen before its Content-Length: the
			// end is unknown until the next response line is found at a segment start.
			name:     "header cut by the snaplen, then resynchronized",
			requests: getA + getB,
			responses: "HTTP/1.1 200 OK\r\nServer: a-long-server-name\r\nContent-Length: 10\r\n\r\n0123456789" +
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			responsePieces: func(stream []byte) []piece {
				return []piece{{Offset: 0, Data: stream[:30], Length: 77}, {Offset: 77, Data: stream[77:], Length: len(stream) - 77}}
			},
			wantHTTP: true,
			wantRequests: []wantMessage{
				{0, n(getA), n(getA), 0, "GET", -1, false, true, false, -1, false, false},
				{n(getA), n(getA + getB), n(getA + getB), 0, "GET", -1, false, true, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, -1, 77, 200, "", -1, false, false, true, 0, false, true},
				{77, 115, 117, 200, "", 2, false, true, false, -1, true, false},
			},
		},
		{
			name:      "chunk-size line not captured",
			requests:  getA,
			responses: chunked,
			responsePieces: func(stream []byte) []piece {
				return []piece{{Offset: 0, Data: stream[:53], Length: 56}, {Offset: 56, Data: stream[56:], Length: len(stream) - 56}}
			},
			wantHTTP: true,
			wantRequests: []wantMessage{
				{0, n(getA), n(getA), 0, "GET", -1, false, true, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, 53, -1, 200, "", -1, true, true, true, 0, false, false},
			},
		},
		{
			// Body bytes that were not captured cost nothing: the length frames them.
			name:      "body not captured, next response in the same segment found by length",
			requests:  getA + getB,
			responses: resp5 + resp5,
			responsePieces: func(stream []byte) []piece {
				return []piece{{Offset: 0, Data: stream[:40], Length: 43}, {Offset: 43, Data: stream[43:], Length: len(stream) - 43}}
			},
			wantHTTP: true,
			wantRequests: []wantMessage{
				{0, n(getA), n(getA), 0, "GET", -1, false, true, false, -1, false, false},
				{n(getA), n(getA + getB), n(getA + getB), 0, "GET", -1, false, true, false, -1, false, false},
			},
			wantResponses: []wantMessage{
				{0, 38, 43, 200, "", 5, false, true, false, 0, false, false},
				{43, 81, 86, 200, "", 5, false, true, false, 1, false, false},
			},
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			responsePieces := streamtest.Whole([]byte(test.responses))
			if test.responsePieces != nil {
				responsePieces = test.responsePieces([]byte(test.responses))
			}
			requests, responses := parsePair(streamtest.Whole([]byte(test.requests)), responsePieces)
			if requests.IsHTTP() != test.wantHTTP || responses.IsHTTP() != test.wantHTTP {
				t.Errorf("IsHTTP request=%t response=%t, want %t", requests.IsHTTP(), responses.IsHTTP(), test.wantHTTP)
			}
			if got := summarize(requests.Messages()); !reflect.DeepEqual(got, test.wantRequests) {
				t.Errorf("requests\n got %+v\nwant %+v", got, test.wantRequests)
			}
			if got := summarize(responses.Messages()); !reflect.DeepEqual(got, test.wantResponses) {
				t.Errorf("responses\n got %+v\nwant %+v", got, test.wantResponses)
			}
			// The same streams in 1-byte pieces give the same messages when all is captured.
			if test.responsePieces == nil {
				oneByteRequests, oneByteResponses := parsePair(streamtest.Segmentize([]byte(test.requests), 1, 0), streamtest.Segmentize([]byte(test.responses), 1, 0))
				if !reflect.DeepEqual(oneByteRequests.Messages(), requests.Messages()) ||
					!reflect.DeepEqual(oneByteResponses.Messages(), responses.Messages()) {
					t.Errorf("1-byte pieces give different messages:\n%+v\n%+v", summarize(oneByteResponses.Messages()), summarize(responses.Messages()))
				}
			}
		})
	}
}

// TestHeaderSplitAcrossSegments splits a response at every byte and checks that
// the framing fields survive.
func TestHeaderSplitAcrossSegments(t *testing.T) {
	stream := []byte(chunked + resp5)
	_, want := parsePair(nil, streamtest.Whole(stream))
	for split := 1; split < len(stream); split++ {
		_, got := parsePair(nil, []piece{{Offset: 0, Data: stream[:split], Length: split}, {Offset: int64(split), Data: stream[split:], Length: len(stream) - split}})
		if !reflect.DeepEqual(got.Messages(), want.Messages()) {
			t.Fatalf("split at %d: %+v, want %+v", split, summarize(got.Messages()), summarize(want.Messages()))
		}
	}
	if len(want.Messages()) != 2 || !want.Messages()[0].Chunked || want.Messages()[1].ContentLength != 5 {
		t.Fatalf("unexpected parse of the unsplit stream: %+v", summarize(want.Messages()))
	}
}

// TestResponseWithoutRequests checks that a response parser works on its own.
func TestResponseWithoutRequests(t *testing.T) {
	parser := NewResponseParser(nil)
	stream := []byte(resp5 + resp5)
	parser.Write(0, stream, len(stream))
	parser.Close()
	got := parser.Messages()
	if len(got) != 2 || got[1].End != int64(len(stream)) || got[0].Request != -1 {
		t.Fatalf("messages %+v, want two responses ending at %d without request indexes", summarize(got), len(stream))
	}
}

// TestResponseBeforeRequestHeaderEnds checks what a response that comes
// before its request's header has ended (a server that answers early, or a
// capture whose request tail was lost) is told of that request: its method
// once the start line is whole; if not whole yet, that a HEAD or CONNECT may
// be what it answers.
func TestResponseBeforeRequestHeaderEnds(t *testing.T) {
	for _, tc := range []struct {
		name, request, response string
		wantEnd                 int64 // -1: not framed (sync lost)
		wantReason              string
		wantLost                bool // sync given up after the response
	}{
		// The start line whole: a HEAD's response has no body.
		{"HEAD, header not ended", "HEAD /a HTTP/1.1\r\nHost: h\r\n", resp5, int64(len(resp5) - 5), "", false},
		// A GET's has its body.
		{"GET, header not ended", "GET /a HTTP/1.1\r\nHost: h\r\n", resp5, int64(len(resp5)), "", false},
		// The start line not whole: a CONNECT may be what is answered.
		{"CONNECT line not whole, 200 with a length", "CONNECT h:443 HTTP/1.1", resp5, -1, ReasonRequestUnknown, true},
		{"CONNECT line not whole, 204", "CONNECT h:443 HTTP/1.1", "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n", 27, "", true},
		{"GET line not whole, 204", "GET /a HTTP/1.1", "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n", 27, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests := NewRequestParser()
			requests.Write(0, []byte(tc.request), len(tc.request))
			responses := NewResponseParser(requests)
			responses.Write(0, []byte(tc.response), len(tc.response))
			got := responses.Messages()
			if len(got) == 0 || got[0].End != tc.wantEnd || got[0].IncompleteReason != tc.wantReason || responses.Synced() == tc.wantLost {
				t.Fatalf("responses %+v (synced %t), want the first to end at %d (%q), sync lost %t",
					summarize(got), responses.Synced(), tc.wantEnd, tc.wantReason, tc.wantLost)
			}
		})
	}
}

func TestLongLineLosesSync(t *testing.T) {
	parser := NewRequestParser()
	stream := []byte(getA + "GET /" + strings.Repeat("a", MaxLineBytes) + " HTTP/1.1\r\n\r\n" + getB)
	parser.Write(0, stream, len(stream))
	messages := parser.Messages()
	if parser.Synced() || parser.LostAt() != int64(len(getA)) || len(messages) != 2 || !messages[1].Incomplete {
		t.Fatalf("synced=%t lost at %d, messages %s; want sync lost at %d with the second message incomplete",
			parser.Synced(), parser.LostAt(), fmt.Sprint(summarize(messages)), len(getA))
	}
}

// TestOverlapAndEmptyPieces checks that bytes handed over twice (a retransmission
// the caller did not filter) and empty pieces change nothing.
func TestOverlapAndEmptyPieces(t *testing.T) {
	stream := []byte(resp5 + chunked)
	_, want := parsePair(nil, streamtest.Whole(stream))
	_, got := parsePair(nil, []piece{
		{Offset: 0, Data: stream[:20], Length: 20},
		{Offset: 0, Data: stream[:30], Length: 30}, // overlaps the first 20 bytes
		{Offset: 30, Data: nil, Length: 0},
		{Offset: 25, Data: stream[25:], Length: len(stream) - 25},
	})
	if !reflect.DeepEqual(got.Messages(), want.Messages()) || len(want.Messages()) != 2 {
		t.Fatalf("messages %+v, want %+v", summarize(got.Messages()), summarize(want.Messages()))
	}
}

func TestFramingField(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
	}{
		{"Content-Length", fieldContentLength},
		{"CONTENT-LENGTH", fieldContentLength},
		{"content-lengtH", fieldContentLength},
		{"Content-Lengths", fieldOther},
		{"Content-Lengtx", fieldOther}, // the same length, another name
		{"Transfer-Encoding", fieldTransferEncoding},
		{"hOsT", fieldHost},
		{"Date", fieldOther}, // the length of Host
		{"Content-Type", fieldContentType},
		{"Content-Typf", fieldOther},
		{"Connection", fieldConnection},
		{"Keep-Alive", fieldOther}, // the length of Connection
		{"Server", fieldOther},
		{"", fieldOther},
	} {
		if got := framingField([]byte(tc.name)); got != tc.want {
			t.Errorf("framingField(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
}
