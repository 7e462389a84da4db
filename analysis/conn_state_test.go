package analysis

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
)

// TestStateByProtocol: a TLS connection keeps its rounds tracker alone and never
// holds the HTTP parsers; an HTTP one holds both, its tracker moved next to the
// parsers when its first bytes showed HTTP, with what it was set up with at
// the handshake (its rounds are held to the truth by the captures' tests
// elsewhere). Both give everything back when the report is built.
func TestStateByProtocol(t *testing.T) {
	for _, tc := range []struct {
		file  string
		proto int
	}{
		{"../testdata/captures/nginx-iw10-tls13.server.pcap", protoTLS},
		{"../testdata/captures/bbr-iw10-h1.server.pcap", protoHTTP},
	} {
		r, err := capture.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		env := &connEnv{packetsFrom: new(atomic.Int64)}
		env.packetsFrom.Store(1 << 62)
		env.finish = func(c *flow.Conn, ca *connAnalyzer) {
			if ca.proto != tc.proto {
				return
			}
			seen++
			switch {
			case ca.rounds == nil:
				t.Errorf("%s: connection %d has no rounds tracker", tc.file, c.Index)
			case tc.proto == protoTLS && (ca.data != nil || ca.plain == nil || ca.rounds != &ca.plain.rounds):
				t.Errorf("%s: TLS connection %d holds HTTP parsers (data %v, plain %v)", tc.file, c.Index, ca.data != nil, ca.plain != nil)
			case tc.proto == protoHTTP && (ca.data == nil || ca.plain != nil || ca.rounds != &ca.data.rounds || ca.http[0] != &ca.data.http[0]):
				t.Errorf("%s: HTTP connection %d: data %v, plain %v", tc.file, c.Index, ca.data != nil, ca.plain != nil)
			case ca.rounds.Count() == 0 || ca.rounds.Method() == "" || ca.rounds.SegmentSizeInferred():
				// Init's settings (the method, the segment cap from the
				// handshake) came with the tracker.
				t.Errorf("%s: connection %d: %d rounds, method %q, segment size inferred %v", tc.file, c.Index,
					ca.rounds.Count(), ca.rounds.Method(), ca.rounds.SegmentSizeInferred())
			}
			ca.Report(c, true)
			if ca.data != nil || ca.plain != nil || ca.rounds != nil || ca.http[0] != nil {
				t.Errorf("%s: connection %d kept its state after its report", tc.file, c.Index)
			}
		}
		tr := flow.NewTracker(func(c *flow.Conn) flow.Handler { return newConnAnalyzer(env, c) }, flow.ServerHint{})
		var p capture.Packet
		for r.Next(&p) == nil {
			tr.Add(&p)
		}
		tr.Flush()
		r.Close()
		if seen == 0 {
			t.Errorf("%s: no connection of the protocol", tc.file)
		}
	}
}

// TestStateSize holds the state of an HTTP connection (its rounds tracker
// and two parsers) to the 1,536-byte size class of Go's allocator: a capture
// holds one for each HTTP connection open at once.
func TestStateSize(t *testing.T) {
	if n := unsafe.Sizeof(dataState{}); n > 1536 {
		t.Errorf("an HTTP connection's state takes %d bytes, want at most 1536", n)
	}
}
