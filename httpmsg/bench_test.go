package httpmsg

import (
	"bytes"
	"fmt"
	"testing"
)

// benchmarkResponses feeds kept-alive responses of 64 KB bodies in 1448-byte
// segments, each captured up to capturedBytes (0: whole). The stream repeats a
// pattern of responses, so one Parser keeps going for b.N segments.
func benchmarkResponses(b *testing.B, capturedBytes int) {
	const segmentBytes = 1448
	var pattern []byte
	for range 4 {
		pattern = fmt.Appendf(pattern, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", 1<<16)
		pattern = append(pattern, bytes.Repeat([]byte("x"), 1<<16)...)
	}
	doubled := append(bytes.Clone(pattern), pattern...)
	parser := NewResponseParser(nil)
	b.SetBytes(segmentBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		offset := int64(i) * segmentBytes
		start := int(offset % int64(len(pattern)))
		captured := segmentBytes
		if capturedBytes > 0 {
			captured = capturedBytes
		}
		parser.Write(offset, doubled[start:start+captured], segmentBytes)
	}
	b.StopTimer()
	// With a 148-byte capture some headers fall into uncaptured bytes; the whole
	// capture must stay in sync.
	if capturedBytes == 0 && !parser.Synced() {
		b.Fatalf("the parser lost sync at %d", parser.LostAt())
	}
}

func BenchmarkResponsesWhole(b *testing.B)      { benchmarkResponses(b, 0) }
func BenchmarkResponsesSnaplen200(b *testing.B) { benchmarkResponses(b, 148) }

// BenchmarkSmallResponses parses kept-alive responses of a 600-byte body with
// the header nginx sends, each whole in one segment: the messages of an edge
// server's capture, where the header lines are most of the work.
func BenchmarkSmallResponses(b *testing.B) {
	head := "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 27 Nov 2026 15:52:01 GMT\r\n" +
		"Content-Type: application/octet-stream\r\nContent-Length: 600\r\n" +
		"Last-Modified: Fri, 27 Nov 2026 15:50:00 GMT\r\nConnection: keep-alive\r\n" +
		"ETag: \"6567b0a8-258\"\r\nAccept-Ranges: bytes\r\n\r\n"
	message := append([]byte(head), bytes.Repeat([]byte("x"), 600)...)
	parser := NewResponseParser(nil)
	b.SetBytes(int64(len(message)))
	b.ReportAllocs()
	for i := range b.N {
		parser.Write(int64(i)*int64(len(message)), message, len(message))
	}
	b.StopTimer()
	if !parser.Synced() || parser.Count() != min(b.N, MaxStoredMessages) {
		b.Fatalf("%d messages found in %d, synced %v", parser.Count(), b.N, parser.Synced())
	}
}
