package quicanalysis

import (
	"fmt"
	"strings"

	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/report"
)

// At the client's vantage point a client packet sent at t can only have released
// server packets that arrive after t + RTT, RTT the smallest round trip the
// acknowledgements show (their ACK Delay taken off). A margin of RTT/8, at most 2 ms,
// absorbs the jitter of timestamps. It is tighter than TCP's 1/4 (package rounds):
// QUIC servers pace, so packets leave all through a round trip, and a quarter of it
// would count those sent just before an acknowledgement arrived as released by it.
const (
	releaseMarginDen   = 8
	releaseMarginMaxNs = 2_000_000
)

// serverDatagram is a server datagram with what the rounds need.
type serverDatagram struct {
	timeNs    int64
	bytes     int
	inFlight  bool // holds an ack-eliciting packet
	newCrypto bool // new TLS handshake bytes (CRYPTO frames of the Initial or Handshake space)
	newStream bool // new bytes of a response (a client-initiated bidirectional stream)
	newData   bool // new bytes of any CRYPTO or STREAM frame
	retx      bool // carried CRYPTO or STREAM bytes sent before and nothing new
	round     int
	// What the server knew when it sent this datagram: bytes received and sent before
	// it, whether the client's address was validated.
	receivedBefore, sentBefore int
	validated                  bool
	inFlightAfter              int // bytes in flight after it, as the server knew
	releasedNs                 int64
}

// clientEvent is a client datagram as the server came to know it.
type clientEvent struct {
	knownNs   int64
	bytes     int
	handshake bool // carries a Handshake packet: the client's address is validated
	packets   []int
}

// byteRanges tracks the highest byte sent of a stream, to tell new data from old.
type byteRanges map[uint64]uint64

func (r byteRanges) add(stream, end uint64) (isNew bool) {
	if end > r[stream] {
		r[stream] = end
		return true
	}
	return false
}

// localPathMaxRTTMs: a smallest round trip under this is a local path
// (loopback, a host next door), as a handshake's is for TCP (analysis).
const localPathMaxRTTMs = 1.0

