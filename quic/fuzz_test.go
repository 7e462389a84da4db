package quic

import (
	"os"
	"testing"
)

// FuzzParseFrames feeds arbitrary payloads to the frame parser: it must never panic,
// and every frame's data must lie within the payload.
func FuzzParseFrames(f *testing.F) {
	f.Add([]byte{0x01, 0x00, 0x00})
	f.Add(cat([]byte{0x02}, varint(100), varint(25), varint(2), varint(10), varint(4), varint(3), varint(0), varint(0)))
	f.Add(cat([]byte{0x06}, varint(0), varint(3), []byte("abc"), []byte{0x0f}, varint(4), varint(1), varint(1), []byte("x")))
	f.Add(cat([]byte{0x18}, varint(3), varint(1), []byte{4, 1, 2, 3, 4}, make([]byte, 16), []byte{0x1c, 1, 0, 0}))
	f.Fuzz(func(t *testing.T, payload []byte) {
		frames, _ := ParseFrames(payload, nil)
		total := 0
		for _, fr := range frames {
			total += len(fr.Data)
			for _, r := range fr.AckRanges {
				if r.Smallest < 0 || r.Smallest > r.Largest {
					t.Fatalf("ACK range %+v", r)
				}
			}
		}
		if total > len(payload) {
			t.Fatalf("frames hold %d data bytes of a %d-byte payload", total, len(payload))
		}
	})
}

// FuzzConnDatagram feeds arbitrary datagrams, from both ends, to a connection decoder
// that has seen the RFC 9001 client Initial: it must never panic, and packets must
// never claim more bytes than their datagram.
func FuzzConnDatagram(f *testing.F) {
	raw, err := os.ReadFile("testdata/rfc9001-a2-client-initial.hex")
	if err != nil {
		f.Fatal(err)
	}
	initial := unhex(f, string(raw))
	f.Add(initial, false)
	f.Add(initial[:100], true)
	f.Add([]byte{0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}, false)
	f.Add(cat([]byte{0xe0, 0, 0, 0, 1, 0, 0}, varint(30), make([]byte, 30), []byte{0xc0, 0, 0, 0, 1}), true)
	f.Fuzz(func(t *testing.T, datagram []byte, fromClient bool) {
		c := NewConn(nil)
		c.Datagram(0, true, initial)
		sum := 0
		for _, p := range c.Datagram(1, fromClient, datagram) {
			sum += p.Bytes
			if p.DatagramBytes != len(datagram) {
				t.Fatalf("datagram bytes %d, want %d", p.DatagramBytes, len(datagram))
			}
		}
		if sum > len(datagram) {
			t.Fatalf("packets of %d bytes in a %d-byte datagram", sum, len(datagram))
		}
	})
}

// FuzzParseHeader feeds arbitrary bytes to the header parser.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x41, 0x00}, 0)
	f.Add([]byte{0x41, 1, 2, 3, 4}, 2)
	f.Fuzz(func(t *testing.T, b []byte, cid int) {
		h, err := ParseHeader(b, cid%24)
		if err == nil && (h.Size > len(b) || h.PacketNumberOffset > h.Size) {
			t.Fatalf("header %+v of %d bytes", h, len(b))
		}
	})
}
