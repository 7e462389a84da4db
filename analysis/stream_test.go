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

// TestStreamPacketsAfter: once PacketsAfter says the connections after one
// are not wanted, the connections up to it keep their whole packet lists and
// every report is otherwise the same; connections that begin later keep none.
// The input is 200 connections one after another, of some 400 packets each:
// many batches, so that the first connections are emitted while later ones
// run. How many begin before connection 3 is emitted depends on how far the
// reader got meanwhile: at most some 11 batches of 4,096 packets (4 queued for
// each shard, 4 results queued for the merger, those being worked on), some
// 115 connections; far fewer unless the machine is busy (40 connections and
// a bound of 30 dropped once failed so, in a run of every package at once).
func TestStreamPacketsAfter(t *testing.T) {
	one := simulate(t, simPath{iw: 10, rttMs: 20, responseBytes: 500_000, vantage: "client"})
	span := one[len(one)-1].TimestampNs - one[0].TimestampNs + 1e9
	var pkts []capture.Packet
	const n = 200
	for k := range n {
		for _, p := range one {
			if p.SrcPort == 443 || p.SrcPort == 80 {
				p.DstPort += uint16(k)
			} else {
				p.SrcPort += uint16(k)
			}
			p.TimestampNs += int64(k) * span
			pkts = append(pkts, p)
		}
	}
	const wanted = 3 // the page holds connections 1 to 3
	run := func(after func(int) bool) map[int]report.Connection {
		conns := map[int]report.Connection{}
		// The simulated connections do not close: each is finished idle, in
		// the second between it and the next.
		st := NewStream(context.Background(), StreamOptions{Options: Options{Packets: true}, PacketsAfter: after, IdleNs: 5e8,
			Emit: func(c *report.Connection) error { conns[c.Index] = *c; return nil }})
		if err := Feed(context.Background(), &sliceSource{pkts: pkts}, st); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Close(); err != nil {
			t.Fatal(err)
		}
		return conns
	}
	whole := run(nil)
	asked := 0
	some := run(func(index int) bool { asked++; return index < wanted })
	if len(whole) != n || len(some) != n {
		t.Fatalf("%d and %d connections, want %d", len(whole), len(some), n)
	}
	dropped := 0
	for index, w := range whole {
		s := some[index]
		if len(w.Packets) != len(one) {
			t.Fatalf("connection %d: %d packets listed of %d", index, len(w.Packets), len(one))
		}
		if index <= wanted && len(s.Packets) != len(w.Packets) {
			t.Errorf("connection %d is wanted but kept %d of its %d packets", index, len(s.Packets), len(w.Packets))
		}
		if len(s.Packets) == 0 {
			dropped++
		}
		s.Packets, s.PacketStride, w.Packets, w.PacketStride = nil, 0, nil, 0
		a, _ := json.Marshal(s)
		b, _ := json.Marshal(w)
		if !bytes.Equal(a, b) {
			t.Errorf("connection %d's report changed beside its packets:\n%.600s\nvs\n%.600s", index, a, b)
		}
	}
	// Connections 4 to 200 are not wanted; those that began after connection
	// 3 was emitted (all but those the reader had reached, above) keep nothing.
	if asked == 0 || dropped < n-wanted-120 {
		t.Errorf("PacketsAfter asked %d times; %d of %d unwanted connections dropped their packets", asked, dropped, n-wanted)
	}
	t.Logf("%d of %d unwanted connections dropped their packets", dropped, n-wanted)
}