func analyze(c *conn, captureStartNs int64, opts Options) report.Connection {
	rc := report.Connection{
		Transport:   report.TransportQUIC,
		Client:      c.client.String(),
		Server:      c.server.String(),
		Vantage:     report.VantageUnknown,
		Closed:      "open",
		ClientSYN:   report.Endpoint{WindowScale: -1},
		ServerSYN:   report.Endpoint{WindowScale: -1},
		RoundMethod: "ack_clock",
		Rounds:      []report.Round{},
		HTTP:        []report.HTTPMessage{},
		Notes:       []string{},
	}
	q := &report.QUIC{Version: "1", Decrypted: "all", ServerName: c.dec.ServerName, ALPN: c.dec.ALPN}
	rc.QUIC = q
	startNs := c.clientDgrams[0].timeNs
	lastNs := startNs
	for _, p := range c.packets {
		lastNs = max(lastNs, p.TimeNs)
	}
	rc.StartMs = float64(startNs-captureStartNs) / 1e6
	rc.DurationMs = float64(lastNs-startNs) / 1e6
	ms := func(ns int64) float64 { return float64(ns-startNs) / 1e6 }
	for _, d := range c.clientDgrams {
		rc.BytesToServer += int64(d.bytes)
	}
	for _, d := range c.serverDgrams {
		rc.BytesToClient += int64(d.bytes)
	}
	for i := range c.packets {
		p := &c.packets[i]
		if p.FromClient {
			q.ClientPackets++
		} else {
			q.ServerPackets++
		}
		if !p.Decrypted && p.Space != quic.SpaceNone {
			q.Undecrypted++
		}
		for _, f := range p.Frames {
			if f.Type == quic.FrameConnectionClose || f.Type == quic.FrameApplicationClose {
				rc.Closed = "close"
			}
		}
	}
	if q.Undecrypted > 0 {
		q.Decrypted = "initial"
		problem := c.dec.KeyProblem
		if problem == "" {
			problem = "packets could not be decrypted"
		}
		rc.Notes = append(rc.Notes, fmt.Sprintf("%d packets were not decrypted (%s): rounds and the initial window need the Handshake and 1-RTT packets; give the key log (SSLKEYLOGFILE) with --keylog", q.Undecrypted, problem))
	}
	if c.dec.Retry {
		rc.Notes = append(rc.Notes, "the server sent a Retry: the handshake took one round trip more for address validation")
	}
	if len(c.serverDgrams) == 0 {
		rc.Notes = append(rc.Notes, "no datagram from the server")
		rc.InitialWindow = &report.InitialWindow{Verdict: report.VerdictNone, Reason: "the server sent nothing"}
		return rc
	}

	clientGap, serverGap := handshakeGaps(c)
	rttNs, vantage := vantageOf(clientGap, serverGap)
	switch opts.Vantage {
	case report.VantageClient:
		rttNs, vantage = clientGap, report.VantageClient
	case report.VantageServer:
		rttNs, vantage = serverGap, report.VantageServer
	default:
		// The smallest gaps over the whole connection decide the vantage point more
		// surely than the first exchange, whose server side includes the work of a
		// signature: at the client, the server's acknowledgements come a round trip after
		// the client's packets; at the server, the client's do.
		if toServer, toClient := minRTT(c, report.VantageClient), minRTT(c, report.VantageServer); toServer > 0 && toClient > 0 {
			switch {
			case toServer > toClient && vantage != report.VantageClient:
				vantage, rttNs = report.VantageClient, toServer
			case toClient > toServer && vantage != report.VantageServer:
				vantage, rttNs = report.VantageServer, toClient
			}
		}
	}
	rc.Vantage = vantage
	if rttNs > 0 {
		v := float64(rttNs) / 1e6
		rc.HandshakeRTTMs = &v
	}
	// The smallest round trip: the handshake's includes the server's work on the
	// ClientHello (a signature), later acknowledgements do not.
	if m := minRTT(c, vantage); m > 0 && m < rttNs {
		rttNs = m
	}
	rc.MinRTTMs = float64(rttNs) / 1e6

	// The server's datagrams in rounds by the ACK clock. At the client's vantage point
	// the client's datagrams are known to the server a round trip less a margin after
	// they left (see releaseMarginDen); when that reading has the server go on after
	// a silence with nothing from the client, the server's own delays made the round
	// trip look longer than the path's, and a shorter reading is taken (settle).
	ck := newAckClock(c, rttNs, startNs)
	margin := min(rttNs/releaseMarginDen, releaseMarginMaxNs)
	var rd *clockReading
	var alternatives []*clockReading
	if vantage == report.VantageClient {
		tight := ck.replay(rttNs - margin)
		var shortened bool
		rd, shortened = ck.settle(tight)
		if shortened {
			rc.Notes = append(rc.Notes, fmt.Sprintf("the server went on after a silence that only a client datagram could have ended, sooner than the smallest acknowledgement round trip (%.1f ms) allows: "+
				"that round trip includes the server's own delays, and the server's datagrams are put in rounds with the client's known %.1f ms after they left, not %.1f ms",
				float64(rttNs)/1e6, float64(rd.shiftNs)/1e6, float64(tight.shiftNs)/1e6))
		}
		// The readings the timing cannot rule out: the acknowledgements known a margin
		// later or earlier, or earlier by up to a quarter of the round trip (as package
		// rounds allows for TCP): the smallest round trip seen may still be longer than
		// the path's; and the first reading, when settle shortened it, for the silence
		// it found unexplained may have been the path's (a queue, a late link) and not
		// the server's.
		shifts := []int64{rd.shiftNs + margin, rd.shiftNs - margin, rttNs - rttNs/4}
		if shortened {
			// The server's delays were long enough to show: they may be longer still
			// (a loaded server stalls for tens of milliseconds), down to half the
			// round trip the acknowledgements show.
			shifts = append(shifts, tight.shiftNs, rttNs/2)
		}
		for _, s := range shifts {
			if s != rd.shiftNs && s > 0 {
				alternatives = append(alternatives, ck.replay(s))
			}
		}
	} else {
		rd = ck.replay(0)
	}
	dgs := rd.dgs
	maxDatagram := ck.maxDatagram
	packetDatagram := map[int]int{}
	for i, d := range c.serverDgrams {
		for _, pi := range d.packets {
			packetDatagram[pi] = i
		}
	}
	if rd.validated {
		v := ms(rd.validatedNs - rd.shiftNs)
		q.AddressValidatedMs = &v
	}

	// The first flight: everything the server sent before an acknowledgement reached it.
	q.ClientInitialBytes = dgs[0].receivedBefore
	q.AmplificationLimitBytes = 3 * q.ClientInitialBytes
	for _, sd := range dgs {
		if sd.round == 1 {
			q.ServerFirstFlightBytes += sd.bytes
			q.ServerFirstFlightDatagrams++
		}
	}
	if rd.excess > 0 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the server sent %d bytes to the client's unvalidated address, %d more than three times the %d it had received then (RFC 9000 §8.1)", rd.excessAt, rd.excess, (rd.excessAt-rd.excess)/3))
	}
	if n := initialsBeforeAnswer(c); n > 0 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the client sent its Initial again %s before the server's first datagram arrived (probe timeouts): the server took %.1f ms to answer, and each copy raised its amplification budget",
			plural(n, "time", "times"), float64(c.serverDgrams[0].timeNs-c.clientDgrams[0].timeNs)/1e6))
	}

	rounds, indexOf := rd.rounds, rd.indexOf
	rc.Rounds = rounds
	rc.MSS = maxDatagram
	for _, sd := range dgs {
		if sd.retx {
			rc.Retransmission++
		}
	}
	largestSoFar := 0
	for _, d := range c.serverDgrams {
		probe := len(d.packets) == 1
		for _, pi := range d.packets {
			for _, f := range c.packets[pi].Frames {
				probe = probe && (f.Type == quic.FramePing || f.Type == quic.FramePadding)
			}
		}
		if probe && largestSoFar > 0 && d.bytes > largestSoFar {
			q.MTUProbes++
		}
		largestSoFar = max(largestSoFar, d.bytes)
	}
	for _, r := range rounds {
		if r.Limit == report.LimitAmplification {
			q.AmplificationLimited = true
		}
	}

	// Handshake: the rounds that carried new TLS handshake bytes.
	hs := handshakeOf(c)
	q.ServerHandshakeBytes, q.CertificateBytes, q.CertificateCompressed = hs.serverBytes, hs.certificateBytes, hs.compressed
	tlsInfo := &report.TLS{Version: "1.3"}
	for _, sd := range dgs {
		if sd.newCrypto {
			tlsInfo.ServerFlightBytes += sd.bytes
			tlsInfo.ServerFlightSegments++
			tlsInfo.HandshakeRoundTrips = max(tlsInfo.HandshakeRoundTrips, indexOf[sd.round])
		}
	}
	rc.TLS = tlsInfo
	rc.RoundTrips.TLS = tlsInfo.HandshakeRoundTrips
	for _, r := range rounds {
		if r.Phase == report.PhaseHTTP {
			rc.RoundTrips.HTTP++
		}
	}
	rc.RoundTrips.Total = rc.RoundTrips.TLS + rc.RoundTrips.HTTP
	for _, alt := range alternatives {
		if alt.unexplained >= 0 && (rd.unexplained < 0 || alt.unexplained < rd.unexplained) {
			continue // the server goes on after a silence without having heard from the client
		}
		if n := handshakeRoundTrips(alt); n != tlsInfo.HandshakeRoundTrips {
			rc.Notes = append(rc.Notes, fmt.Sprintf("at the client the handshake's round trips depend on when the server received the client's datagrams: %d with them known %.1f ms after they left, %d with %.1f ms",
				tlsInfo.HandshakeRoundTrips, float64(rd.shiftNs)/1e6, n, float64(alt.shiftNs)/1e6))
			break
		}
	}

	// The smallest round trip: the handshake's holds the server's signature.
	if rc.MinRTTMs > 0 && rc.MinRTTMs < localPathMaxRTTMs {
		rc.Notes = append(rc.Notes, fmt.Sprintf("this path is local (smallest round trip %.3f ms): the server's pacing and its own delays, not round trips, space its datagrams here, so the %s read here say nothing about a real network path, and no initial window change would matter on it; probe the site over the network, or emulate a path with slowstart lab",
			rc.MinRTTMs, report.Count(rc.RoundTrips.Total, "round trip", "round trips")))
	}
	rc.InitialWindow = windowOverReadings(rd, alternatives, maxDatagram)
	if len(rounds) > 0 && rounds[0].Phase == report.PhaseTLS {
		tlsInfo.InitialWindow = handshakeReading(rounds[0])
	}
	rc.HTTP = httpMessages(c, ms)
	rc.Diagnoses = diagnose(&rc)
	if opts.PacketLog {
		q.PacketLog = packetLog(c, dgs, packetDatagram, ms, indexOf)
	}
	return rc
}

