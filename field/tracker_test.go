package field

import (
	"net/netip"
	"testing"
	"time"

	"github.com/slowstart/slowstart/ktcp"
)

// follow feeds events to a tracker and returns the records it handed over.
func follow(t *testing.T, maxConns, exchange int, events []ktcp.Event, sweepAt ...int64) ([]*record, *tracker) {
	t.Helper()
	var out []*record
	tr := newTracker(maxConns, exchange, int64(time.Second), int64(time.Minute), func(ns int64) int64 { return ns }, func(r *record) { out = append(out, r) })
	for i := range events {
		tr.feed(&events[i])
	}
	for _, at := range sweepAt {
		tr.sweep(at)
	}
	return out, tr
}

var (
	testServer = netip.MustParseAddrPort("192.0.2.1:443")
	testClient = netip.MustParseAddrPort("198.51.100.7:50000")
)

func synthetic(cookie uint64, iw, size int) SyntheticConn {
	return SyntheticConn{Cookie: cookie, Client: testClient, Server: testServer, StartNs: 1e9, RTTNs: 50e6, IW: iw, MSS: 1448,
		ResponseBytes: size, ISN: 0xfffff000 + uint32(cookie)}
}

// TestTrackerSlowStart: responses made by SyntheticConn (a clean path, every
// segment acknowledged) come out in the rounds slow start gives. By hand, at
// IW 10 and MSS 1448: 2,000 bytes fit round 1 (end); 30,000 bytes are 21
// segments, 10 then 11 (cwnd 10 then 20); 120,000 bytes are 83 segments, 10,
// 20, 40, 13 (cwnd 10, 20, 40, 80). The sequence numbers wrap inside the
// responses.
func TestTrackerSlowStart(t *testing.T) {
	for _, c := range []struct {
		size   int
		bytes  []int
		cwnd   []int
		limit  string
		saves  int // IW 32's saving in round trips
		respMs float64
	}{
		{2000, []int{2000}, []int{10}, LimitEnd, 0, 50},
		{30000, []int{14480, 15520}, []int{10, 20}, LimitCwnd, 1, 100},
		{120000, []int{14480, 28960, 57920, 18640}, []int{10, 20, 40, 80}, LimitCwnd, 2, 200},
	} {
		recs, tr := follow(t, 10, 1, synthetic(1, 10, c.size).Events(nil))
		if len(recs) != 1 || tr.open() != 0 {
			t.Fatalf("%d bytes: %d records, %d still open", c.size, len(recs), tr.open())
		}
		conn := recs[0].conn("net", []int{32})
		if conn.RoundTrips == nil || *conn.RoundTrips != len(c.bytes) || conn.CutShort != "" {
			t.Fatalf("%d bytes: %+v", c.size, conn)
		}
		for i, r := range conn.Rounds {
			if r.Bytes != c.bytes[i] || r.CwndSegments != c.cwnd[i] {
				t.Errorf("%d bytes, round %d: %d bytes under %d, want %d under %d", c.size, i+1, r.Bytes, r.CwndSegments, c.bytes[i], c.cwnd[i])
			}
		}
		if conn.Round1Limit != c.limit || conn.InitialWindow != 10 || conn.ResponseBytes != int64(c.size) {
			t.Errorf("%d bytes: limit %s, IW %d, %d bytes", c.size, conn.Round1Limit, conn.InitialWindow, conn.ResponseBytes)
		}
		if *conn.HandshakeRTTMs != 50 {
			t.Errorf("%d bytes: handshake RTT %v", c.size, *conn.HandshakeRTTMs)
		}
		// The last ACK arrives a few µs after the round's first: the response
		// took its rounds' round trips.
		if conn.ResponseMs == nil || *conn.ResponseMs < c.respMs || *conn.ResponseMs > c.respMs+1 {
			t.Errorf("%d bytes: response %v ms, want about %v", c.size, ptr(conn.ResponseMs), c.respMs)
		}
		if len(conn.Savings) != 1 || conn.Savings[0].RoundTrips != c.saves || conn.Savings[0].Ms != float64(c.saves)*50 {
			t.Errorf("%d bytes: savings %+v, want IW 32 to save %d round trips", c.size, conn.Savings, c.saves)
		}
	}
}

