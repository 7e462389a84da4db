package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// streamJSON analyzes a capture with a Stream of the given number of shards and
// returns every report as emitted, one JSON line each.
func streamJSON(t *testing.T, path string, shards int, packets bool) []byte {
	t.Helper()
	r, err := capture.Open(path, capture.WithUDP())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	st := NewStream(context.Background(), StreamOptions{Options: Options{Packets: packets}, Shards: shards,
		Emit: func(c *report.Connection) error { return enc.Encode(c) }})
	if err := Feed(context.Background(), r, st); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestStreamSameAtAnyShardCount: the reports, their numbers and their order do not
// depend on how many shards share the work.
func TestStreamSameAtAnyShardCount(t *testing.T) {
	files := realWorldCaptures(t)
	ground, _ := filepath.Glob("../testdata/captures/rtt*.pcap")
	files = append(files, ground...)
	for _, path := range files {
		one := streamJSON(t, path, 1, false)
		for _, shards := range []int{2, 5} {
			if got := streamJSON(t, path, shards, false); !bytes.Equal(got, one) {
				t.Errorf("%s: %d shards give other reports than one:\n%.600s\nvs\n%.600s", filepath.Base(path), shards, got, one)
				break
			}
		}
	}
}

// TestStreamCompactSYNsChangeNothing: keeping SYN-only connections compact (as a
// stream does unless per-packet lists are asked for) gives the same reports as
// keeping them whole.
func TestStreamCompactSYNsChangeNothing(t *testing.T) {
	for _, path := range realWorldCaptures(t) {
		compact := streamJSON(t, path, 1, false)
		var whole []byte
		for _, line := range bytes.SplitAfter(streamJSON(t, path, 1, true), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var c report.Connection
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatal(err)
			}
			c.Packets = nil
			if c.QUIC != nil {
				c.QUIC.PacketLog = nil
			}
			b, _ := json.Marshal(c)
			whole = append(append(whole, b...), '\n')
		}
		if !bytes.Equal(compact, whole) {
			t.Errorf("%s: compact SYN-only connections change the reports:\n%.600s\nvs\n%.600s", filepath.Base(path), compact, whole)
		}
	}
}