// windowOverReadings reads the initial window from reading rd, and at the client's
// vantage point checks it against the alternative readings the timing cannot rule
// out: an exact reading stands when every reading puts the same datagrams in the
// first response round with the same bytes in flight at its end; otherwise the
// verdict claims only what holds in every reading (the smallest lower bound, and the
// largest upper bound when every reading has one).
func windowOverReadings(rd *clockReading, alternatives []*clockReading, maxDatagram int) *report.InitialWindow {
	iw := initialWindow(rd, maxDatagram)
	if len(alternatives) == 0 || iw.Verdict == report.VerdictNone {
		return iw
	}
	k := rd.firstHTTPRound()
	agree := true
	for _, alt := range alternatives {
		// The same datagrams in the round, the same bytes in flight at its end: the
		// limit may read otherwise (an earlier release makes the server look slow to
		// go on), the window does not.
		ka := alt.firstHTTPRound()
		if ka < 0 || alt.lasts[ka] != rd.lasts[k] || alt.rounds[ka].InFlightBytes != rd.rounds[k].InFlightBytes {
			agree = false
		}
	}
	if agree {
		return iw
	}
	lo, hi, bounded := 0, 0, true
	var readings []string
	for i, r := range append([]*clockReading{rd}, alternatives...) {
		w := iw
		if i > 0 {
			w = initialWindow(r, maxDatagram)
		}
		var l, h int
		switch w.Verdict {
		case report.VerdictExact:
			l, h = max(1, w.Bytes-maxDatagram+1), w.Bytes
		case report.VerdictRange:
			l, h = w.Bytes, w.BytesMax
		case report.VerdictLowerBound:
			l, bounded = w.Bytes, false
		default:
			return &report.InitialWindow{Source: "http", Segments: iw.Segments, Bytes: iw.Bytes, Verdict: report.VerdictAmbiguous,
				Unproven: []string{report.ObligationRoundsSeparable},
				Reason:   fmt.Sprintf("at the client the first response round depends on when the server received the client's datagrams, known only to within a margin; with them known %.1f ms after they left: %s", float64(r.shiftNs)/1e6, w.Reason)}
		}
		if i == 0 || l < lo {
			lo = l
		}
		hi = max(hi, h)
		readings = append(readings, fmt.Sprintf("%.1f ms: %s %d-%d bytes", float64(r.shiftNs)/1e6, w.Verdict, l, max(h, l)))
	}
	segments := func(bytes int) int { return (bytes + maxDatagram - 1) / maxDatagram }
	out := &report.InitialWindow{Source: "http", Bytes: lo, Segments: segments(lo), Unproven: []string{report.ObligationRoundsSeparable}}
	why := fmt.Sprintf("at the client the first response round depends on when the server received the client's datagrams, known only to within a margin, and the readings differ (with them known %s after they left)", strings.Join(readings, "; "))
	if bounded {
		out.Verdict, out.BytesMax, out.SegmentsMax = report.VerdictRange, hi, segments(hi)
		out.Reason = fmt.Sprintf("%s: the initial window was between %d and %d bytes", why, lo, hi)
	} else {
		out.Verdict = report.VerdictLowerBound
		out.Reason = fmt.Sprintf("%s: the initial window is at least %d bytes", why, lo)
	}
	return out
}

