package field

import (
	"net/netip"
	"time"

	"github.com/slowstart/slowstart/ktcp"
	"github.com/slowstart/slowstart/model"
)

// ConnSchema names the JSON of one connection (field --jsonl,
// docs/schemas/field-connection.json).
const ConnSchema = "slowstart.field-connection/v1"

// Where a connection's reading came from.
const (
	SourceKernel  = "kernel"  // the kernel's TCP tracepoints (package ktcp)
	SourcePackets = "packets" // a packet capture on the server (the fallback)
)

// What limited round 1 of a first response (Conn.Round1Limit).
const (
	// LimitCwnd: the server had more to send, and the round ended with the
	// congestion window full: the initial window cut it.
	LimitCwnd = "cwnd"
	// LimitRwnd: the server had more to send, and the client's receive window
	// was full.
	LimitRwnd = "rwnd"
	// LimitApp: the server had sent all its application had written, and wrote
	// more later (think time, streaming): a larger window would not have helped.
	LimitApp = "app"
	// LimitEnd: the whole response fit in round 1.
	LimitEnd = "end"
	// LimitUnknown: round 1 never closed while field could see it (the
	// connection closed or went idle first).
	LimitUnknown = "unknown"
)

// Why a first response's end was not seen (Conn.CutShort).
const (
	// CutServerClosed: the server closed its side while data of the response
	// was still unacknowledged. The kernel reports no ACK in FIN_WAIT1 (tcp_probe
	// fires only in ESTABLISHED, docs/kernel.md), so the response's tail is not
	// seen: its round trips are unknown, not fewer.
	CutServerClosed = "server_closed"
	// CutClientClosed: the client closed (or half-closed) before the response
	// was acknowledged.
	CutClientClosed = "client_closed"
	// CutReset: the connection was reset.
	CutReset = "reset"
	// CutIdle: the connection went idle (Options.Idle) with the response not
	// acknowledged.
	CutIdle = "idle"
	// CutEnded: field stopped while the response was under way.
	CutEnded = "ended"
)

// maxRoundsKept bounds the rounds a connection keeps in detail; later ones are
// counted (Conn.RoundsOmitted).
const maxRoundsKept = 32

// Round is one round of a first response, as the server's kernel cut it by its
// ACK clock (ktcp.Round).
type Round struct {
	// Bytes and Segments are what the server sent in the round (segments of the
	// connection's MSS, rounded up).
	Bytes    int `json:"bytes"`
	Segments int `json:"segments"`
	// CwndSegments is the kernel's congestion window when the ACK that closed
	// the round arrived: the window the round's last segment left under. 0 when
	// unknown (the packet source).
	CwndSegments int `json:"cwnd_segments"`
	// CwndAtStartSegments is the window when the round began (round 1: the
	// window when the request arrived, the initial window on a new connection).
	CwndAtStartSegments int `json:"cwnd_at_start_segments"`
	// InFlightBytes were unacknowledged when the round closed; QueuedBytes were
	// written by the application and not yet sent then (more than 0: a window
	// cut the round); RwndBytes is the client's receive window then.
	InFlightBytes int `json:"in_flight_bytes"`
	QueuedBytes   int `json:"queued_bytes"`
	RwndBytes     int `json:"rwnd_bytes"`
	// DurationMs runs from the ACK that opened the round (round 1: the request's
	// arrival) to the one that closed it.
	DurationMs float64 `json:"duration_ms"`
	// Retransmitted: a retransmission left during the round.
	Retransmitted bool `json:"retransmitted,omitempty"`
}

// Saving is what another initial window would have changed on one response,
// by the model (slow start from that window, on the response's own bytes, MSS
// and RTT): positive saves, negative costs.
type Saving struct {
	IW         int     `json:"iw"`
	RoundTrips int     `json:"round_trips"`
	Ms         float64 `json:"ms"`
}

// Conn is what field read of one connection: its handshake and its first
// response.
type Conn struct {
	Schema string `json:"schema"` // ConnSchema
	// Time is when the connection was established (the server's socket became
	// ESTABLISHED), UTC.
	Time time.Time `json:"time"`
	// Client and Server are the two ends (ip:port); Network is the client's
	// network (a prefix, or an AS with a pfx2as table).
	Client  string `json:"client"`
	Server  string `json:"server"`
	Network string `json:"network"`
	// Source is SourceKernel or SourcePackets.
	Source string `json:"source"`
	// HandshakeRTTMs is the handshake's round-trip time: from the server's
	// SYN/ACK to the client's ACK, as the kernel measured it (its first RTT
	// sample); null when unknown.
	HandshakeRTTMs *float64 `json:"handshake_rtt_ms"`
	// MSS is the payload of a full segment the server sends (bytes).
	MSS int `json:"mss"`
	// InitialWindow is the kernel's congestion window when the connection was
	// established, segments (the route's initcwnd, or 10); 0 when unknown.
	InitialWindow int `json:"initial_window"`
	// Exchange is the client flight whose answer is the "first response" (1:
	// the answer to the first request; Options.Exchange).
	Exchange int `json:"exchange"`
	// CwndAtRequestSegments and RwndAtRequestBytes are the server's congestion
	// window and the client's receive window when the request arrived.
	CwndAtRequestSegments int `json:"cwnd_at_request_segments"`
	RwndAtRequestBytes    int `json:"rwnd_at_request_bytes"`
	// ResponseBytes is what the server sent in answer (its application wrote,
	// when the end was not seen).
	ResponseBytes int64 `json:"response_bytes"`
	// Rounds are the response's rounds (the first maxRoundsKept; RoundsOmitted
	// counts the rest).
	Rounds        []Round `json:"rounds"`
	RoundsOmitted int     `json:"rounds_omitted,omitempty"`
	// RoundTrips is how many round trips the response took (its rounds); null
	// when its end was not seen (CutShort).
	RoundTrips *int `json:"round_trips"`
	// ResponseMs runs from the request's arrival to the arrival of the ACK of
	// the response's last byte: the client's wait from sending the request to
	// receiving the last byte. Null when the end was not seen.
	ResponseMs *float64 `json:"response_ms"`
	// Round1Limit says what limited round 1 (LimitCwnd, LimitRwnd, LimitApp,
	// LimitEnd, LimitUnknown); WindowLimited is cwnd or rwnd.
	Round1Limit   string `json:"round1_limit"`
	WindowLimited bool   `json:"window_limited"`
	// Retransmitted: the server retransmitted during the response.
	Retransmitted bool `json:"retransmitted"`
	// CutShort says why the response's end was not seen ("" when it was).
	CutShort string `json:"cut_short,omitempty"`
	// Savings are what each window of Options.IWs would have saved, by the
	// model; empty without an RTT or an MSS.
	Savings []Saving `json:"savings"`
}

