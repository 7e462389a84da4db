package capture

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

func TestPcapWriterReadsBack(t *testing.T) {
	const snaplen = 120
	type record struct {
		segment     testSegment
		timestampNs int64
		origLen     int // 0: the packet's length
	}
	records := []record{
		{synSegment(client4, server4), 1_700_000_000_123_456_789, 0},
		{dataSegment(server4, client4, 1000), 1_700_000_000_999_999_999, 0},         // cut to the snap length
		{dataSegment(server6, client6, 50), 1_700_000_001_000_000_001, 0},           // IPv6
		{finSegment(server4, client4), 1_700_000_002_000_000_000, 1},                // origLen below the length counts as the length
		{dataSegment(server4, client4, 10), 1_700_000_003_000_000_000, 52 + 10 + 7}, // origLen above it is kept
	}
	var out bytes.Buffer
	w, err := NewPcapWriter(&out, snaplen)
	if err != nil {
		t.Fatal(err)
	}
	var wantPackets []Packet
	var wantLens []int
	for _, rec := range records {
		ip := buildIP(t, rec.segment)
		if err := w.WritePacket(ip, rec.timestampNs, rec.origLen); err != nil {
			t.Fatal(err)
		}
		want := rec.segment.want()
		want.TimestampNs = rec.timestampNs
		headerBytes := len(ip) - len(rec.segment.payload)
		want.Payload = want.Payload[:min(len(want.Payload), max(snaplen-headerBytes, 0))]
		wantPackets = append(wantPackets, want)
		wantLens = append(wantLens, max(rec.origLen, len(ip)))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	got, stats, err := readAll(t, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wantPackets) {
		t.Fatalf("read back %d packets, wrote %d", len(got), len(wantPackets))
	}
	for i := range got {
		if d := diffPacket(got[i], wantPackets[i]); d != "" {
			t.Errorf("packet %d:%s", i, d)
		}
	}
	if stats.Format != FormatPcap || stats.Snaplen != snaplen || !slices.Equal(stats.LinkTypes, []string{"Raw"}) ||
		stats.TCP != int64(len(records)) || stats.Truncated {
		t.Errorf("stats %+v: want pcap, snaplen %d, Raw, %d TCP records, whole", stats, snaplen, len(records))
	}

	// The original lengths, read from the record headers directly.
	offset := pcapFileHeaderBytes
	for i, wantLen := range wantLens {
		capturedBytes := int(le32(out.Bytes()[offset+8:]))
		origBytes := int(le32(out.Bytes()[offset+12:]))
		if origBytes != wantLen || capturedBytes > snaplen {
			t.Errorf("record %d: original length %d, captured %d; want %d and at most %d", i, origBytes, capturedBytes, wantLen, snaplen)
		}
		offset += pcapRecordHeaderBytes + capturedBytes
	}
	if offset != out.Len() {
		t.Errorf("the records end at byte %d of %d", offset, out.Len())
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// failingWriter accepts limit bytes, then fails.
type failingWriter struct{ limit int }

var errDiskFull = errors.New("disk full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n := f.limit
		f.limit = 0
		return n, errDiskFull
	}
	f.limit -= len(p)
	return len(p), nil
}

func TestPcapWriterErrors(t *testing.T) {
	if _, err := NewPcapWriter(&bytes.Buffer{}, -1); err == nil {
		t.Error("a negative snap length: no error")
	}
	w, err := NewPcapWriter(&failingWriter{limit: 100}, 0)
	if err != nil {
		t.Fatal(err) // buffered: nothing reached the writer yet
	}
	packet := buildIP(t, dataSegment(server4, client4, 1000))
	var writeErr error
	for range pcapWriteBufferBytes/len(packet) + 2 {
		if writeErr = w.WritePacket(packet, 1, len(packet)); writeErr != nil {
			break
		}
	}
	if !errors.Is(writeErr, errDiskFull) {
		t.Fatalf("writing more than the buffer into a failing writer: got %v, want the write error", writeErr)
	}
	if err := w.WritePacket(packet, 1, len(packet)); !errors.Is(err, errDiskFull) {
		t.Errorf("a write after the error: got %v, want the same error again", err)
	}
	if err := w.Flush(); !errors.Is(err, errDiskFull) {
		t.Errorf("Flush after the error: got %v, want the write error", err)
	}
	fresh, err := NewPcapWriter(&bytes.Buffer{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.WritePacket(packet, -1, len(packet)); err == nil {
		t.Error("a timestamp before 1970: no error")
	}
}

func TestPcapWriterAllocatesNothing(t *testing.T) {
	w, err := NewPcapWriter(io.Discard, 0)
	if err != nil {
		t.Fatal(err)
	}
	packet := buildIP(t, dataSegment(server4, client4, 1000))
	allocs := testing.AllocsPerRun(1000, func() {
		if err := w.WritePacket(packet, 1_700_000_000_000_000_000, len(packet)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("WritePacket allocates %.1f times per packet, want 0", allocs)
	}
}
