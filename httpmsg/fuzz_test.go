package httpmsg

import (
	"reflect"
	"testing"

	"github.com/slowstart/slowstart/internal/streamtest"
)

func FuzzHTTPParser(f *testing.F) {
	f.Add([]byte(getA+headA+getB), []byte(resp5+respHd+resp5), []byte{3, 0x80 | 20, 0x40 | 9})
	f.Add([]byte(getA+"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
		[]byte(chunked+"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx"), []byte{0x3f, 0xc0 | 5, 1, 2})
	f.Add([]byte("CONNECT h:443 HTTP/1.1\r\n\r\n\x16\x03\x01"), []byte("HTTP/1.1 200 OK\r\n\r\n\x16\x03\x03"), []byte{})
	f.Fuzz(func(t *testing.T, requestStream, responseStream, plan []byte) {
		singleRequests, singleResponses := parsePair(streamtest.Whole(requestStream), streamtest.Whole(responseStream))
		for _, parser := range []*Parser{singleRequests, singleResponses} {
			checkMessageOrder(t, parser.Messages())
		}

		// Fully captured, split anyhow: the same as one piece unless sync was lost
		// (then resynchronization depends on where segments start).
		splitRequests, splitResponses := parsePair(streamtest.Plan(requestStream, plan, true), streamtest.Plan(responseStream, plan, true))
		if singleRequests.LostAt() < 0 && !reflect.DeepEqual(splitRequests.Messages(), singleRequests.Messages()) {
			t.Fatalf("split requests differ:\n got %+v\nwant %+v", summarize(splitRequests.Messages()), summarize(singleRequests.Messages()))
		}
		if singleRequests.LostAt() < 0 && singleResponses.LostAt() < 0 &&
			!reflect.DeepEqual(splitResponses.Messages(), singleResponses.Messages()) {
			t.Fatalf("split responses differ:\n got %+v\nwant %+v", summarize(splitResponses.Messages()), summarize(singleResponses.Messages()))
		}

		// Cut and holed: ordered messages, and those found before any loss are real.
		cutRequests, cutResponses := parsePair(streamtest.Plan(requestStream, plan, false), streamtest.Plan(responseStream, plan, false))
		for _, parser := range []*Parser{cutRequests, cutResponses} {
			checkMessageOrder(t, parser.Messages())
		}
		// A stream that turns out not to be HTTP further on may look like HTTP in a
		// cut prefix: only streams that are HTTP can be checked.
		if singleRequests.LostAt() < 0 && singleRequests.IsHTTP() {
			checkNoInventedBoundaries(t, untilResync(cutRequests.Messages()), singleRequests.Messages())
			// A response whose request was not captured is taken to answer neither
			// HEAD nor CONNECT unless the stream showed such requests: only responses
			// whose requests were all seen can be checked.
			if singleResponses.LostAt() < 0 && singleResponses.IsHTTP() &&
				reflect.DeepEqual(cutRequests.Messages(), singleRequests.Messages()) {
				checkNoInventedBoundaries(t, untilResync(cutResponses.Messages()), singleResponses.Messages())
			}
		}
	})
}

// untilResync returns the messages before the first one found by resynchronization
// (which may, with crafted input, be a false start), less any whose end was
// inferred from that start.
func untilResync(messages []Message) []Message {
	var trusted []Message
	for _, message := range messages {
		if message.Resynced {
			break
		}
		if !message.EndInferred {
			trusted = append(trusted, message)
		}
	}
	return trusted
}

func checkMessageOrder(t *testing.T, messages []Message) {
	t.Helper()
	for i, message := range messages {
		if message.HeaderEnd >= 0 && message.HeaderEnd <= message.Offset ||
			message.End >= 0 && message.HeaderEnd >= 0 && message.End < message.HeaderEnd {
			t.Fatalf("message %d has its boundaries out of order: %+v", i, message)
		}
		if i > 0 && (messages[i-1].End > message.Offset || messages[i-1].Offset >= message.Offset) {
			t.Fatalf("message %d at %d overlaps the previous one: %+v", i, message.Offset, messages[i-1])
		}
	}
}
