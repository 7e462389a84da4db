package quicanalysis

import (
	"fmt"
	"sort"

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

	rttNs, vantage := rttAndVantage(c)
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

	// The client's datagrams as the server came to know them.
	shift := int64(0)
	if vantage == report.VantageClient {
		shift = rttNs - min(rttNs/releaseMarginDen, releaseMarginMaxNs)
	}
	events := make([]clientEvent, len(c.clientDgrams))
	for i, d := range c.clientDgrams {
		ev := clientEvent{knownNs: d.timeNs + shift, bytes: d.bytes, packets: d.packets}
		for _, pi := range d.packets {
			if c.packets[pi].Type == quic.PacketHandshake {
				ev.handshake = true
			}
		}
		events[i] = ev
	}

	// Server packets by space, in packet number order, for "which round did this ACK
	// acknowledge" and for bytes in flight.
	var bySpace [3][]sentPacket
	packetDatagram := map[int]int{}
	dgs := make([]serverDatagram, len(c.serverDgrams))
	crypto, streams := byteRanges{}, byteRanges{}
	maxDatagram := 0
	for i, d := range c.serverDgrams {
		sd := serverDatagram{timeNs: d.timeNs, bytes: d.bytes}
		maxDatagram = max(maxDatagram, d.bytes)
		oldData := false
		for _, pi := range d.packets {
			p := &c.packets[pi]
			packetDatagram[pi] = i
			if p.Decrypted && p.Space <= quic.SpaceApplication {
				bySpace[p.Space] = append(bySpace[p.Space], sentPacket{p.Number, pi, i})
			}
			if p.AckEliciting() || !p.Decrypted {
				sd.inFlight = true // an undecrypted packet is taken as ack-eliciting
			}
			for _, f := range p.Frames {
				switch f.Type {
				case quic.FrameCrypto:
					if crypto.add(uint64(p.Space), f.Offset+f.Length) {
						// 1-RTT CRYPTO frames carry post-handshake messages
						// (NewSessionTicket): data, not the handshake.
						sd.newData = true
						sd.newCrypto = sd.newCrypto || p.Space != quic.SpaceApplication
					} else {
						oldData = true
					}
				case quic.FrameStream:
					if streams.add(f.StreamID, f.Offset+f.Length) || (f.Length == 0 && f.Fin) {
						sd.newData = true
						if f.StreamID%4 == 0 {
							sd.newStream = true
						}
					} else {
						oldData = true
					}
				}
			}
		}
		sd.retx = oldData && !sd.newData
		dgs[i] = sd
	}
	for s := range bySpace {
		sort.Slice(bySpace[s], func(a, b int) bool { return bySpace[s][a].pn < bySpace[s][b].pn })
	}
	roundOfLargest := func(space quic.Space, largest int64) int {
		list := bySpace[space]
		k := sort.Search(len(list), func(i int) bool { return list[i].pn > largest }) - 1
		if k < 0 {
			return 0
		}
		return dgs[list[k].datagram].round
	}
	acked := map[int]bool{} // server packets acknowledged, by index
	inFlight := 0
	ackRange := func(space quic.Space, r quic.AckRange) {
		list := bySpace[space]
		k := sort.Search(len(list), func(i int) bool { return list[i].pn >= r.Smallest })
		for ; k < len(list) && list[k].pn <= r.Largest; k++ {
			pi := list[k].packet
			if !acked[pi] {
				acked[pi] = true
				if c.packets[pi].AckEliciting() {
					inFlight -= c.packets[pi].Bytes
				}
			}
		}
	}

	next, received, sentBytes, maxAckedRound := 0, 0, 0, 0
	validated := false
	var validatedNs, releasedNs int64
	for i := range dgs {
		sd := &dgs[i]
		for next < len(events) && events[next].knownNs <= sd.timeNs {
			ev := events[next]
			next++
			received += ev.bytes
			if ev.handshake && !validated {
				validated, validatedNs = true, ev.knownNs
			}
			for _, pi := range ev.packets {
				p := &c.packets[pi]
				for _, f := range p.Frames {
					if f.Type != quic.FrameAck && f.Type != quic.FrameAckECN {
						continue
					}
					if r := roundOfLargest(p.Space, f.AckRanges[0].Largest); r > maxAckedRound {
						maxAckedRound, releasedNs = r, ev.knownNs
					}
					for _, r := range f.AckRanges {
						ackRange(p.Space, r)
					}
				}
			}
		}
		sd.receivedBefore, sd.sentBefore, sd.validated = received, sentBytes, validated
		sd.round = maxAckedRound + 1
		sd.releasedNs = releasedNs
		sentBytes += sd.bytes
		for _, pi := range c.serverDgrams[i].packets {
			if p := &c.packets[pi]; p.AckEliciting() {
				inFlight += p.Bytes
			}
		}
		sd.inFlightAfter = inFlight
	}
	if validated {
		v := ms(validatedNs - shift)
		q.AddressValidatedMs = &v
	}
	// At the client's vantage point, what the server knew is read through the shift:
	// a datagram's bytes in flight count as known only when moving the known times of
	// the acknowledgements (a quarter RTT earlier, the margin later) gives the same.
	unsure := map[int]bool{}
	if vantage == report.VantageClient {
		margin := min(rttNs/releaseMarginDen, releaseMarginMaxNs)
		// Earlier by up to a quarter of the RTT (as package rounds allows for TCP):
		// the smallest RTT seen may still be longer than the path's.
		for _, delta := range []int64{-rttNs / 4, -margin, margin} {
			for i, v := range inFlightWith(c, dgs, events, bySpace, delta) {
				if v != dgs[i].inFlightAfter {
					unsure[i] = true
				}
			}
		}
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

	// RFC 9000 §8.1: at most three times the bytes received, until the address is
	// validated. Some servers check the limit before each datagram, not within it.
	excess, excessAt := 0, 0
	for _, sd := range dgs {
		if over := sd.sentBefore + sd.bytes - 3*sd.receivedBefore; !sd.validated && over > excess {
			excess, excessAt = over, sd.sentBefore+sd.bytes
		}
	}
	if excess > 0 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the server sent %d bytes to the client's unvalidated address, %d more than three times the %d it had received then (RFC 9000 §8.1)", excessAt, excess, (excessAt-excess)/3))
	}

	rounds, indexOf, lasts := buildRounds(dgs, maxDatagram, rttNs, startNs)
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

	rc.InitialWindow = initialWindow(rounds, maxDatagram)
	if iw := rc.InitialWindow; iw.Verdict == report.VerdictExact {
		for k, r := range rounds {
			if r.Phase != report.PhaseHTTP {
				continue
			}
			if unsure[lasts[k]] {
				iw.Verdict = report.VerdictLowerBound
				iw.Bytes = r.InFlightBytes - maxDatagram
				iw.Reason = fmt.Sprintf("round %d stopped with about %d bytes in flight, but at the client the acknowledgements the server had then are known only to within the timing margin, and that margin changes the count: the window is at least %d bytes", r.Index, r.InFlightBytes, iw.Bytes)
			}
			break
		}
	}
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

// sentPacket is a server packet in its space's packet number order.
type sentPacket struct {
	pn       int64
	packet   int // index in conn.packets
	datagram int // index in the server's datagrams
}

// inFlightWith replays the acknowledgements with their known times moved by deltaNs
// and returns the bytes in flight after each server datagram.
func inFlightWith(c *conn, dgs []serverDatagram, events []clientEvent, bySpace [3][]sentPacket, deltaNs int64) []int {
	out := make([]int, len(dgs))
	acked := map[int]bool{}
	inFlight, next := 0, 0
	for i := range dgs {
		for next < len(events) && events[next].knownNs+deltaNs <= dgs[i].timeNs {
			for _, pi := range events[next].packets {
				p := &c.packets[pi]
				for _, f := range p.Frames {
					if f.Type != quic.FrameAck && f.Type != quic.FrameAckECN {
						continue
					}
					for _, r := range f.AckRanges {
						list := bySpace[p.Space]
						k := sort.Search(len(list), func(i int) bool { return list[i].pn >= r.Smallest })
						for ; k < len(list) && list[k].pn <= r.Largest; k++ {
							if q := list[k].packet; !acked[q] {
								acked[q] = true
								if c.packets[q].AckEliciting() {
									inFlight -= c.packets[q].Bytes
								}
							}
						}
					}
				}
			}
			next++
		}
		for _, pi := range c.serverDgrams[i].packets {
			if p := &c.packets[pi]; p.AckEliciting() {
				inFlight += p.Bytes
			}
		}
		out[i] = inFlight
	}
	return out
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

// rttAndVantage reads the handshake round-trip time and where the capture was taken
// from the Initial packets: the gap from a client Initial to the server's first
// acknowledgement of it is a round trip at the client and short at the server, the gap
// from a server Initial to the client's acknowledgement the other way round.
func rttAndVantage(c *conn) (int64, string) {
	clientGap, serverGap := int64(-1), int64(-1)
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
	switch {
	case serverGap < 0:
		return clientGap, report.VantageUnknown
	case clientGap > serverGap:
		return clientGap, report.VantageClient
	default:
		return serverGap, report.VantageServer
	}
}
