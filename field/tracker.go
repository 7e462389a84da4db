package field

import (
	"net/netip"

	"github.com/slowstart/slowstart/ktcp"
)

// The tracker follows server sockets from the kernel's events, one event at a
// time, until each one's first response is over, and hands each over as a
// record. It keeps one small state per connection it follows, and forgets a
// connection once its record is out: the kernel's later events for it are
// ignored (a cookie is never reused).

// phase of a followed connection.
type phase uint8

const (
	phaseWaiting  phase = iota // established, before the chosen client flight
	phaseResponse              // the chosen flight arrived: the response is under way
)

// connState is one followed connection.
type connState struct {
	local, remote     netip.AddrPort
	establishedMonoNs int64
	lastMonoNs        int64 // the last event
	rttUs             uint32
	mss, iw           uint32
	phase             phase
	flights           int    // client flights of data seen
	flightNxt         uint32 // the server's snd_nxt when the current client flight began
	requestMonoNs     int64
	start             uint32 // the response's first byte
	cwndAtRequest     uint32
	rwndAtRequest     uint32
	written           uint32 // the end of what the application wrote (write_seq)
	ackedAllMonoNs    int64  // when an ACK last covered everything written; 0: not since the last write
	cutter            ktcp.RoundCutter
	rounds            []ktcp.Round
	roundsOmitted     int
	round1Limit       string
	retransmitted     bool
}

// trackerCounts are what the tracker counted since it started.
type trackerCounts struct {
	// Followed connections: established while field followed, with room in
	// the table.
	Followed uint64
	// NotFollowed: established while the table was full (Options.MaxConns).
	NotFollowed uint64
	// Finished: records handed over (a first response, whole or cut short).
	Finished uint64
	// NoRequest: closed, reset or idle before the client sent any data (the
	// chosen flight); NoResponse: the request came, the server sent nothing.
	NoRequest, NoResponse uint64
}

// tracker is not safe for concurrent use: Run holds a lock around it.
type tracker struct {
	conns    map[uint64]*connState
	maxConns int
	exchange int
	quietNs  int64 // a response all acknowledged is over after this long without more data
	idleNs   int64 // a connection without events for this long is given up
	unixNs   func(monoNs int64) int64
	emit     func(*record)
	counts   trackerCounts
}

func newTracker(maxConns, exchange int, quietNs, idleNs int64, unixNs func(int64) int64, emit func(*record)) *tracker {
	return &tracker{
		conns: make(map[uint64]*connState, min(maxConns, 1<<14)), maxConns: maxConns, exchange: max(exchange, 1),
		quietNs: quietNs, idleNs: idleNs, unixNs: unixNs, emit: emit,
	}
}

// open is the number of connections followed now.
func (t *tracker) open() int { return len(t.conns) }

// feed takes one event.
func (t *tracker) feed(ev *ktcp.Event) {
	st := t.conns[ev.Cookie]
	if st == nil {
		// A passive socket becoming ESTABLISHED is a new connection to follow;
		// every other event of an unknown socket belongs to one established
		// before field started, or already handed over.
		if ev.Kind == ktcp.KindState && ev.OldState == ktcp.StateSynRecv && ev.NewState == ktcp.StateEstablished {
			t.start(ev)
		}
		return
	}
	st.lastMonoNs = ev.MonoNs
	switch ev.Kind {
	case ktcp.KindProbe:
		t.probe(ev.Cookie, st, ev)
	case ktcp.KindState:
		if st.phase == phaseResponse {
			st.cutter.Window(ev.Sock.SndCwnd)
		}
		if ev.OldState == ktcp.StateEstablished {
			t.leftEstablished(ev.Cookie, st, ev)
		}
	case ktcp.KindRetransmit:
		if st.phase == phaseResponse {
			st.cutter.Retransmit()
			st.retransmitted = true
		}
	}
}

func (t *tracker) start(ev *ktcp.Event) {
	if len(t.conns) >= t.maxConns {
		t.counts.NotFollowed++
		return
	}
	t.counts.Followed++
	st := &connState{
		local: ev.Local, remote: ev.Remote, establishedMonoNs: ev.MonoNs, lastMonoNs: ev.MonoNs,
		rttUs: ev.Sock.SRTTMicros, mss: ev.Sock.MSS, iw: ev.Sock.SndCwnd,
		written: ev.Sock.WriteSeq, flightNxt: ev.Sock.SndNxt,
	}
	t.conns[ev.Cookie] = st
}

// probe takes a segment the established socket received.
func (t *tracker) probe(cookie uint64, st *connState, ev *ktcp.Event) {
	s := &ev.Sock
	if st.rttUs == 0 && s.SRTTMicros > 0 {
		st.rttUs = s.SRTTMicros // no sample at the handshake (a retransmitted SYN/ACK): the first one
	}
	if st.phase == phaseResponse {
		if r, ok := st.cutter.ACK(ktcp.ACKOf(ev)); ok {
			t.addRound(st, r)
		}
		if int32(s.WriteSeq-st.written) > 0 {
			st.written, st.ackedAllMonoNs = s.WriteSeq, 0
		}
		if st.ackedAllMonoNs == 0 && ev.Segment.AckSeq == s.WriteSeq && int32(s.WriteSeq-st.start) > 0 {
			st.ackedAllMonoNs = ev.MonoNs // the first ACK of everything written so far
		}
	}
	if ev.Segment.DataBytes() == 0 {
		return
	}
	// Client data: a new flight when it is the first or the server sent
	// something since the last one began.
	if st.flights > 0 && s.SndNxt == st.flightNxt {
		return
	}
	if st.phase == phaseResponse {
		// The next request: the response is over, as far as it got.
		t.finish(cookie, st, s.SndNxt, "")
		return
	}
	st.flights++
	st.flightNxt = s.SndNxt
	if st.flights == t.exchange {
		st.phase = phaseResponse
		st.requestMonoNs = ev.MonoNs
		st.start = s.SndNxt
		st.written = s.WriteSeq
		st.cwndAtRequest, st.rwndAtRequest = s.SndCwnd, s.SndWndBytes
		st.cutter = ktcp.NewRoundCutter(s.SndNxt, ev.MonoNs, s.SndCwnd)
	}
}

