package tlsrec

import (
	"bytes"
	"testing"
)

// benchmarkStream feeds a long run of application-data records of 11 segments
// each (about 16 KB) in 1448-byte segments, each captured up to capturedBytes
// (0: whole), so every record header starts a segment and stays captured. The
// stream repeats a pattern of records, so one Stream keeps going for b.N segments.
func benchmarkStream(b *testing.B, capturedBytes int) {
	const segmentBytes = 1448
	var pattern []byte
	for range 8 {
		pattern = append(pattern, record(ContentApplicationData, bytes.Repeat([]byte{0xab}, 11*segmentBytes-RecordHeaderBytes))...)
	}
	doubled := append(bytes.Clone(pattern), pattern...)
	stream := NewStream()
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
		stream.Write(offset, doubled[start:start+captured], segmentBytes)
	}
	b.StopTimer()
	if !stream.Synced() {
		b.Fatalf("the stream lost sync at %d", stream.LostAt())
	}
}

func BenchmarkStreamWhole(b *testing.B)      { benchmarkStream(b, 0) }
func BenchmarkStreamSnaplen200(b *testing.B) { benchmarkStream(b, 148) }
