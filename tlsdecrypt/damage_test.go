package tlsdecrypt

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
)

// segmented splits the wire log's writes into segments of at most mss bytes, as
// TCP would send them.
func segmented(l *wireLog, mss int) []piece {
	var out []piece
	for _, p := range wirePieces(l) {
		for start := 0; start < len(p.data); start += mss {
			end := min(start+mss, len(p.data))
			out = append(out, piece{p.dir, p.offset + int64(start), p.data[start:end], end - start})
		}
	}
	return out
}

// recordStarts walks a stream's record headers: an independent reading of where
// records lie.
func recordStarts(stream []byte) []int64 {
	var starts []int64
	for at := 0; at+5 <= len(stream); at += 5 + int(binary.BigEndian.Uint16(stream[at+3:])) {
		starts = append(starts, int64(at))
	}
	return starts
}

// withoutSegment drops the segment of direction dir that holds stream offset at.
func withoutSegment(pieces []piece, dir flow.Dir, at int64) (kept []piece, dropped piece) {
	for _, p := range pieces {
		if p.dir == dir && p.offset <= at && at < p.offset+int64(p.length) {
			dropped = p
			continue
		}
		kept = append(kept, p)
	}
	return kept, dropped
}

func TestCaptureHoles(t *testing.T) {
	cert := testCertificate(t, false)
	request := []byte("GET /big HTTP/1.1\r\nHost: server.test\r\n\r\n")
	response := make([]byte, 100000)
	for i := range response {
		response[i] = byte(i * 7)
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		suite := uint16(0)
		if version == tls.VersionTLS12 {
			suite = tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
		}
		session := runGoTLS(t, version, suite, cert, request, response, len(response))
		server := session.wire.stream(flow.ToClient)
		starts := recordStarts(server)
		pieces := segmented(session.wire, 1448)
		t.Run(tls.VersionName(version)+"/hole inside a record", func(t *testing.T) {
			// A segment in the middle of the response, wholly inside one record.
			var target int64 = -1
			for i := len(starts) - 3; i > 0 && target < 0; i-- {
				for _, p := range pieces {
					if p.dir == flow.ToClient && p.offset > starts[i]+5 && p.offset+int64(p.length) < starts[i+1] {
						target = p.offset
						break
					}
				}
			}
			if target < 0 {
				t.Fatal("no segment wholly inside a record")
			}
			kept, dropped := withoutSegment(pieces, flow.ToClient, target)
			got := runDecryptor(session.keys, kept)
			var lost []Record
			for _, r := range got.records {
				if r.Lost {
					lost = append(lost, r)
				}
			}
			if len(lost) != 1 || lost[0].Offset > dropped.offset || lost[0].End < dropped.offset+int64(dropped.length) {
				t.Fatalf("lost records %+v, want the one record holding %d..%d", lost, dropped.offset, dropped.offset+int64(dropped.length))
			}
			if lost[0].Reason != ReasonNotCaptured || got.summary.Dirs[flow.ToClient].StoppedAt != -1 {
				t.Errorf("lost for %q, stopped at %d; want %q and no stop", lost[0].Reason, got.summary.Dirs[flow.ToClient].StoppedAt, ReasonNotCaptured)
			}
			// The plaintext around the gap is the response's, in place.
			gapLength := lost[0].PlaintextLength
			if version == tls.VersionTLS12 {
				recordBody := int(lost[0].End - lost[0].Offset - 5)
				if gapLength != recordBody-8-16 {
					t.Errorf("lost TLS 1.2 GCM record's plaintext length %d, want %d", gapLength, recordBody-8-16)
				}
			} else if gapLength != -1 {
				t.Errorf("lost TLS 1.3 record's plaintext length %d, want -1 (padding hides it)", gapLength)
			}
			before, after := splitAppData(got.records, flow.ToClient)
			if !bytes.HasPrefix(response, before) || !bytes.HasSuffix(response, after) || len(after) == 0 {
				t.Errorf("decrypted %d bytes before and %d after the gap: not the response's start and end", len(before), len(after))
			}
			if version == tls.VersionTLS12 && len(before)+gapLength+len(after) != len(response) {
				t.Errorf("%d + %d + %d bytes, want the response's %d", len(before), gapLength, len(after), len(response))
			}
			if !bytes.Equal(got.appData[flow.ToServer], request) {
				t.Errorf("request %q, want %q", got.appData[flow.ToServer], request)
			}
		})
		t.Run(tls.VersionName(version)+"/hole over a record header", func(t *testing.T) {
			header := starts[len(starts)-3]
			kept, _ := withoutSegment(pieces, flow.ToClient, header)
			got := runDecryptor(session.keys, kept)
			dir := got.summary.Dirs[flow.ToClient]
			// The header lost is the first one at or after the dropped segment's start.
			var want int64 = -1
			for _, p := range pieces {
				if p.dir == flow.ToClient && p.offset <= header && header < p.offset+int64(p.length) {
					for _, start := range starts {
						if start >= p.offset {
							want = start
							break
						}
					}
				}
			}
			if dir.StoppedAt != want || !strings.Contains(dir.StopReason, "record header was not captured") {
				t.Errorf("stopped at %d (%q), want at %d for the header not captured", dir.StoppedAt, dir.StopReason, want)
			}
			for _, r := range got.records {
				if r.Dir == flow.ToClient && r.End > want && !r.Lost {
					t.Errorf("record %d..%d decrypted past the lost header at %d", r.Offset, r.End, want)
				}
			}
			before, _ := splitAppData(got.records, flow.ToClient)
			if !bytes.HasPrefix(response, before) {
				t.Error("plaintext before the stop is not the response's start")
			}
		})
		t.Run(tls.VersionName(version)+"/hole filled late", func(t *testing.T) {
			// The segment over a record header arrives after the segments that
			// follow it, as a retransmission would: it fills the hole, and the
			// connection decrypts as if nothing had happened.
			header := starts[len(starts)-3]
			kept, dropped := withoutSegment(pieces, flow.ToClient, header)
			late := append(append([]piece(nil), kept...), dropped)
			// Retransmitted copies of bytes already handed over are ignored.
			late = append(late, kept[len(kept)/2], kept[len(kept)/3])
			checkSession(t, session, runDecryptor(session.keys, late))

			// With no room to wait, the hole stays a hole.
			var stopped Summary
			d := New(Config{Keys: session.keys, MaxPendingBytes: 2000})
			for _, p := range late {
				d.Write(p.dir, p.offset, p.data, p.length, 0)
			}
			d.Close()
			stopped = d.Summary()
			if stopped.Dirs[flow.ToClient].StoppedAt < 0 {
				t.Errorf("2000 bytes of room: the hole over the header at %d was waited for: %+v", header, stopped.Dirs[flow.ToClient])
			}
		})
		t.Run(tls.VersionName(version)+"/snaplen", func(t *testing.T) {
			var cut []piece
			for _, p := range pieces {
				p.data = p.data[:min(len(p.data), 200)]
				cut = append(cut, p)
			}
			got := runDecryptor(session.keys, cut)
			for _, r := range got.records {
				if r.Lost {
					continue
				}
				// A decrypted record was captured whole: all its bytes lie in the
				// captured prefixes.
				for at := r.Offset; at < r.End; at++ {
					if !captured(cut, r.Dir, at) {
						t.Fatalf("record %d..%d decrypted, but byte %d was not captured", r.Offset, r.End, at)
					}
				}
			}
			if dir := got.summary.Dirs[flow.ToClient]; dir.StoppedAt < 0 && dir.Lost == 0 {
				t.Errorf("the response's records under a 200-byte snaplen: none stopped or lost: %+v", dir)
			}
			before, _ := splitAppData(got.records, flow.ToClient)
			if !bytes.HasPrefix(response, before) {
				t.Error("plaintext under the snaplen is not the response's start")
			}
		})
	}
}

