// Package model predicts how long the first load of a response takes over a path:
// the round trips by phase (TCP handshake, TLS handshake, HTTP data rounds), the
// time to the first and last byte, and the byte budget of each round. It holds two
// models side by side:
//
//   - Simulate: a deterministic packet-level model of Linux TCP over one bottleneck
//     (the sender's congestion window counted in packets, slow start with HyStart and
//     CUBIC's congestion avoidance as the kernel computes them, the client's receive
//     window, delayed ACKs, the serialization of every packet at the link rate with its
//     headers, in both directions, and the propagation delay). It computes what the lab
//     measures, so its predictions can be checked against the lab.
//   - ClosedForm: Equation 1 of Dukkipati et al. (CCR 2010), shown for comparison.
//
// The package only computes: it runs no transfers (package lab does), reads no
// captures (package analysis does) and prints nothing (the model command does).
package model

import (
	"errors"
	"fmt"
	"math"
)

// Wire sizes of Linux TCP over IPv4 with timestamps, as the lab's packets have them.
const (
	// DefaultMSS is the payload of a full segment over a 1500-byte MTU with TCP timestamps.
	DefaultMSS = 1448
	// HeaderBytes is the IPv4 and TCP header of a segment with the timestamp option.
	HeaderBytes = 52
	// synBytes is a SYN or SYN/ACK with MSS, SACK, timestamps and window scale.
	synBytes = 60
	// requestBytes is the payload of the lab client's GET /bytes/N request.
	requestBytes = 83
)

// Receive windows.
const (
	// linuxInitialWindowBytes is the window a Linux client (tcp_rmem default 128 KB)
	// advertises once the handshake is done: 63 × 1024 with window scale 10.
	linuxInitialWindowBytes = 64512
	// linuxWindowClampBytes is where that window stops growing until receive-buffer
	// autotuning raises the clamp (79 × 1024: about 62% of 128 KB).
	linuxWindowClampBytes = 80896
	// linuxWindowGrowthBytes is the window's growth per full segment received (two MSS,
	// rounded to the window scale's 1024-byte unit).
	linuxWindowGrowthBytes = 3072
	// linuxAutotuneSpaceBytes is the first receive-space estimate: ten segments.
	linuxAutotuneSpaceSegments = 10
)

// Congestion control algorithms the model knows.
const (
	CCCubic = "cubic" // CUBIC with HyStart (Linux's default)
	CCReno  = "reno"
)

// Params describes one transfer over one path.
type Params struct {
	RTTNs             int64 // round-trip propagation delay
	RateBitsPerSecond int64 // bottleneck rate each way; 0: unlimited
	// SizeBytes is what the server sends in answer to the request: HTTP headers and
	// body (the lab's server adds LabHeaderBytes to the body).
	SizeBytes int64
	IW        int // the server's initial congestion window, segments
	MSS       int // payload bytes of a full segment; 0: DefaultMSS
	// RwndBytes caps the client's receive window at a fixed size; 0 models a Linux
	// client with default buffers (64 KB at first, autotuned after a round trip).
	RwndBytes int64
	// TLS is "" (cleartext), "1.2" or "1.3"; ChainBytes is the certificate chain.
	TLS        string
	ChainBytes int
	// DelayedACK makes the client acknowledge every second segment (after 16 quick
	// ACKs), holding a lone segment up to the 40 ms delayed-ACK timer. Off: one ACK per
	// segment, as the lab's client does (it reads every segment as it arrives).
	DelayedACK bool
	// CC is CCCubic (default) or CCReno.
	CC string
	// HostDelayNs is extra latency per packet crossing (the emulator's and the kernel's
	// processing); 0 for an ideal path. The lab adds about 0.2 ms each way.
	HostDelayNs int64
	// ServerDelayNs is the server's time from a request's arrival to its first answer.
	ServerDelayNs int64
	// ClockPhaseNs is where in the kernels' clock ticks (jiffies of 4 ms, TCP
	// timestamps of 1 ms) the connection starts; real connections start at any
	// phase. 0 by default.
	ClockPhaseNs int64
	// RequestAtNs delays the HTTP request: the client sends it this long after its
	// SYN, or as soon as the connection is ready (TCP and TLS done) when that is
	// later. 0: as soon as it is ready. (A browser's preconnected connection
	// carries its first request only once the page names it.)
	RequestAtNs int64
	// Requests are more HTTP requests on the same connection after the first
	// (SizeBytes), each sent at its AtNs or when the connection is ready, its
	// response queued at the server behind what it still has to send (PageLoad).
	Requests []Request
	// ServerPostHandshakeSegments are small segments (PostHandshakeSegmentBytes
	// each) a TLS server sends as soon as the client's Finished arrives, before any
	// response: TLS 1.3 session tickets (OpenSSL, hence nginx, sends two), an
	// HTTP/2 server's SETTINGS and its ACK of the client's. Each takes a packet of
	// the window. 0 for the lab's built-in server over HTTP/1.1 (no tickets).
	ServerPostHandshakeSegments int
}

