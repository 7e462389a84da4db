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