// captured reports whether stream byte at of dir was in a piece's captured bytes.
func captured(pieces []piece, dir flow.Dir, at int64) bool {
	for _, p := range pieces {
		if p.dir == dir && p.offset <= at && at < p.offset+int64(len(p.data)) {
			return true
		}
	}
	return false
}

// splitAppData returns a direction's application data before and after its first
// lost record.
func splitAppData(records []Record, dir flow.Dir) (before, after []byte) {
	gap := false
	for _, r := range records {
		if r.Dir != dir {
			continue
		}
		if r.Lost {
			gap = true
			continue
		}
		if r.ContentType != 23 {
			continue
		}
		if gap {
			after = append(after, r.Plaintext...)
		} else {
			before = append(before, r.Plaintext...)
		}
	}
	return before, after
}

func TestWrongAndMissingKeys(t *testing.T) {
	cert := testCertificate(t, false)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		first := runGoTLS(t, version, 0, cert, []byte("one"), []byte("response one"), 100)
		second := runGoTLS(t, version, 0, cert, []byte("two"), []byte("response two"), 100)
		t.Run(tls.VersionName(version)+"/no keys", func(t *testing.T) {
			for _, keys := range []*keylog.Log{nil, keylog.New(), second.keys} {
				got := runDecryptor(keys, wirePieces(first.wire))
				if got.summary.Keys || len(got.records) != 0 || got.summary.NoKeysReason == "" || len(got.summary.Problems) != 0 {
					t.Errorf("without the connection's keys: %d records, summary %+v", len(got.records), got.summary)
				}
			}
		})
		t.Run(tls.VersionName(version)+"/wrong keys", func(t *testing.T) {
			// The other session's secrets filed under this session's client random.
			random := firstClientRandom(t, first)
			wrong := keylog.New()
			for _, label := range []string{keylog.ClientRandom, keylog.ClientHandshakeTrafficSecret, keylog.ServerHandshakeTrafficSecret,
				keylog.ClientTrafficSecret0, keylog.ServerTrafficSecret0} {
				if secret, ok := second.keys.Secret(label, firstClientRandom(t, second)); ok {
					wrong.Add(label, random, secret)
				}
			}
			got := runDecryptor(wrong, wirePieces(first.wire))
			if !got.summary.Keys {
				t.Fatalf("keys not found: %+v", got.summary)
			}
			for _, r := range got.records {
				t.Errorf("record %d..%d reported under the wrong keys (lost=%t)", r.Offset, r.End, r.Lost)
			}
			for dir, summary := range got.summary.Dirs {
				if summary.StoppedAt < 0 || !strings.Contains(summary.StopReason, "did not decrypt") {
					t.Errorf("dir %d: %+v, want a stop at the first protected record", dir, summary)
				}
			}
		})
	}
}