// handshakeRoundTrips is the reported index of the last round with new handshake bytes.
func handshakeRoundTrips(r *clockReading) int {
	n := 0
	for _, sd := range r.dgs {
		if sd.newCrypto {
			n = max(n, r.indexOf[sd.round])
		}
	}
	return n
}

// initialsBeforeAnswer counts the client's Initial datagrams that only repeated
// CRYPTO data it had sent before (copies sent on probe timeouts), captured before the
// server's first datagram. A ClientHello that takes two datagrams (a post-quantum key
// share) is not a copy.
func initialsBeforeAnswer(c *conn) int {
	copies := 0
	var sent uint64
	for _, d := range c.clientDgrams {
		if d.timeNs >= c.serverDgrams[0].timeNs {
			break
		}
		initial, fresh := false, false
		for _, pi := range d.packets {
			p := &c.packets[pi]
			if p.Type != quic.PacketInitial {
				continue
			}
			initial = true
			for _, f := range p.Frames {
				if f.Type == quic.FrameCrypto && f.Offset+f.Length > sent {
					sent, fresh = f.Offset+f.Length, true
				}
			}
		}
		if initial && !fresh {
			copies++
		}
	}
	return copies
}

// sentPacket is a server packet in its space's packet number order.
type sentPacket struct {
	pn       int64
	packet   int // index in conn.packets
	datagram int // index in the server's datagrams
}

