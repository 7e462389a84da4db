package field

import (
	"net/netip"
	"time"

	"github.com/slowstart/slowstart/ktcp"
)

// SyntheticConn describes a made-up server connection whose kernel events
// Events writes as a clean path would produce them: the handshake, one
// request, a response sent in slow start from IW (the window grows by one
// segment per segment acknowledged, every segment acknowledged on its own, no
// loss, no receive-window limit), the client's FIN. It is for benchmarks and
// tests that feed field without a kernel (Follower).
type SyntheticConn struct {
	Cookie         uint64
	Client, Server netip.AddrPort
	// StartNs is when the server's socket became ESTABLISHED (CLOCK_MONOTONIC).
	StartNs int64
	RTTNs   int64
	IW, MSS int
	// ResponseBytes is what the server answers the request with.
	ResponseBytes int
	// ISN is the server's initial sequence number.
	ISN uint32
}

// Events appends the connection's events, in order, to evs.
func (s SyntheticConn) Events(evs []ktcp.Event) []ktcp.Event {
	mss := uint32(s.MSS)
	first := s.ISN + 1
	end := first + uint32(s.ResponseBytes)
	sock := ktcp.Sock{SndCwnd: uint32(s.IW), SndSSThresh: ktcp.InfiniteSSThresh, SndWndBytes: 1 << 20, RcvWndBytes: 65535,
		SRTTMicros: uint32(s.RTTNs / 1000), MSS: mss, SndUna: first, SndNxt: first, WriteSeq: first, RcvNxt: 1001}
	ev := ktcp.Event{Cookie: s.Cookie, Local: s.Server, Remote: s.Client}
	add := func(kind ktcp.Kind, ns int64) *ktcp.Event {
		e := ev
		e.Kind, e.MonoNs, e.Sock = kind, ns, sock
		evs = append(evs, e)
		return &evs[len(evs)-1]
	}
	st := add(ktcp.KindState, s.StartNs)
	st.OldState, st.NewState, st.SocketState = ktcp.StateSynRecv, ktcp.StateEstablished, ktcp.StateSynRecv
	// The request arrives; the application writes the whole response, and the
	// kernel sends a window of it.
	at := s.StartNs + s.RTTNs/100
	req := add(ktcp.KindProbe, at)
	req.SocketState = ktcp.StateEstablished
	req.Segment = ktcp.Segment{Seq: 1001, EndSeq: 1081, AckSeq: first, Flags: ktcp.FlagACK | ktcp.FlagPSH}
	sock.RcvNxt = 1081
	sock.WriteSeq = end
	// Offsets from the first byte of the response: what was sent (nxt) and
	// acknowledged (una).
	size := int64(s.ResponseBytes)
	var una, nxt int64
	cwnd := int64(s.IW)
	send := func() {
		nxt = max(nxt, min(una+cwnd*int64(mss), size))
		sock.SndNxt = sock.SndUna + uint32(nxt-una)
	}
	send()
	round := int64(1)
	for una < size {
		// Each segment sent in this round is acknowledged on its own, a round
		// trip after the round began.
		roundEnd := nxt
		for step := int64(0); una < roundEnd; step++ {
			ack := min(una+int64(mss), roundEnd)
			a := add(ktcp.KindProbe, at+round*s.RTTNs+step*1000)
			a.SocketState = ktcp.StateEstablished
			a.Segment = ktcp.Segment{Seq: 1081, EndSeq: 1081, AckSeq: sock.SndUna + uint32(ack-una), Flags: ktcp.FlagACK}
			cwnd += (ack - una + int64(mss) - 1) / int64(mss)
			sock.SndCwnd = uint32(cwnd)
			sock.SndUna += uint32(ack - una)
			una = ack
			send()
		}
		round++
	}
	fin := add(ktcp.KindProbe, at+round*s.RTTNs)
	fin.SocketState = ktcp.StateEstablished
	fin.Segment = ktcp.Segment{Seq: 1081, EndSeq: 1082, AckSeq: end, Flags: ktcp.FlagACK | ktcp.FlagFIN}
	sock.RcvNxt = 1082
	cw := add(ktcp.KindState, at+round*s.RTTNs+1000)
	cw.OldState, cw.NewState, cw.SocketState = ktcp.StateEstablished, ktcp.StateCloseWait, ktcp.StateEstablished
	return evs
}

// Follower is field's reading of kernel events without a kernel: the
// per-connection tracker and the aggregation Run uses, fed by the caller
// (benchmarks and tests feed it SyntheticConn's events). Not safe for
// concurrent use.
type Follower struct {
	r *runner
}

// NewFollower makes a Follower with opts (Ports, the sources, the store and
// the outputs are not used).
func NewFollower(opts Options) (*Follower, error) {
	if len(opts.Ports) == 0 {
		opts.Ports = []uint16{1}
	}
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	networks, err := NewNetworks(opts.Prefix4, opts.Prefix6, opts.ASN)
	if err != nil {
		return nil, &UsageError{err}
	}
	r := &runner{opts: opts, networks: networks, source: SourceKernel, from: time.Now()}
	r.agg = newAggregator(opts.MaxNetworks, opts.SampleSize, opts.SamplesPerNetwork, opts.Seed)
	r.metrics = newMetrics(opts.MetricsNetworks, opts.IWs, r.statusCopy)
	r.tracker = newTracker(opts.MaxConns, opts.Exchange, int64(opts.Quiet), int64(opts.Idle), func(ns int64) int64 { return ns }, r.emit)
	return &Follower{r: r}, nil
}

// Feed takes one event.
func (f *Follower) Feed(ev *ktcp.Event) { f.r.tracker.feed(ev) }

// Sweep hands over the responses over by time at nowNs (see Options.Quiet
// and Options.Idle).
func (f *Follower) Sweep(nowNs int64) { f.r.tracker.sweep(nowNs) }

// Open is the number of connections followed now.
func (f *Follower) Open() int { return f.r.tracker.open() }

// Summary summarizes what was fed so far (connections still open are not in
// it).
func (f *Follower) Summary() *Summary {
	t := f.r.tracker.counts
	f.r.statusMu.Lock()
	f.r.status = statusCounts{followed: t.Followed, notFollowed: t.NotFollowed, noRequest: t.NoRequest, noResponse: t.NoResponse,
		measured: t.Finished, open: f.r.tracker.open()}
	f.r.statusMu.Unlock()
	return f.r.summary(time.Now())
}

// NextInterval closes the interval under way, as Run does when it writes the
// store, and drops it.
func (f *Follower) NextInterval() { f.r.agg.takeInterval() }
