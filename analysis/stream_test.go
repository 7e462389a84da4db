package analysis

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestPacketListBounded: a connection with more packets than the cap keeps one
// list of at most the cap, spread over the whole connection (its first packet,
// then every stride-th), and says the stride.
func TestPacketListBounded(t *testing.T) {
	pkts := simulate(t, simPath{iw: 10, rttMs: 20, responseBytes: 3_000_000, vantage: "client"})
	full, err := Run(context.Background(), &sliceSource{pkts: pkts}, Options{Packets: true})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 300
	capped, err := Run(context.Background(), &sliceSource{pkts: pkts}, Options{Packets: true, PacketCap: limit})
	if err != nil {
		t.Fatal(err)
	}
	all, some := full.Connections[0], capped.Connections[0]
	if len(all.Packets) != len(pkts) || all.PacketStride != 0 {
		t.Fatalf("uncapped: %d packets (stride %d) of %d", len(all.Packets), all.PacketStride, len(pkts))
	}
	if len(some.Packets) > limit || some.PacketStride < 2 {
		t.Fatalf("capped at %d: %d packets, stride %d", limit, len(some.Packets), some.PacketStride)
	}
	for i, p := range some.Packets {
		if want := all.Packets[i*some.PacketStride]; p != want {
			t.Fatalf("packet %d of the capped list is %+v, want packet %d of the whole: %+v", i, p, i*some.PacketStride, want)
		}
	}
	if n := (len(pkts) + some.PacketStride - 1) / some.PacketStride; len(some.Packets) != n {
		t.Errorf("%d packets kept, want every %d-th of %d: %d", len(some.Packets), some.PacketStride, len(pkts), n)
	}
}

// TestStreamWarningsNameTheIdleTimeApplied: the trailing-packets warning names
// the idle time the stream applied (its default for 0), and none when the
// stream never reports an idle connection (a negative IdleNs): not the option
// as given.
func TestStreamWarningsNameTheIdleTimeApplied(t *testing.T) {
	for _, tc := range []struct {
		idleNs int64
		want   string
	}{
		{0, "a last RST or ACK, or a connection idle for 1h0m0s and reported)"},
		{90e9, "a last RST or ACK, or a connection idle for 1m30s and reported)"},
		{-1, "a last RST or ACK)"},
	} {
		st := NewStream(context.Background(), StreamOptions{IdleNs: tc.idleNs})
		stats, err := st.Close()
		if err != nil {
			t.Fatal(err)
		}
		stats.Trailing = 3
		got := StreamWarnings(stats)
		if len(got) != 1 || !strings.Contains(got[0], tc.want) {
			t.Errorf("IdleNs %d: %q, want it to say %q", tc.idleNs, got, tc.want)
		}
	}
}

// TestWildTimestamp: one record stamped 46 years late (a real capture with one
// record's seconds changed) is read at the time of the packet before it, with a
// warning that says so: the connection is whole, not cut by an idle timeout with
// its later packets set aside (they were: 24 packets "after their connection was
// over").
func TestWildTimestamp(t *testing.T) {
	data, err := os.ReadFile("../testdata/realworld/pp__one_tcp_stream.pcap")
	if err != nil {
		t.Fatal(err)
	}
	// Little-endian microsecond pcap: a 24-byte header, then 16-byte record headers.
	off := 24
	for i := 0; off+16 <= len(data); i++ {
		incl := int(binary.LittleEndian.Uint32(data[off+8:]))
		if i == 12 {
			ts := binary.LittleEndian.Uint32(data[off:])
			binary.LittleEndian.PutUint32(data[off:], ts+46*365*86400)
		}
		off += 16 + incl
	}
	path := filepath.Join(t.TempDir(), "wild.pcap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := File(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// tshark on the untouched file: one conversation (-z conv,tcp), the server's
	// tcp.len adding up to 12,444 bytes (no retransmission of its data).
	if len(rep.Connections) != 1 || rep.Connections[0].BytesToClient != 12444 {
		t.Fatalf("%d connections, the first with %d bytes from the server; want 1 with 12444", len(rep.Connections), rep.Connections[0].BytesToClient)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "46 years") {
		t.Errorf("warnings %q, want one naming the timestamp 46 years away", rep.Warnings)
	}
}

// TestHeldReportsSameAsEmitted: the reports File holds to the end are the ones
// the stream emits one at a time. The state a connection's report is built
// from is reused for later connections once the report is built (a pool of
// trackers, parsers and round slices): a report that still pointed into it
// would change while File holds it.
func TestHeldReportsSameAsEmitted(t *testing.T) {
	files := realWorldCaptures(t)
	ground, _ := filepath.Glob("../testdata/captures/rtt*.pcap")
	files = append(files, ground...)
	for _, path := range files {
		emitted := map[int]string{}
		for _, line := range bytes.Split(bytes.TrimSpace(streamJSON(t, path, 2, false)), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var c struct{ Index int }
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatal(err)
			}
			emitted[c.Index] = string(line)
		}
		rep, err := File(context.Background(), path, Options{})
		if err != nil && !errors.Is(err, capture.ErrDamaged) {
			t.Fatal(err)
		}
		if len(rep.Connections) != len(emitted) {
			t.Errorf("%s: File holds %d reports, the stream emitted %d", filepath.Base(path), len(rep.Connections), len(emitted))
			continue
		}
		for i := range rep.Connections {
			held, err := json.Marshal(&rep.Connections[i])
			if err != nil {
				t.Fatal(err)
			}
			if want := emitted[rep.Connections[i].Index]; string(held) != want {
				t.Errorf("%s: connection %d held to the end:\n%.600s\nas emitted:\n%.600s", filepath.Base(path), rep.Connections[i].Index, held, want)
				break
			}
		}
	}
}
