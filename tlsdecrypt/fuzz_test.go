package tlsdecrypt

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
)

// streamCollector keeps the two directions' new bytes of a capture's connections.
type streamCollector struct {
	streams *[][2][]byte
	current [2][]byte
}

func (s *streamCollector) Segment(c *flow.Conn, seg *flow.Segment) {
	if seg.NewLen == 0 {
		return
	}
	data := seg.Payload[seg.NewOffset-seg.Offset:]
	s.current[seg.Dir] = append(s.current[seg.Dir], data...)
}

func (s *streamCollector) Close(c *flow.Conn) { *s.streams = append(*s.streams, s.current) }

// captureStreams returns the client and server streams of each connection of a
// capture taken without a snaplen.
func captureStreams(t testing.TB, path string) [][2][]byte {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var streams [][2][]byte
	tracker := flow.NewTracker(func(c *flow.Conn) flow.Handler { return &streamCollector{streams: &streams} }, flow.ServerHint{})
	var p capture.Packet
	for {
		err := r.Next(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tracker.Add(&p)
	}
	tracker.Flush()
	return streams
}

// fuzzSession is a real connection from testdata/tls: its key log and the
// application data its records hold, decrypted once from the whole streams.
type fuzzSession struct {
	keys            *keylog.Log
	client, server  []byte
	applicationData [2][]byte
}

func loadFuzzSessions(t testing.TB) []fuzzSession {
	t.Helper()
	var out []fuzzSession
	for _, name := range []string{"tiny-curl-tls13-h2", "tiny-curl-tls12-h1-cbc", "tiny-openssl-tls13-h1-keyupdate", "zeek/tls-1.2-stream-keylog"} {
		base := filepath.Join("..", "testdata", "tls", name)
		keys, err := keylog.ParseFile(base + ".keys")
		if err != nil {
			t.Fatal(err)
		}
		for _, streams := range captureStreams(t, base+".pcap") {
			s := fuzzSession{keys: keys, client: streams[0], server: streams[1]}
			got := runDecryptor(keys, []piece{{flow.ToServer, 0, s.client, len(s.client)}, {flow.ToClient, 0, s.server, len(s.server)}})
			if !got.summary.Keys || len(got.summary.Problems) != 0 {
				t.Fatalf("%s: not decrypted whole: %+v", name, got.summary)
			}
			s.applicationData = got.appData
			out = append(out, s)
		}
	}
	return out
}

// fuzzPieces hands both streams over in alternating pieces following plan: each
// plan byte gives a length (low 6 bits, times 16, plus one) and a mode (high 2
// bits): 0 captured, 1 half captured, 2 not captured, 3 late (handed over after
// all the others, as a retransmission filling a hole).
func fuzzPieces(client, server, plan []byte) []piece {
	var pieces, late []piece
	streams := [2][]byte{client, server}
	var at [2]int
	for i, step := range plan {
		dir := flow.Dir(i % 2)
		stream := streams[dir]
		if at[dir] >= len(stream) {
			continue
		}
		length := min(int(step&0x3f)*16+1, len(stream)-at[dir])
		p := piece{dir, int64(at[dir]), stream[at[dir] : at[dir]+length], length}
		switch step >> 6 {
		case 1:
			p.data = p.data[:length/2]
		case 2:
			p.data = nil
		case 3:
			late = append(late, p)
			at[dir] += length
			continue
		}
		pieces = append(pieces, p)
		at[dir] += length
	}
	for dir := range 2 {
		if at[dir] < len(streams[dir]) {
			pieces = append(pieces, piece{flow.Dir(dir), int64(at[dir]), streams[dir][at[dir]:], len(streams[dir]) - at[dir]})
		}
	}
	return append(pieces, late...)
}

// FuzzDecryptRecords feeds real connections' streams, mutated and cut, with
// their real keys. Whatever the bytes, no plaintext may be invented: every
// decrypted application record holds bytes the real connection sent.
func FuzzDecryptRecords(f *testing.F) {
	sessions := loadFuzzSessions(f)
	for i, s := range sessions {
		f.Add(s.client, s.server, []byte{}, uint8(i))
		f.Add(s.client, s.server, []byte{0x3f, 0x10, 0x3f, 0x3f, 0x80 | 5, 0x40 | 20, 0xc0 | 3}, uint8(i))
	}
	f.Fuzz(func(t *testing.T, client, server, plan []byte, which uint8) {
		s := sessions[int(which)%len(sessions)]
		var ends [2]int64
		d := New(Config{Keys: s.keys, OnRecord: func(r *Record) {
			if r.Offset < ends[r.Dir] || r.End <= r.Offset {
				t.Fatalf("record %d..%d after one ending at %d", r.Offset, r.End, ends[r.Dir])
			}
			ends[r.Dir] = r.End
			if r.Lost {
				if r.Plaintext != nil {
					t.Fatal("a lost record has plaintext")
				}
				return
			}
			if r.ContentType == 23 && !bytes.Contains(s.applicationData[r.Dir], r.Plaintext) {
				t.Fatalf("decrypted %d bytes the connection never sent", len(r.Plaintext))
			}
		}})
		for _, p := range fuzzPieces(client, server, plan) {
			d.Write(p.dir, p.offset, p.data, p.length, 0)
		}
		d.Close()
		summary := d.Summary()
		for dir, side := range summary.Dirs {
			if side.StoppedAt >= 0 && side.StopReason == "" {
				t.Fatalf("direction %d stopped without a reason", dir)
			}
		}
	})
}