// PostHandshakeSegmentBytes is the size of each post-handshake segment (a TLS 1.3
// NewSessionTicket record is 79 bytes from nginx).
const PostHandshakeSegmentBytes = 80

// Request is one more HTTP request on a connection (Params.Requests).
type Request struct {
	AtNs  int64 // when the client sends it, from the SYN
	Bytes int64 // its response: HTTP headers and body
}

// Normalize fills defaults and checks the values.
func (p *Params) Normalize() error {
	if p.MSS == 0 {
		p.MSS = DefaultMSS
	}
	if p.CC == "" {
		p.CC = CCCubic
	}
	if p.TLS != "" && p.ChainBytes == 0 {
		p.ChainBytes = 4000
	}
	switch {
	case p.RTTNs < 0:
		return errors.New("the RTT can't be negative")
	case p.RateBitsPerSecond < 0:
		return errors.New("the rate can't be negative (0 means unlimited)")
	case p.SizeBytes < 0 || p.SizeBytes > 1<<30:
		return fmt.Errorf("size %d bytes: use 0 to 1 GiB", p.SizeBytes)
	case p.IW < 1 || p.IW > 1000:
		return fmt.Errorf("initial window %d: use 1 to 1000 segments", p.IW)
	case p.MSS < 64 || p.MSS > 65000:
		return fmt.Errorf("MSS %d: use 64 to 65000 bytes", p.MSS)
	case p.RwndBytes < 0:
		return errors.New("the receive window can't be negative (0 models a Linux client)")
	case p.RwndBytes > 0 && p.RwndBytes < int64(p.MSS):
		return fmt.Errorf("receive window %d bytes is smaller than one segment (%d bytes)", p.RwndBytes, p.MSS)
	case p.TLS != "" && p.TLS != "1.2" && p.TLS != "1.3":
		return fmt.Errorf("TLS %q: use 1.2, 1.3 or none", p.TLS)
	case p.CC != CCCubic && p.CC != CCReno:
		return fmt.Errorf("congestion control %q: the model knows cubic and reno", p.CC)
	case p.ChainBytes < 0 || p.ChainBytes > 1<<20:
		return fmt.Errorf("certificate chain %d bytes: use 0 to 1 MiB", p.ChainBytes)
	case p.RequestAtNs < 0:
		return errors.New("a request can't be sent before the connection starts")
	case p.ServerPostHandshakeSegments < 0 || p.ServerPostHandshakeSegments > 100:
		return fmt.Errorf("%d post-handshake segments: use 0 to 100", p.ServerPostHandshakeSegments)
	}
	for _, r := range p.Requests {
		if r.Bytes < 0 || r.Bytes > 1<<30 || r.AtNs < 0 {
			return fmt.Errorf("request of %d bytes at %d ns: use 0 to 1 GiB, at or after the connection's start", r.Bytes, r.AtNs)
		}
	}
	return nil
}

// LabHeaderBytes is the size of the HTTP/1.1 response headers of the lab's built-in
// server for a body of bodyBytes (status line, Cache-Control, Content-Length,
// Content-Type, Date and the blank line).
func LabHeaderBytes(bodyBytes int64) int64 {
	return 139 + int64(len(fmt.Sprint(bodyBytes)))
}