// cutAt keeps the events before the first one after ns, and appends a state
// change of the server's socket at ns.
func cutAt(events []ktcp.Event, ns int64, to ktcp.State) []ktcp.Event {
	var out []ktcp.Event
	var last ktcp.Event
	for _, ev := range events {
		if ev.MonoNs > ns {
			break
		}
		out = append(out, ev)
		last = ev
	}
	last.Kind, last.MonoNs, last.OldState, last.NewState = ktcp.KindState, ns, ktcp.StateEstablished, to
	last.Segment = ktcp.Segment{}
	return append(out, last)
}

// TestTrackerCutShort: a response whose end the kernel did not report is
// handed over cut short, its round trips unknown: the server closed its side
// with data unacknowledged (FIN_WAIT1: no tcp_probe from then on), the client
// closed, or a reset.
func TestTrackerCutShort(t *testing.T) {
	events := synthetic(1, 10, 120000).Events(nil)
	// 120 ms after the handshake: rounds 1 and 2 closed (at 50.5 and 100.5 ms).
	for state, want := range map[ktcp.State]string{ktcp.StateFinWait1: CutServerClosed, ktcp.StateCloseWait: CutClientClosed, ktcp.StateClose: CutReset} {
		recs, _ := follow(t, 10, 1, cutAt(events, 1e9+120e6, state))
		if len(recs) != 1 {
			t.Fatalf("%s: %d records", state, len(recs))
		}
		c := recs[0].conn("net", nil)
		if c.CutShort != want || c.RoundTrips != nil || c.ResponseMs != nil || len(c.Rounds) != 2 || c.Round1Limit != LimitCwnd {
			t.Errorf("%s: %+v, want cut short (%s) with 2 rounds known", state, c, want)
		}
		if c.ResponseBytes != 120000 {
			t.Errorf("%s: response of %d bytes, want what the application wrote, 120000", state, c.ResponseBytes)
		}
	}
}

// TestTrackerNextRequest: on a kept-alive connection the next request ends
// the first response, which is handed over whole; the second is not followed.
func TestTrackerNextRequest(t *testing.T) {
	events := synthetic(1, 10, 30000).Events(nil)
	events = events[:len(events)-2] // no FIN
	next := events[len(events)-1]
	next.MonoNs += 5e6
	next.Sock.SndUna, next.Sock.SndNxt = next.Segment.AckSeq, next.Segment.AckSeq
	next.Segment = ktcp.Segment{Seq: 1081, EndSeq: 1161, AckSeq: next.Segment.AckSeq, Flags: ktcp.FlagACK | ktcp.FlagPSH}
	more := next
	more.MonoNs += 1e6
	more.Sock.SndNxt += 10000
	more.Sock.WriteSeq += 20000
	more.Segment = ktcp.Segment{Seq: 1161, EndSeq: 1161, AckSeq: next.Segment.AckSeq + 1448, Flags: ktcp.FlagACK}
	recs, tr := follow(t, 10, 1, append(events, next, more))
	if len(recs) != 1 || tr.open() != 0 {
		t.Fatalf("%d records, %d open", len(recs), tr.open())
	}
	c := recs[0].conn("net", nil)
	if c.CutShort != "" || *c.RoundTrips != 2 || c.ResponseBytes != 30000 {
		t.Errorf("first response %+v, want 30000 bytes in 2 round trips", c)
	}
}

// TestTrackerQuiet: a response all acknowledged, the connection kept open, is
// handed over once nothing more came for Quiet (1 s here), not before.
func TestTrackerQuiet(t *testing.T) {
	events := synthetic(1, 10, 30000).Events(nil)
	events = events[:len(events)-2]
	last := events[len(events)-1].MonoNs
	recs, tr := follow(t, 10, 1, events, last+int64(500*time.Millisecond))
	if len(recs) != 0 || tr.open() != 1 {
		t.Fatalf("handed over after 0.5 s of quiet: %d records", len(recs))
	}
	tr.sweep(last + int64(time.Second))
	if tr.open() != 0 || tr.counts.Finished != 1 {
		t.Errorf("not handed over after 1 s of quiet: %+v", tr.counts)
	}
}

