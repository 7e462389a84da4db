package tlsdecrypt

import (
	"testing"

	"github.com/slowstart/slowstart/flow"
)

// BenchmarkDecryptConnection decrypts zeek's tls-1.2-stream-keylog connection
// (AES-256-GCM, about 160 KB from the server) in 1448-byte segments, each
// direction whole; the bytes per operation are both directions'.
func BenchmarkDecryptConnection(b *testing.B) {
	var session fuzzSession
	for _, s := range loadFuzzSessions(b) {
		if len(s.server) > len(session.server) {
			session = s
		}
	}
	var pieces []piece
	for dir, stream := range [2][]byte{session.client, session.server} {
		for at := 0; at < len(stream); at += 1448 {
			end := min(at+1448, len(stream))
			pieces = append(pieces, piece{flow.Dir(dir), int64(at), stream[at:end], end - at})
		}
	}
	b.SetBytes(int64(len(session.client) + len(session.server)))
	b.ReportAllocs()
	records := 0
	for b.Loop() {
		records = 0
		d := New(Config{Keys: session.keys, OnRecord: func(*Record) { records++ }})
		for _, p := range pieces {
			d.Write(p.dir, p.offset, p.data, p.length, 0)
		}
		d.Close()
	}
	if records == 0 {
		b.Fatal("nothing decrypted")
	}
}