// Round is one round trip of the server's sending, numbered by the ACK clock as the
// analysis numbers them: a segment belongs to round 1 + the round of the newest data
// the server had seen acknowledged when it sent it.
type Round struct {
	Index           int     `json:"index"`
	Phase           string  `json:"phase"` // "tls" or "http"
	StartMs         float64 `json:"start_ms"`
	Segments        int     `json:"segments"`
	Bytes           int64   `json:"bytes"`
	CumulativeBytes int64   `json:"cumulative_bytes"` // of the phase's messages
	CwndSegments    int     `json:"cwnd_segments"`    // the congestion window when the round began
	// Limit says what ended the round: "cwnd", "rwnd", "rate" (the link was busy all
	// round: the transfer is rate-limited), or "end".
	Limit string `json:"limit"`
}

// RoundTrips counts round trips by phase, as the analysis does.
type RoundTrips struct {
	TCP   int `json:"tcp"`
	TLS   int `json:"tls"`
	HTTP  int `json:"http"`
	Total int `json:"total"`
}

// Result is what Simulate predicts.
type Result struct {
	Params     Params     `json:"-"`
	RoundTrips RoundTrips `json:"round_trips"`
	Rounds     []Round    `json:"rounds"`
	// Times from the client's connect start, in ms.
	ConnectMs   float64 `json:"connect_ms"`
	TLSMs       float64 `json:"tls_ms"` // 0 over cleartext
	FirstByteMs float64 `json:"first_byte_ms"`
	LastByteMs  float64 `json:"last_byte_ms"`
	// FCTPaperMs: first response byte to last at the client; FCTUserMs: connect start
	// to the last byte (the lab's two definitions).
	FCTPaperMs float64 `json:"fct_paper_ms"`
	FCTUserMs  float64 `json:"fct_user_ms"`
	// ServerFlightBytes and ServerFlightSegments are the TLS server flight.
	ServerFlightBytes    int `json:"server_flight_bytes,omitempty"`
	ServerFlightSegments int `json:"server_flight_segments,omitempty"`
	// SerializationMs is the response's time on the bottleneck alone (size/rate).
	SerializationMs float64 `json:"serialization_ms"`
	// RateLimitedFromRound is the first HTTP round from which the link was busy
	// without a pause to the end (window-limited before it); 0 if never.
	RateLimitedFromRound int `json:"rate_limited_from_round"`
	// HyStartExitRound is the HTTP round in which HyStart left slow start; 0 if never.
	HyStartExitRound int `json:"hystart_exit_round"`
	// HTTPRoundsMin and HTTPRoundsMax bound the HTTP rounds over the phase of the
	// kernels' clock ticks at the connection's start: where they differ, the last
	// round's few segments go out on one side of a round boundary or the other,
	// depending on timing no one controls.
	HTTPRoundsMin int `json:"http_rounds_min"`
	HTTPRoundsMax int `json:"http_rounds_max"`
	// Responses are the HTTP responses of the connection: the first one, then one
	// per Params.Requests, each with the rounds it arrived in.
	Responses []Response `json:"-"`
	// ReadyMs is when the connection was ready for requests (TCP and TLS done).
	ReadyMs float64 `json:"-"`
}

// Response is one HTTP response of a simulated connection.
type Response struct {
	// FirstRound and LastRound are the rounds (numbered as the analysis does: the
	// server's first flight is round 1) its first and last segments were sent in;
	// 0 for an empty response.
	FirstRound, LastRound int
	// SentMs is when the client sent the request; FirstByteMs and LastByteMs when
	// its first and last segments arrived (from the SYN).
	SentMs, FirstByteMs, LastByteMs float64
	// Segments are its segments in order: where each ends in the response, when it
	// arrived and its round.
	Segments []SegmentArrival
}

// SegmentArrival is one segment of a Response.
type SegmentArrival struct {
	EndByte   int64 // bytes of the response up to this segment's end
	ArrivedMs float64
	Round     int
}