// TestTrackerExchange: with Exchange 2, the response is the answer to the
// client's second flight (TLS 1.3's first HTTP response: the first flight is
// the ClientHello, answered by the handshake flight).
func TestTrackerExchange(t *testing.T) {
	events := synthetic(1, 10, 4000).Events(nil) // the handshake flight: 4000 bytes
	events = events[:len(events)-2]
	tail := events[len(events)-1]
	// The client's Finished and request; the server answers 30,000 bytes.
	second := synthetic(1, int(tail.Sock.SndCwnd), 30000)
	second.ISN = tail.Sock.SndNxt - 1
	second.StartNs = tail.MonoNs + 1e6
	more := second.Events(nil)[1:] // without the handshake
	recs, _ := follow(t, 10, 2, append(events, more...))
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	c := recs[0].conn("net", nil)
	window := int(tail.Sock.SndCwnd) // grown by the handshake flight's ACKs
	if c.Exchange != 2 || c.ResponseBytes != 30000 || c.InitialWindow != 10 || c.CwndAtRequestSegments != window || window <= 10 {
		t.Errorf("%+v: want the second exchange's 30000 bytes, IW 10, a window of %d (> 10) when its request came", c, window)
	}
	if *c.RoundTrips != 2 || c.Rounds[0].Bytes != window*1448 {
		t.Errorf("rounds %+v, want %d segments then the rest", c.Rounds, window)
	}
}

// TestTrackerReceiveWindow: round 1 ends with data queued and the client's
// window full: rwnd-limited.
func TestTrackerReceiveWindow(t *testing.T) {
	events := synthetic(1, 10, 30000).Events(nil)
	for i := range events {
		events[i].Sock.SndWndBytes = 8000
	}
	// The synthetic kernel sends its window regardless; round 1 closes with
	// 14,480 bytes in flight against a window of 8,000 and data queued.
	recs, _ := follow(t, 10, 1, events)
	r := recs[0]
	if r.round1Limit != LimitRwnd {
		t.Errorf("round 1 limited by %q with a receive window of 8000 bytes full, want rwnd", r.round1Limit)
	}
}

// TestTrackerApplication: the application writes the response in two parts
// a round trip apart: round 1 ends with nothing queued and more comes later:
// application-limited.
func TestTrackerApplication(t *testing.T) {
	events := synthetic(1, 10, 30000).Events(nil)
	first := events[0].Sock.SndUna
	for i := range events {
		if events[i].MonoNs < 1e9+60e6 { // before the first round closed and a bit after
			events[i].Sock.WriteSeq = first + 10000
			if int32(events[i].Sock.SndNxt-(first+10000)) > 0 {
				events[i].Sock.SndNxt = first + 10000
			}
		}
	}
	recs, _ := follow(t, 10, 1, events)
	if r := recs[0]; r.round1Limit != LimitApp || r.rounds[0].Bytes() != 10000 {
		t.Errorf("round 1 of %d bytes limited by %q, want 10000 bytes limited by app", r.rounds[0].Bytes(), r.round1Limit)
	}
}

// TestTrackerBounds: past MaxConns new connections are counted, not
// followed; a connection closed before any request counts as such; events of
// sockets established before (unknown cookies) are ignored.
func TestTrackerBounds(t *testing.T) {
	a := synthetic(1, 10, 2000).Events(nil)
	b := synthetic(2, 10, 2000).Events(nil)
	c := synthetic(3, 10, 2000).Events(nil)
	events := append([]ktcp.Event{a[0], b[0]}, a[1:]...)
	events = append(events, b[1:]...)
	// A connection that closes before its request.
	events = append(events, c[0], cutAt(c[:1], c[0].MonoNs+1, ktcp.StateCloseWait)[1])
	recs, tr := follow(t, 1, 1, events)
	if len(recs) != 1 || tr.counts.Followed != 2 || tr.counts.NotFollowed != 1 || tr.counts.NoRequest != 1 {
		t.Errorf("%d records, counts %+v: want 1 record, 2 followed (the first and the third), 1 not followed, 1 without a request", len(recs), tr.counts)
	}
}
