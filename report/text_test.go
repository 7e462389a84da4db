package report

import (
	"bytes"
	"strings"
	"testing"
)

// writeCounter records each Write it is given.
type writeCounter struct{ writes []string }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestTextStreamWritesWholeConnections: the text stream gives its writer each
// connection (and the end) in one Write, the same text WriteText lays out for
// the whole Report, so that an escaping writer or a followed pipe sees whole
// connections and not a write per line.
func TestTextStreamWritesWholeConnections(t *testing.T) {
	rtt, first, last := 40.5, 41.0, 120.25
	r := &Report{Schema: Schema, Tool: "t", Source: Source{Kind: "file", Format: "pcap", Packets: 9}, Warnings: []string{"w"}}
	for i := range 3 {
		r.Connections = append(r.Connections, Connection{Index: i + 1, Client: "a", Server: "b", HandshakeRTTMs: &rtt, MSS: 1460,
			Rounds: []Round{{Index: 1, Segments: 10, Bytes: 14600, CumulativeBytes: 14600, Limit: LimitCwnd},
				{Index: 2, StartMs: 40.5, StartRTTs: 1, Segments: 3, LossProbeSegments: 1, Bytes: 2000, CumulativeBytes: 16600, Limit: "end"}},
			HTTP: []HTTPMessage{{Method: "GET", Path: "/\x1b[2J", Status: 200, Bytes: 16000, FirstByteMs: &first, LastByteMs: &last, Rounds: []int{1, 2}}}})
	}
	var sink writeCounter
	s := NewTextStream(&sink)
	for i := range r.Connections {
		if err := s.Connection(&r.Connections[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.End(r.Source, r.Warnings); err != nil {
		t.Fatal(err)
	}
	if len(sink.writes) != len(r.Connections)+1 {
		t.Fatalf("%d writes for %d connections and the end, want one each", len(sink.writes), len(r.Connections))
	}
	for i, w := range sink.writes[:len(r.Connections)] {
		if !strings.Contains(w, "Connection ") || !strings.Contains(w, "    round") {
			t.Errorf("write %d is not a whole connection:\n%s", i, w)
		}
	}
	var whole bytes.Buffer
	if err := WriteText(&whole, r); err != nil {
		t.Fatal(err)
	}
	streamed := strings.Join(sink.writes, "")
	// WriteText puts the source line first and each connection after a blank
	// line; the stream ends with the source line and the warnings.
	for _, want := range []string{"round  start ms", "2+1 probe", "0.3×", "HTTP GET /\\x1b[2J → 200, 16.0 KB, first byte at 41.0 ms, last at 120.2 ms, rounds 1-2", "warning: w"} {
		if !strings.Contains(streamed, want) {
			t.Errorf("streamed text lacks %q:\n%s", want, streamed)
		}
	}
	if !strings.Contains(whole.String(), strings.Join(sink.writes[:len(r.Connections)], "")) {
		t.Errorf("the streamed connections differ from WriteText's:\n%s\nwant within:\n%s", streamed, whole.String())
	}
}