// firstClientRandom reads the client random from the ClientHello at the start of
// the client's stream (record header 5, handshake header 4, version 2).
func firstClientRandom(t *testing.T, s goSession) []byte {
	t.Helper()
	stream := s.wire.stream(flow.ToServer)
	if len(stream) < 43 || stream[5] != 1 {
		t.Fatal("the client's stream does not start with a ClientHello")
	}
	return stream[11:43]
}

func TestPieceBoundariesAndOrderDoNotMatter(t *testing.T) {
	cert := testCertificate(t, false)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		session := runGoTLS(t, version, 0, cert, bytes.Repeat([]byte("q"), 3000), bytes.Repeat([]byte("r"), 50000), 7000)
		want := runDecryptor(session.keys, wirePieces(session.wire))
		checkSession(t, session, want)
		var bytewise []piece
		for _, p := range wirePieces(session.wire) {
			for i := range p.data {
				bytewise = append(bytewise, piece{p.dir, p.offset + int64(i), p.data[i : i+1], 1})
			}
		}
		// The client's whole stream first: its protected records wait for the
		// server's hello.
		var clientFirst []piece
		for _, dir := range []flow.Dir{flow.ToServer, flow.ToClient} {
			for _, p := range wirePieces(session.wire) {
				if p.dir == dir {
					clientFirst = append(clientFirst, p)
				}
			}
		}
		for name, pieces := range map[string][]piece{"one byte at a time": bytewise, "client first": clientFirst} {
			got := runDecryptor(session.keys, pieces)
			if !reflect.DeepEqual(recordsWithoutTimes(got.records), recordsWithoutTimes(want.records)) ||
				!reflect.DeepEqual(got.summary, want.summary) {
				t.Errorf("%s %s: records or summary differ from whole writes", tls.VersionName(version), name)
			}
		}
	}
}

// recordsWithoutTimes lists the records by direction (the order across
// directions follows the feeding order) without their times.
func recordsWithoutTimes(records []Record) [2][]Record {
	var out [2][]Record
	for _, r := range records {
		r.FirstNs, r.LastNs = 0, 0
		out[r.Dir] = append(out[r.Dir], r)
	}
	return out
}
