package model

import (
	"testing"
)

// Page loads over an ideal path (RTT 100 ms, no rate limit, no host delay, an ACK
// per segment) whose rounds can be counted by hand: MSS 1448, so N segments are
// N × 1448 bytes.

func idealPath(iw int, tls string) Params {
	return Params{RTTNs: 100e6, IW: iw, TLS: tls}
}

const seg = DefaultMSS

// TestSimulateLaterRequests: a second request sent after the first response has
// arrived comes in the next round, with the window the first one grew; a request
// sent before the connection is ready waits for it.
func TestSimulateLaterRequests(t *testing.T) {
	// Cleartext, IW 10. The first response of 10 segments fills round 1 (the
	// window, limited: it grows to 20); the second, of 15 segments, asked for at
	// 300 ms (after round 1 arrived at 200), fits in round 2.
	res, err := Simulate(Params{RTTNs: 100e6, IW: 10, SizeBytes: 10 * seg, Requests: []Request{{AtNs: 300e6, Bytes: 15 * seg}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Responses) != 2 {
		t.Fatalf("%d responses", len(res.Responses))
	}
	first, second := res.Responses[0], res.Responses[1]
	if first.FirstRound != 1 || first.LastRound != 1 || second.FirstRound != 2 || second.LastRound != 2 || second.SentMs != 300 || second.LastByteMs != 400 {
		t.Errorf("responses %+v, %+v: want round 1, then round 2 sent at 300 ms and arrived at 400", first, second)
	}
	// Asked for at 0, before the handshake is done (at 100 ms): sent at 100.
	res, err = Simulate(Params{RTTNs: 100e6, IW: 10, SizeBytes: 1000, RequestAtNs: 50e6})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Responses[0]; r.SentMs != 100 || r.LastByteMs != 200 {
		t.Errorf("response %+v: want sent at 100 ms (the connection ready), arrived at 200", r)
	}
	// A preconnected TLS 1.3 connection whose server sends two tickets when the
	// Finished arrives: the tickets take round 2 (with the Finished sent alone at
	// 200 ms); the request at 500 ms is answered in round 3.
	res, err = Simulate(Params{RTTNs: 100e6, IW: 10, TLS: "1.3", ChainBytes: 2000, SizeBytes: 5000, RequestAtNs: 500e6, ServerPostHandshakeSegments: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Responses[0]; res.ReadyMs != 200 || r.FirstRound != 3 || r.SentMs != 500 || r.LastByteMs != 600 {
		t.Errorf("ready at %.1f, response %+v: want ready at 200, round 3 sent at 500 and arrived at 600", res.ReadyMs, r)
	}
	// The same with the request at once: the tickets and the response share round 2,
	// and take 2 of its 10 packets: a response of 9 segments spills one into round 3.
	res, err = Simulate(Params{RTTNs: 100e6, IW: 10, TLS: "1.3", ChainBytes: 2000, SizeBytes: 9*seg - 200, ServerPostHandshakeSegments: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Responses[0]; r.FirstRound != 2 || r.LastRound != 3 {
		t.Errorf("response %+v: want rounds 2-3 (two tickets ahead of it)", r)
	}
}

// TestPageLoad checks the page model on loads counted by hand.
func TestPageLoad(t *testing.T) {
	tests := []struct {
		name string
		pp   PageParams
		want int // critical path round trips
		// how the blocking resources travel: connection and last round
		conns, lastRounds []int
	}{
		{
			// TCP 1, the document's round 1 names the stylesheet, which comes on
			// the same connection in round 2: 3.
			name: "h2, one round each",
			pp:   PageParams{Path: idealPath(10, ""), HTTP2: true, DocumentBytes: 8 * seg, Resources: []PageResource{{Name: "css", Bytes: 5 * seg}}},
			want: 3, conns: []int{1}, lastRounds: []int{2},
		},
		{
			// The document (1 round) is whole when named: the stylesheet goes on
			// its connection (round 2), the script on the preconnect (its round
			// 1): both 1 round after the document's: 3.
			name: "h1, document's connection and the preconnect",
			pp: PageParams{Path: idealPath(10, ""), DocumentBytes: 8 * seg,
				Resources: []PageResource{{Name: "css", Bytes: 5 * seg}, {Name: "js", Bytes: 5 * seg}}},
			want: 3, conns: []int{1, 2}, lastRounds: []int{2, 1},
		},
		{
			// The document takes rounds 1-2 (15 segments at IW 10); round 1 names
			// the stylesheet, which takes the preconnect (3 round trips); the
			// script waits for the document's connection (free after round 2,
			// before a new connection would be ready) and comes in its round 3:
			// TCP 1 + rounds 1-3 = 4.
			name: "h1, late binding to the document's connection",
			pp: PageParams{Path: idealPath(10, ""), DocumentBytes: 15 * seg,
				Resources: []PageResource{{Name: "css", Bytes: 5 * seg}, {Name: "js", Bytes: 5 * seg}}},
			want: 4, conns: []int{2, 1}, lastRounds: []int{1, 3},
		},
		{
			// TLS 1.3 with a 2000-byte chain: the server's flight (about 2.5 KB)
			// fits in IW 10: TCP 1 + TLS 1, the document in round 2. The
			// stylesheet on a second host: a new connection (TCP 1 + TLS 1) and
			// its round 2: 2 + 1 + 3 = 6.
			name: "h2, a second host",
			pp: PageParams{Path: Params{RTTNs: 100e6, IW: 10, TLS: "1.3", ChainBytes: 2000}, HTTP2: true, DocumentBytes: 5 * seg,
				Resources: []PageResource{{Name: "css", Bytes: 5 * seg, SecondHost: true}}},
			want: 6, conns: []int{3}, lastRounds: []int{2},
		},
		{
			// The browser reads the head only when the first 16 KB record is whole:
			// the document (15 segments) is named in its round 2, then the
			// stylesheet goes on its (free) connection in round 3: TCP 1 + 3 = 4.
			name: "h1, the head in a 16 KB record",
			pp: PageParams{Path: idealPath(10, ""), DocumentBytes: 15 * seg, FirstRecordBytes: 16384,
				Resources: []PageResource{{Name: "css", Bytes: 5 * seg}}},
			want: 4, conns: []int{1}, lastRounds: []int{3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PageLoad(tt.pp)
			if err != nil {
				t.Fatal(err)
			}
			if got.CriticalPathRoundTrips != tt.want {
				t.Errorf("critical path %d round trips, want %d (document %+v, resources %+v)", got.CriticalPathRoundTrips, tt.want, got.Document, got.Resources)
			}
			for i, r := range got.Resources {
				if r.Connection != tt.conns[i] || r.LastRound != tt.lastRounds[i] {
					t.Errorf("%s: connection %d last round %d, want %d and %d", r.Name, r.Connection, r.LastRound, tt.conns[i], tt.lastRounds[i])
				}
			}
		})
	}
}

// TestPageLoadRange: after a document of 5 segments (half the window: it does
// not grow), a stylesheet of exactly the window, 10 segments, is on a boundary (a
// few bytes more take a round more); one of 4 segments is not.
func TestPageLoadRange(t *testing.T) {
	pp := PageParams{Path: idealPath(10, ""), HTTP2: true, DocumentBytes: 5 * seg, Resources: []PageResource{{Name: "css", Bytes: 10 * seg}}}
	lo, hi, err := PageLoadRange(pp, 2*seg)
	if err != nil {
		t.Fatal(err)
	}
	if lo != 3 || hi != 4 {
		t.Errorf("a stylesheet of exactly the window: range %d-%d, want 3-4", lo, hi)
	}
	pp.Resources[0].Bytes = 4 * seg
	if lo, hi, err = PageLoadRange(pp, 2*seg); err != nil || lo != 3 || hi != 3 {
		t.Errorf("a stylesheet of 4 segments: range %d-%d (%v), want 3", lo, hi, err)
	}
	// HTTP/1.1, the document (8 segments) whole in the round that names the
	// resources: its connection (window grown to 18) and the preconnect (10) are
	// free at the same moment. The stylesheet of 15 segments on the document's
	// takes one round (TCP 1 + 1 + 1 = 3), on the preconnect two (4); the
	// script of one segment one either way. Which Chromium binds first is a race:
	// PageLoad says 3 (its usual choice), the range 3-4, with no slack at all.
	pp = PageParams{Path: idealPath(10, ""), DocumentBytes: 8 * seg,
		Resources: []PageResource{{Name: "css", Bytes: 15 * seg}, {Name: "js", Bytes: seg}}}
	if pred, err := PageLoad(pp); err != nil || pred.CriticalPathRoundTrips != 3 || pred.Resources[0].Connection != 1 {
		t.Errorf("the tie bound as usual: %+v (%v), want 3 round trips with the stylesheet on connection 1", pred, err)
	}
	if lo, hi, err = PageLoadRange(pp, 0); err != nil || lo != 3 || hi != 4 {
		t.Errorf("connections free at the same moment: range %d-%d (%v), want 3-4", lo, hi, err)
	}
	// A script as large as the stylesheet: one of them takes the preconnect
	// either way, so the race changes nothing: 4.
	pp.Resources[1].Bytes = 15 * seg
	if lo, hi, err = PageLoadRange(pp, 0); err != nil || lo != 4 || hi != 4 {
		t.Errorf("two resources of 15 segments: range %d-%d (%v), want 4", lo, hi, err)
	}
	if _, err := PageLoad(PageParams{Path: idealPath(10, "")}); err == nil {
		t.Error("a page without a document was predicted")
	}
}