// minRTT is the smallest round trip the acknowledgements show at this vantage point:
// at the client, from its packets to the server's first acknowledgement of each; at the
// server, the other way round; less the ACK Delay the acknowledging side reported
// (1-RTT packets, with the default exponent of 3).
func minRTT(c *conn, vantage string) int64 {
	if vantage == report.VantageUnknown {
		return 0
	}
	fromClient := vantage == report.VantageServer // the acknowledging side
	sentAt := [3]map[int64]int64{{}, {}, {}}
	for i := range c.packets {
		p := &c.packets[i]
		if p.FromClient != fromClient && p.Decrypted && p.Space <= quic.SpaceApplication {
			if _, ok := sentAt[p.Space][p.Number]; !ok {
				sentAt[p.Space][p.Number] = p.TimeNs
			}
		}
	}
	best := int64(0)
	largest := [3]int64{-1, -1, -1}
	for i := range c.packets {
		p := &c.packets[i]
		if p.FromClient != fromClient || !p.Decrypted {
			continue
		}
		for _, f := range p.Frames {
			if f.Type != quic.FrameAck && f.Type != quic.FrameAckECN {
				continue
			}
			l := f.AckRanges[0].Largest
			if l <= largest[p.Space] {
				continue
			}
			largest[p.Space] = l
			t, ok := sentAt[p.Space][l]
			if !ok {
				continue
			}
			sample := p.TimeNs - t
			if p.Space == quic.SpaceApplication {
				sample -= int64(f.AckDelay<<3) * 1000
			}
			if sample > 0 && (best == 0 || sample < best) {
				best = sample
			}
		}
	}
	return best
}

// handshakeGaps reads the gaps of the Initial packets that tell where the
// capture was taken: the gap from a client Initial to the server's first
// acknowledgement of it is a round trip at the client and short at the server,
// the gap from a server Initial to the client's acknowledgement the other way
// round (-1: not seen).
func handshakeGaps(c *conn) (clientGap, serverGap int64) {
	clientGap, serverGap = -1, -1
	sentAt := func(fromClient bool, pn int64) int64 {
		for i := range c.packets {
			p := &c.packets[i]
			if p.FromClient == fromClient && p.Space == quic.SpaceInitial && p.Decrypted && p.Number == pn {
				return p.TimeNs
			}
		}
		return -1
	}
	for i := range c.packets {
		p := &c.packets[i]
		if p.Space != quic.SpaceInitial || !p.Decrypted {
			continue
		}
		for _, f := range p.Frames {
			if f.Type != quic.FrameAck && f.Type != quic.FrameAckECN {
				continue
			}
			t := sentAt(!p.FromClient, f.AckRanges[0].Largest)
			if t < 0 {
				continue
			}
			if !p.FromClient && clientGap < 0 {
				clientGap = p.TimeNs - t
			}
			if p.FromClient && serverGap < 0 {
				serverGap = p.TimeNs - t
			}
		}
	}
	if clientGap < 0 || serverGap < 0 {
		// Without acknowledgements: the first datagrams' gaps.
		first := c.serverDgrams[0].timeNs
		var before, after int64 = c.clientDgrams[0].timeNs, -1
		for _, d := range c.clientDgrams {
			if d.timeNs <= first {
				before = d.timeNs
			} else if after < 0 {
				after = d.timeNs
			}
		}
		clientGap = first - before
		if after >= 0 {
			serverGap = after - first
		}
	}
	return clientGap, serverGap
}

// vantageOf reads the handshake round-trip time and the vantage point from the
// gaps (handshakeGaps): the round trip is the longer one.
func vantageOf(clientGap, serverGap int64) (int64, string) {
	switch {
	case serverGap < 0:
		return clientGap, report.VantageUnknown
	case clientGap > serverGap:
		return clientGap, report.VantageClient
	default:
		return serverGap, report.VantageServer
	}
}