// record is a finished connection as the tracker hands it over: numbers only,
// no strings, so that the hot path allocates nothing but the rounds.
type record struct {
	establishedUnixNs int64
	local, remote     netip.AddrPort
	source            string
	rttUs             uint32 // 0: unknown
	mss, iw           uint32
	exchange          int
	cwndAtRequest     uint32
	rwndAtRequest     uint32
	responseBytes     int64
	rounds            []ktcp.Round
	roundsOmitted     int
	complete          bool
	cut               string
	responseNs        int64 // request to the ACK of the last byte; 0 unknown
	retransmitted     bool
	round1Limit       string
}

// roundTrips is the response's round trips, or -1 when its end was not seen.
func (r *record) roundTrips() int {
	if !r.complete {
		return -1
	}
	return len(r.rounds) + r.roundsOmitted
}

// windowLimited says round 1 was cut by a window.
func (r *record) windowLimited() bool {
	return r.round1Limit == LimitCwnd || r.round1Limit == LimitRwnd
}

// round1Bytes is round 1's size; -1 when it never closed.
func (r *record) round1Bytes() int64 {
	if len(r.rounds) == 0 {
		return -1
	}
	return int64(r.rounds[0].Bytes())
}

// saving prices window iw on the record (see modelRounds).
func (r *record) saving(iw int) (Saving, bool) {
	if r.rttUs == 0 || r.mss == 0 || r.iw == 0 || r.responseBytes <= 0 {
		return Saving{}, false
	}
	// The window the response started under, with iw in place of the initial
	// window: what earlier exchanges added to it stays.
	actual := int(r.cwndAtRequest)
	if actual == 0 {
		actual = int(r.iw)
	}
	other := max(actual-int(r.iw)+iw, 1)
	saved := modelRounds(r.responseBytes, actual, int(r.mss), r.rwndAtRequest) -
		modelRounds(r.responseBytes, other, int(r.mss), r.rwndAtRequest)
	return Saving{IW: iw, RoundTrips: saved, Ms: float64(saved) * float64(r.rttUs) / 1e3}, true
}

// modelRounds is the round trips slow start needs for a response of size bytes
// from a window of cwnd segments of mss bytes (model.RoundsNeeded), its first
// round capped by the client's receive window when it was smaller: a larger
// initial window can't send more than the client lets it, and the client's
// window grows with what it receives.
func modelRounds(size int64, cwnd, mss int, rwndBytes uint32) int {
	if rwndBytes > 0 {
		cwnd = min(cwnd, max(int(rwndBytes)/mss, 1))
	}
	return model.RoundsNeeded(size, cwnd, mss)
}

// conn turns a record into its Conn.
func (r *record) conn(network string, iws []int) Conn {
	c := Conn{
		Schema:                ConnSchema,
		Time:                  time.Unix(0, r.establishedUnixNs).UTC(),
		Client:                r.remote.String(),
		Server:                r.local.String(),
		Network:               network,
		Source:                r.source,
		MSS:                   int(r.mss),
		InitialWindow:         int(r.iw),
		Exchange:              r.exchange,
		CwndAtRequestSegments: int(r.cwndAtRequest),
		RwndAtRequestBytes:    int(r.rwndAtRequest),
		ResponseBytes:         r.responseBytes,
		Rounds:                make([]Round, 0, len(r.rounds)),
		RoundsOmitted:         r.roundsOmitted,
		Round1Limit:           r.round1Limit,
		WindowLimited:         r.windowLimited(),
		Retransmitted:         r.retransmitted,
		CutShort:              r.cut,
		Savings:               []Saving{},
	}
	if r.rttUs > 0 {
		ms := float64(r.rttUs) / 1e3
		c.HandshakeRTTMs = &ms
	}
	for _, kr := range r.rounds {
		c.Rounds = append(c.Rounds, Round{
			Bytes: int(kr.Bytes()), Segments: kr.Segments, CwndSegments: int(kr.Cwnd), CwndAtStartSegments: int(kr.CwndAtStart),
			InFlightBytes: int(kr.InFlight), QueuedBytes: int(kr.QueuedBytes), RwndBytes: int(kr.RwndBytes),
			DurationMs: float64(kr.ClosedNs-kr.OpenedNs) / 1e6, Retransmitted: kr.Retransmitted,
		})
	}
	if n := r.roundTrips(); n >= 0 {
		c.RoundTrips = &n
	}
	if r.complete && r.responseNs > 0 {
		ms := float64(r.responseNs) / 1e6
		c.ResponseMs = &ms
	}
	for _, iw := range iws {
		if s, ok := r.saving(iw); ok {
			c.Savings = append(c.Savings, s)
		}
	}
	return c
}