func (t *tracker) addRound(st *connState, r ktcp.Round) {
	if len(st.rounds) == 0 && st.roundsOmitted == 0 {
		st.round1Limit = round1Limit(r)
	}
	if len(st.rounds) < maxRoundsKept {
		if st.rounds == nil {
			st.rounds = make([]ktcp.Round, 0, 4)
		}
		st.rounds = append(st.rounds, r)
	} else {
		st.roundsOmitted++
	}
}

// round1Limit reads what cut round 1 at its close: data still queued means a
// window did (the client's when fewer than a segment's bytes of it were left,
// the congestion window otherwise); nothing queued leaves app or end, decided
// when the response is over.
func round1Limit(r ktcp.Round) string {
	if r.QueuedBytes == 0 {
		return ""
	}
	if r.RwndBytes < r.InFlight+max(r.MSS, 1) {
		return LimitRwnd
	}
	return LimitCwnd
}

// leftEstablished takes the socket's change from ESTABLISHED: the client
// closed (CLOSE_WAIT), the server did (FIN_WAIT1), or a reset (CLOSE). No ACK
// is reported after it.
func (t *tracker) leftEstablished(cookie uint64, st *connState, ev *ktcp.Event) {
	s := &ev.Sock
	if st.phase != phaseResponse {
		t.counts.NoRequest++
		delete(t.conns, cookie)
		return
	}
	if int32(s.WriteSeq-st.written) > 0 {
		st.written = s.WriteSeq
	}
	cut := ""
	if s.SndUna != st.written {
		switch ev.NewState {
		case ktcp.StateFinWait1:
			cut = CutServerClosed
		case ktcp.StateCloseWait:
			cut = CutClientClosed
		default:
			cut = CutReset
		}
	}
	t.finish(cookie, st, st.written, cut)
}

// sweep hands over the responses that are over by time: all acknowledged and
// quiet for quietNs, or idle for idleNs; connections idle without a request
// are given up.
func (t *tracker) sweep(nowMonoNs int64) {
	for cookie, st := range t.conns {
		idle := nowMonoNs - st.lastMonoNs
		switch {
		case st.phase == phaseResponse && st.ackedAllMonoNs > 0 && nowMonoNs-st.ackedAllMonoNs >= t.quietNs && idle >= t.quietNs:
			t.finish(cookie, st, st.written, "")
		case idle < t.idleNs:
		case st.phase == phaseResponse:
			t.finish(cookie, st, st.written, CutIdle)
		default:
			t.counts.NoRequest++
			delete(t.conns, cookie)
		}
	}
}

// flush hands over every response under way (field is stopping).
func (t *tracker) flush() {
	for cookie, st := range t.conns {
		if st.phase == phaseResponse {
			cut := CutEnded
			if st.ackedAllMonoNs > 0 {
				cut = ""
			}
			t.finish(cookie, st, st.written, cut)
		} else {
			delete(t.conns, cookie)
		}
	}
}

// finish hands over the connection's first response, which ended at sequence
// number end (cut says why its end was not seen, "" when it was), and forgets
// the connection.
func (t *tracker) finish(cookie uint64, st *connState, end uint32, cut string) {
	delete(t.conns, cookie)
	bytes := int64(int32(end - st.start))
	if bytes <= 0 {
		t.counts.NoResponse++
		return
	}
	if cut == "" && st.cutter.Start() != end {
		// Data sent after the last round closed, never acknowledged while field
		// could see it.
		cut = CutIdle
	}
	rec := &record{
		establishedUnixNs: t.unixNs(st.establishedMonoNs),
		local:             st.local, remote: st.remote, source: SourceKernel,
		rttUs: st.rttUs, mss: st.mss, iw: st.iw, exchange: t.exchange,
		cwndAtRequest: st.cwndAtRequest, rwndAtRequest: st.rwndAtRequest,
		responseBytes: bytes, rounds: st.rounds, roundsOmitted: st.roundsOmitted,
		complete: cut == "", cut: cut, retransmitted: st.retransmitted, round1Limit: st.round1Limit,
	}
	if rec.complete && len(st.rounds) > 0 {
		if st.ackedAllMonoNs > 0 {
			rec.responseNs = st.ackedAllMonoNs - st.requestMonoNs
		}
	}
	if rec.round1Limit == "" {
		switch {
		case len(st.rounds) == 0:
			rec.round1Limit = LimitUnknown
		case int64(st.rounds[0].Bytes()) < bytes:
			rec.round1Limit = LimitApp
		default:
			rec.round1Limit = LimitEnd
		}
	}
	t.counts.Finished++
	t.emit(rec)
}