// ArrivalOf returns when the response's first n bytes had all arrived, and the
// round of the segment that completed them (its last segment when n is larger).
func (r Response) ArrivalOf(n int64) (ms float64, round int) {
	for _, s := range r.Segments {
		ms, round = s.ArrivedMs, s.Round
		if s.EndByte >= n {
			break
		}
	}
	return ms, round
}

// ClosedFormResult is Equation 1 of Dukkipati et al.: the latency from the first
// response byte to the last ACK, ⌈log_γ(S(γ−1)/IW + 1)⌉·RTT + S/C.
type ClosedFormResult struct {
	Gamma      float64 `json:"gamma"`
	Rounds     int     `json:"rounds"`
	LatencyMs  float64 `json:"latency_ms"`
	SizeInIWs  float64 `json:"size_segments"`
	TransferMs float64 `json:"transfer_ms"` // S/C
}

// ClosedForm evaluates Equation 1 for a size in segments of mss bytes: γ is 2 without
// delayed ACKs and 1.5 with them; C is the rate (no term when unlimited).
func ClosedForm(p Params) ClosedFormResult {
	mss := p.MSS
	if mss == 0 {
		mss = DefaultMSS
	}
	gamma := 2.0
	if p.DelayedACK {
		gamma = 1.5
	}
	segments := math.Ceil(float64(p.SizeBytes) / float64(mss))
	rounds := 0
	if segments > 0 && p.IW > 0 {
		rounds = int(math.Ceil(math.Log(segments*(gamma-1)/float64(p.IW)+1)/math.Log(gamma) - 1e-9))
		rounds = max(rounds, 1)
	}
	transfer := 0.0
	if p.RateBitsPerSecond > 0 {
		transfer = float64(p.SizeBytes) * 8 / float64(p.RateBitsPerSecond) * 1e3
	}
	rtt := float64(p.RTTNs) / 1e6
	return ClosedFormResult{Gamma: gamma, Rounds: rounds, SizeInIWs: segments, TransferMs: transfer,
		LatencyMs: float64(rounds)*rtt + transfer}
}

// RoundsNeeded is the number of round trips slow start needs to deliver size bytes
// starting from a window of iw segments of mss bytes that doubles every round, with
// no receive-window limit and no loss (RFC 5681 with an ACK per segment).
func RoundsNeeded(sizeBytes int64, iw, mss int) int {
	if sizeBytes <= 0 || iw <= 0 || mss <= 0 {
		return 0
	}
	segments := (sizeBytes + int64(mss) - 1) / int64(mss)
	window, sent, rounds := int64(iw), int64(0), 0
	for sent < segments {
		sent += window
		window *= 2
		rounds++
	}
	return rounds
}

// Budget is the byte budget of the first rounds: what slow start lets through, with no
// rate limit, receive-window cap or loss.
type Budget struct {
	Round           int   `json:"round"`
	Segments        int   `json:"segments"`
	Bytes           int64 `json:"bytes"`
	CumulativeBytes int64 `json:"cumulative_bytes"`
}

// SlowStartBudget lists rounds until their cumulative bytes reach sizeBytes (at least
// one round, at most maxRounds): round k carries IW·γ^(k-1) segments, γ = 2 (Linux
// counts packets acknowledged, so delayed ACKs do not slow the growth), capped by
// rwndBytes when positive.
func SlowStartBudget(iw, mss int, sizeBytes, rwndBytes int64, maxRounds int) []Budget {
	var out []Budget
	cwnd := int64(iw)
	var cum int64
	for k := 1; k <= maxRounds; k++ {
		segs := cwnd
		if rwndBytes > 0 {
			segs = min(segs, max(rwndBytes/int64(mss), 1))
		}
		b := segs * int64(mss)
		cum += b
		out = append(out, Budget{Round: k, Segments: int(segs), Bytes: b, CumulativeBytes: cum})
		if cum >= sizeBytes {
			break
		}
		cwnd += segs
	}
	return out
}

// Latencies of the lab (lab package) that an ideal path lacks, measured on its
// captures: the emulator's and the kernel's processing per packet crossing, and the
// built-in server's time from a request to its answer.
const (
	LabHostDelayNs   = 200_000
	LabServerDelayNs = 350_000
)
