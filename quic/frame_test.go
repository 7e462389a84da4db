package quic

import (
	"bytes"
	"errors"
	"testing"
)

// varint encodes v in the shortest variable-length form (RFC 9000 §16).
func varint(v uint64) []byte {
	switch {
	case v < 1<<6:
		return []byte{byte(v)}
	case v < 1<<14:
		return []byte{0x40 | byte(v>>8), byte(v)}
	case v < 1<<30:
		return []byte{0x80 | byte(v>>24), byte(v >> 16), byte(v >> 8), byte(v)}
	}
	return []byte{0xc0 | byte(v>>56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestReadVarintRFC9000(t *testing.T) {
	// RFC 9000 Appendix A.1's examples.
	for _, c := range []struct {
		hex  string
		want uint64
		n    int
	}{
		{"c2197c5eff14e88c", 151288809941952652, 8},
		{"9d7f3e7d", 494878333, 4},
		{"7bbd", 15293, 2},
		{"25", 37, 1},
		{"4025", 37, 2},
	} {
		v, n, err := ReadVarint(unhex(t, c.hex))
		if err != nil || v != c.want || n != c.n {
			t.Errorf("%s: %d (%d bytes, %v), want %d (%d bytes)", c.hex, v, n, err, c.want, c.n)
		}
	}
	if _, _, err := ReadVarint([]byte{0x9d, 0x7f}); err == nil {
		t.Error("a cut varint read without error")
	}
}

func TestParseFrames(t *testing.T) {
	ncid := cat([]byte{0x18}, varint(3), varint(1), []byte{4, 1, 2, 3, 4}, bytes.Repeat([]byte{0xee}, 16))
	payload := cat(
		// ACK: largest 100, delay 25, 2 more ranges; first range 10 (90-100), gap 4 -> next top 84,
		// length 3 (81-84); gap 0 -> top 79, length 0 (79).
		[]byte{0x02}, varint(100), varint(25), varint(2), varint(10), varint(4), varint(3), varint(0), varint(0),
		[]byte{0x06}, varint(1200), varint(3), []byte("abc"), // CRYPTO
		[]byte{0x0e}, varint(0), varint(5000), varint(2), []byte("hi"), // STREAM with offset and length
		[]byte{0x01},                           // PING
		[]byte{0x1e},                           // HANDSHAKE_DONE
		ncid,                                   // NEW_CONNECTION_ID
		[]byte{0x11}, varint(4), varint(1<<20), // MAX_STREAM_DATA
		[]byte{0x1c}, varint(0x0a), varint(0x08), varint(4), []byte("oops"), // CONNECTION_CLOSE
		[]byte{0x09}, varint(4), []byte("tail"), // STREAM, no offset, no length, FIN: to the end
	)
	frames, err := ParseFrames(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []FrameType{FrameAck, FrameCrypto, FrameStream, FramePing, FrameHandshakeDone, FrameNewConnectionID, FrameMaxStreamData, FrameConnectionClose, FrameStream}
	if len(frames) != len(want) {
		t.Fatalf("%d frames, want %d: %+v", len(frames), len(want), frames)
	}
	for i, f := range frames {
		if f.Type != want[i] {
			t.Errorf("frame %d: %s, want %s", i, f.Type, want[i])
		}
	}
	ack := frames[0]
	wantRanges := []AckRange{{90, 100}, {81, 84}, {79, 79}}
	if len(ack.AckRanges) != 3 || ack.AckRanges[0] != wantRanges[0] || ack.AckRanges[1] != wantRanges[1] || ack.AckRanges[2] != wantRanges[2] || ack.AckDelay != 25 {
		t.Errorf("ACK ranges %v delay %d, want %v delay 25", ack.AckRanges, ack.AckDelay, wantRanges)
	}
	if !ack.Acks(95) || ack.Acks(85) || !ack.Acks(79) || ack.Acks(80) || ack.AckEliciting() {
		t.Error("Acks or AckEliciting wrong for the ACK frame")
	}
	if c := frames[1]; c.Offset != 1200 || c.Length != 3 || string(c.Data) != "abc" {
		t.Errorf("CRYPTO %+v", c)
	}
	if s := frames[2]; s.StreamID != 0 || s.Offset != 5000 || s.Length != 2 || s.Fin || string(s.Data) != "hi" {
		t.Errorf("STREAM %+v", s)
	}
	if n := frames[5]; n.Value != 3 || !bytes.Equal(n.ConnectionID, []byte{1, 2, 3, 4}) {
		t.Errorf("NEW_CONNECTION_ID %+v", n)
	}
	if c := frames[7]; c.ErrorCode != 0x0a || c.Reason != "oops" || c.AckEliciting() {
		t.Errorf("CONNECTION_CLOSE %+v", c)
	}
	if s := frames[8]; s.StreamID != 4 || s.Offset != 0 || !s.Fin || string(s.Data) != "tail" {
		t.Errorf("STREAM to the end %+v", s)
	}
}

func TestParseFramesPaddingRun(t *testing.T) {
	frames, err := ParseFrames(cat([]byte{0x01}, make([]byte, 100)), nil)
	if err != nil || len(frames) != 2 || frames[1].Type != FramePadding || frames[1].Length != 100 {
		t.Fatalf("frames %+v, %v; want PING and one PADDING run of 100", frames, err)
	}
}

func TestParseFramesErrors(t *testing.T) {
	for name, payload := range map[string][]byte{
		"unknown type":            {0x01, 0x40, 0x40},
		"CRYPTO longer than left": cat([]byte{0x06}, varint(0), varint(10), []byte("abc")),
		"ACK below zero":          cat([]byte{0x02}, varint(5), varint(0), varint(0), varint(6)),
		"ACK gap below zero":      cat([]byte{0x02}, varint(5), varint(0), varint(1), varint(1), varint(3), varint(0)),
		"cut varint":              {0x06, 0x80},
		"connection ID too long":  cat([]byte{0x18}, varint(1), varint(0), []byte{21}),
	} {
		frames, err := ParseFrames(payload, nil)
		if !errors.Is(err, ErrFrame) {
			t.Errorf("%s: error %v, want ErrFrame (frames %+v)", name, err, frames)
		}
	}
}

func TestParseHeaderErrors(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":                     {},
		"short header no fixed bit": {0x00, 1, 2, 3},
		"long header cut":           {0xc0, 0, 0, 0, 1, 8, 1, 2},
		"length beyond datagram":    cat([]byte{0xe0, 0, 0, 0, 1, 0, 0}, varint(100), []byte{1, 2, 3}),
	} {
		if _, err := ParseHeader(b, 8); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// An unknown version still gives the connection IDs (RFC 8999's invariants).
	h, err := ParseHeader(cat([]byte{0xc0, 0xff, 0, 0, 0x1d, 2, 0xaa, 0xbb, 1, 0xcc}, make([]byte, 20)), 0)
	if !errors.Is(err, ErrBadVersion) || !bytes.Equal(h.DCID, []byte{0xaa, 0xbb}) || !bytes.Equal(h.SCID, []byte{0xcc}) {
		t.Errorf("unknown version: %+v %v", h, err)
	}
}
