package analysis

import (
	"fmt"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/httpmsg"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/tlsrec"
)

// Application protocols as judged from the first bytes of the streams.
const (
	protoUnknown = iota
	protoTLS
	protoHTTP
	protoOther
)

// timedMessage remembers when an HTTP message's first and last bytes were seen.
type timedMessage struct {
	firstNs, lastNs int64
}

// connAnalyzer is the flow.Handler of one connection: it feeds the rounds tracker
// and the TLS and HTTP scanners, and turns everything into a report.Connection.
type connAnalyzer struct {
	a      *analyzer
	rounds *rounds.Tracker
	proto  int

	tls     [2]*tlsrec.Stream
	http    [2]*httpmsg.Parser
	msgTime [2][]timedMessage
	// next stream offset handed to the scanners, per direction
	fed [2]int64
	// time of the last data handed over, per direction
	lastDataNs [2]int64

	clientWindowInit int
	clientWindowMin  int
	clientWindowMax  int
	windowSeen       bool
	truncatedPayload bool
	// packets, when the Report should list them; times are absolute until build.
	packets []report.Packet
}

func newConnAnalyzer(a *analyzer, c *flow.Conn) *connAnalyzer {
	return &connAnalyzer{a: a}
}

func (ca *connAnalyzer) Segment(c *flow.Conn, s *flow.Segment) {
	if ca.rounds == nil && (s.Len > 0 || c.HandshakeACKNs != 0) {
		ca.rounds = rounds.New(rounds.Config{
			Vantage:    c.Vantage(),
			RTTNs:      c.HandshakeRTTNs(),
			MSS:        c.MSS(),
			Timestamps: c.Dirs[flow.ToServer].SYN.HasTimestamps && c.Dirs[flow.ToClient].SYN.HasTimestamps,
		})
	}
	if ca.rounds != nil {
		ca.rounds.Add(s)
	}
	if s.Dir == flow.ToServer && s.HasAck && s.Flags&0x02 == 0 {
		w := s.WindowBytes
		if !ca.windowSeen {
			ca.clientWindowInit, ca.clientWindowMin, ca.clientWindowMax, ca.windowSeen = w, w, w, true
		}
		ca.clientWindowMin = min(ca.clientWindowMin, w)
		ca.clientWindowMax = max(ca.clientWindowMax, w)
	}
	if s.NewLen > 0 {
		ca.feed(s)
	}
	if ca.a.opts.Packets {
		ca.recordPacket(c, s)
	}
}

// recordPacket lists a packet for the Report; its time is kept in ns from the
// connection's first packet until build knows the connection's start.
func (ca *connAnalyzer) recordPacket(c *flow.Conn, s *flow.Segment) {
	p := report.Packet{TimeMs: float64(s.TimeNs - c.FirstNs), Dir: "c2s", Seq: s.Offset, Len: s.Len, Ack: -1,
		Win: s.WindowBytes, Flags: flagString(s.Flags), Retx: s.Retransmission, OOO: s.OutOfOrder}
	if s.Dir == flow.ToClient {
		p.Dir = "s2c"
		if s.NewLen > 0 && ca.rounds != nil {
			p.Round = len(ca.rounds.Rounds())
		}
	}
	if s.HasAck {
		p.Ack = s.AckOffset
	}
	ca.packets = append(ca.packets, p)
}

func flagString(f uint8) string {
	var b []byte
	for _, x := range []struct {
		bit uint8
		c   byte
	}{{0x02, 'S'}, {0x01, 'F'}, {0x04, 'R'}, {0x08, 'P'}, {0x10, 'A'}, {0x20, 'U'}, {0x40, 'E'}, {0x80, 'C'}} {
		if f&x.bit != 0 {
			b = append(b, x.c)
		}
	}
	return string(b)
}

// feed hands the new bytes of a data segment to the TLS or HTTP scanner.
func (ca *connAnalyzer) feed(s *flow.Segment) {
	d := s.Dir
	data := s.Payload
	skip := int(s.NewOffset - s.Offset)
	if skip >= len(data) {
		data = nil
	} else {
		data = data[skip:]
	}
	if len(data) < s.NewLen {
		ca.truncatedPayload = true
	}
	if ca.proto == protoUnknown {
		ca.proto = sniff(data)
		switch ca.proto {
		case protoTLS:
			ca.tls[0], ca.tls[1] = tlsrec.NewStream(), tlsrec.NewStream()
		case protoHTTP:
			ca.http[flow.ToServer] = httpmsg.NewRequestParser()
			ca.http[flow.ToClient] = httpmsg.NewResponseParser(ca.http[flow.ToServer])
		}
	}
	switch ca.proto {
	case protoTLS:
		ca.tls[d].Write(s.NewOffset, data, s.NewLen)
	case protoHTTP:
		p := ca.http[d]
		p.Write(s.NewOffset, data, s.NewLen)
		ca.timeMessages(d, s.NewOffset+int64(s.NewLen), s.TimeNs)
	}
	ca.lastDataNs[d] = s.TimeNs
	ca.fed[d] = s.NewOffset + int64(s.NewLen)
}

// timeMessages records first- and last-byte times of HTTP messages as bytes up to
// writtenEnd are handed over at timeNs.
func (ca *connAnalyzer) timeMessages(d flow.Dir, writtenEnd, timeNs int64) {
	msgs := ca.http[d].Messages()
	times := ca.msgTime[d]
	for len(times) < len(msgs) {
		i := len(times)
		times = append(times, timedMessage{firstNs: timeNs})
		// A message whose end was unknown ended at the last byte before this one.
		if i > 0 && times[i-1].lastNs == 0 {
			times[i-1].lastNs = ca.lastDataNs[d]
			if ca.lastDataNs[d] == 0 {
				times[i-1].lastNs = timeNs
			}
		}
	}
	for i := range msgs {
		if times[i].lastNs == 0 && msgs[i].End >= 0 && msgs[i].End <= writtenEnd {
			times[i].lastNs = timeNs
		}
	}
	ca.msgTime[d] = times
}

// sniff tells the protocol from the first captured bytes of a stream.
func sniff(b []byte) int {
	if len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04 {
		return protoTLS
	}
	for _, m := range []string{"GET ", "POST ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ", "HTTP/1."} {
		if len(b) >= len(m) && string(b[:len(m)]) == m {
			return protoHTTP
		}
	}
	if len(b) == 0 {
		return protoUnknown
	}
	return protoOther
}

func (ca *connAnalyzer) Close(c *flow.Conn) {
	ca.a.add(ca.build(c))
}

func (ca *connAnalyzer) build(c *flow.Conn) report.Connection {
	base := c.SYNNs
	if base == 0 {
		base = c.FirstNs
	}
	ms := func(ns int64) float64 { return nsToMs(ns - base) }
	rc := report.Connection{
		Index:          c.Index,
		Client:         c.Client.String(),
		Server:         c.Server.String(),
		Vantage:        c.Vantage(),
		StartMs:        nsToMs(c.FirstNs - ca.a.firstNs),
		DurationMs:     nsToMs(c.LastNs - c.FirstNs),
		MSS:            c.MSS(),
		ClientSYN:      endpoint(&c.Dirs[flow.ToServer]),
		ServerSYN:      endpoint(&c.Dirs[flow.ToClient]),
		ClientWindow:   report.ReceiveWindow{InitialBytes: ca.clientWindowInit, MinBytes: ca.clientWindowMin, MaxBytes: ca.clientWindowMax},
		MidStream:      c.MidStream,
		Closed:         c.Closed(),
		BytesToServer:  c.Dirs[flow.ToServer].Bytes,
		BytesToClient:  c.Dirs[flow.ToClient].Bytes,
		Retransmission: c.Dirs[flow.ToClient].Retransmissions + c.Dirs[flow.ToServer].Retransmissions,
		OutOfOrder:     c.Dirs[flow.ToClient].OutOfOrder + c.Dirs[flow.ToServer].OutOfOrder,
		Rounds:         []report.Round{},
		HTTP:           []report.HTTPMessage{},
		Notes:          []string{},
	}
	rttNs := c.HandshakeRTTNs()
	if rttNs > 0 {
		v := nsToMs(rttNs)
		rc.HandshakeRTTMs = &v
		rc.MinRTTMs = v
		rc.RoundTrips.TCP = 1
	}
	if c.MidStream {
		rc.Notes = append(rc.Notes, "the capture started after the handshake: no handshake RTT, and the first round seen need not be the initial window")
	}
	if ca.truncatedPayload {
		rc.Notes = append(rc.Notes, "payloads were cut by the capture's snaplen: TLS and HTTP boundaries past the captured bytes are inferred or unknown")
	}
	if rc.MSS == 0 {
		rc.MSS = 1448
		rc.Notes = append(rc.Notes, "no SYN options seen: segments are counted with an MSS of 1448 bytes")
	}
	if rc.Vantage == report.VantageUnknown && !c.MidStream {
		rc.Notes = append(rc.Notes, "the vantage point could not be told from the handshake")
	}

	var msgEnds []int64
	var tlsInfo *tlsSummary
	if ca.proto == protoTLS {
		tlsInfo = ca.summarizeTLS(c)
	}
	var raw []rounds.Round
	if ca.rounds != nil {
		rc.RoundMethod = ca.rounds.Method()
		if rc.RoundMethod == rounds.MethodGaps {
			rc.Notes = append(rc.Notes, "rounds were split by gaps in the server's sending (no handshake or timestamps to follow the ACK clock): treat them as estimates")
		}
		raw = ca.rounds.Rounds()
		if tlsInfo != nil {
			tlsInfo.locate(raw)
			msgEnds = append(msgEnds, tlsInfo.flightEnd, tlsInfo.handshakeEnd)
		}
		msgEnds = append(msgEnds, ca.responseEnds()...)
		raw = ca.rounds.Label(msgEnds)
	}

	var cum int64
	for i, r := range raw {
		cum += int64(r.Bytes)
		rr := report.Round{
			Index:              i + 1,
			StartMs:            ms(r.FirstNs),
			EndMs:              ms(r.LastNs),
			Segments:           r.Segments,
			LossProbeSegments:  r.ProbeSegments,
			Bytes:              r.Bytes,
			CumulativeBytes:    cum,
			Packets:            r.Packets,
			Retransmissions:    r.Retransmissions,
			InFlightBytes:      int(r.InFlightBytes),
			ReceiveWindowBytes: r.ReceiveWindowBytes,
			WindowFull:         r.WindowRoomBytes < int64(rc.MSS),
			Limit:              r.Limit,
			Phase:              ca.phase(r, tlsInfo),
		}
		if rttNs > 0 {
			rr.StartRTTs = float64(r.FirstNs-base) / float64(rttNs)
		}
		rc.Rounds = append(rc.Rounds, rr)
		if rr.Phase == report.PhaseTLS {
			rc.RoundTrips.TLS++
		} else {
			rc.RoundTrips.HTTP++
		}
	}
	rc.RoundTrips.Total = rc.RoundTrips.TCP + rc.RoundTrips.TLS + rc.RoundTrips.HTTP

	if tlsInfo != nil {
		rc.TLS = tlsInfo.report(raw)
	}
	rc.InitialWindow = ca.initialWindow(c, raw, tlsInfo)
	rc.HTTP = ca.httpMessages(ms)
	for i := range ca.packets {
		ca.packets[i].TimeMs = ms(int64(ca.packets[i].TimeMs) + c.FirstNs)
	}
	rc.Packets = ca.packets
	return rc
}

func endpoint(d *flow.DirState) report.Endpoint {
	if !d.SYNSeen {
		return report.Endpoint{WindowScale: -1}
	}
	return report.Endpoint{
		MSS:           int(d.SYN.MSS),
		WindowScale:   int(d.SYN.WindowScale),
		SACKPermitted: d.SYN.SACKPermitted,
		Timestamps:    d.SYN.HasTimestamps,
	}
}

// responseEnds lists the stream offsets where cleartext HTTP responses ended.
func (ca *connAnalyzer) responseEnds() []int64 {
	p := ca.http[flow.ToClient]
	if p == nil {
		return nil
	}
	var ends []int64
	for _, m := range p.Messages() {
		if m.End > 0 {
			ends = append(ends, m.End)
		}
	}
	return ends
}

func (ca *connAnalyzer) phase(r rounds.Round, t *tlsSummary) string {
	switch {
	case t != nil && r.StartOffset < t.handshakeEnd:
		return report.PhaseTLS
	case t != nil && t.http:
		return report.PhaseHTTP
	case ca.proto == protoHTTP:
		return report.PhaseHTTP
	}
	return report.PhaseData
}

// initialWindow picks the connection's IW reading: the TLS server flight where the
// connection is TLS, upgraded by the first HTTP round where that is sound; the first
// round otherwise.
func (ca *connAnalyzer) initialWindow(c *flow.Conn, raw []rounds.Round, t *tlsSummary) *report.InitialWindow {
	if c.MidStream {
		return &report.InitialWindow{Verdict: report.VerdictNone, Source: report.PhaseHTTP,
			Reason: "the capture started after the handshake, so the first round was not seen"}
	}
	if t == nil {
		return rounds.InitialWindow(raw, report.PhaseHTTP)
	}
	iw := t.iw
	if iw == nil || iw.Verdict != report.VerdictLowerBound {
		return iw
	}
	// The flight fit in the IW. The first HTTP round shows the window after the
	// handshake: slow start grew it by at most one segment per segment acknowledged
	// during the handshake (and not at all, per RFC 7661 and Linux, while the sender
	// used less than half of it). If that round is at least three times the
	// handshake's segments, growth can't have happened: it is the IW itself.
	var hsSegs int
	for _, r := range raw {
		if r.StartOffset >= t.handshakeEnd {
			if r.Limit != report.LimitCwnd || r.Retransmissions > 0 || r.OutOfOrder > 0 || r.Lost > 0 {
				break
			}
			window := r.WindowSegments()
			if window >= 3*hsSegs {
				return &report.InitialWindow{Segments: window, Bytes: r.WindowBytes(), Verdict: report.VerdictExact, Source: report.PhaseHTTP,
					Reason: fmt.Sprintf("the TLS flight (%d segments) fit in the window; the first HTTP round was cut by the congestion window at %d segments, at least 3× the handshake's segments, so the window had not grown during the handshake", t.flightSegments, window) + r.ProbeNote()}
			}
			lo := max(iw.Segments, window-hsSegs)
			out := *iw
			out.Reason = fmt.Sprintf("the TLS flight (%d segments) fit in the window; the first HTTP round was cut at %d segments after %d handshake segments were acknowledged, so the initial window is between %d and %d segments", t.flightSegments, window, hsSegs, lo, window) + r.ProbeNote()
			out.Segments = lo
			out.Bytes = min(lo*max(c.MSS(), 536), r.WindowBytes())
			if lo == iw.Segments {
				out.Bytes = iw.Bytes
			}
			return &out
		}
		hsSegs += r.Segments
	}
	return iw
}

func (ca *connAnalyzer) httpMessages(ms func(int64) float64) []report.HTTPMessage {
	out := []report.HTTPMessage{}
	req, resp := ca.http[flow.ToServer], ca.http[flow.ToClient]
	if req == nil {
		return out
	}
	reqs, resps := req.Messages(), resp.Messages()
	for i, q := range reqs {
		m := report.HTTPMessage{Method: q.Method, Path: q.Target, Incomplete: q.Incomplete}
		if i < len(ca.msgTime[flow.ToServer]) {
			v := ms(ca.msgTime[flow.ToServer][i].firstNs)
			m.RequestMs = &v
		}
		if i < len(resps) {
			r := resps[i]
			m.Status = r.Status
			m.Chunked = r.Chunked
			m.Incomplete = m.Incomplete || r.Incomplete
			if r.End >= 0 {
				m.Bytes = r.End - r.Offset
				if r.HeaderEnd >= 0 {
					m.BodyBytes = r.End - r.HeaderEnd
				}
			} else {
				end := ca.fed[flow.ToClient]
				if i+1 < len(resps) {
					end = resps[i+1].Offset
				}
				m.Bytes = end - r.Offset
				if r.HeaderEnd >= 0 {
					m.BodyBytes = end - r.HeaderEnd
				}
				m.Incomplete = true
			}
			if i < len(ca.msgTime[flow.ToClient]) {
				t := ca.msgTime[flow.ToClient][i]
				v := ms(t.firstNs)
				m.FirstByteMs = &v
				last := t.lastNs
				if last == 0 {
					last = ca.lastDataNs[flow.ToClient]
				}
				w := ms(last)
				m.LastByteMs = &w
			}
		}
		out = append(out, m)
	}
	return out
}

// tlsSummary is what the TLS scanners and the rounds say of the handshake.
type tlsSummary struct {
	version string
	http    bool // ALPN or the port says the application data is HTTP
	// clientHelloEnd: end offset of the client's first flight. clientAppStart: offset
	// of the client's first application-data record (TLS 1.3: its encrypted Finished).
	clientHelloEnd int64
	clientAppStart int64
	// Filled by locate: end of the server's first flight and of its handshake.
	flightEnd      int64
	handshakeEnd   int64
	flightBytes    int
	flightSegments int
	flightRounds   []rounds.Round
	handshakeRTs   int
	iw             *report.InitialWindow
}

func (ca *connAnalyzer) summarizeTLS(c *flow.Conn) *tlsSummary {
	port := c.Server.Port()
	t := &tlsSummary{clientHelloEnd: -1, clientAppStart: -1, http: port == 443 || port == 8443}
	cs, ss := ca.tls[flow.ToServer], ca.tls[flow.ToClient]
	ch, sh := cs.Hello(), ss.Hello()
	if v := sh.NegotiatedVersion; v != 0 {
		t.version = tlsrec.VersionString(v)
	}
	for _, p := range append(append([]string{}, ch.ALPN...), sh.ALPN...) {
		if p == "h2" || p == "http/1.1" || p == "http/1.0" {
			t.http = true
		}
	}
	for _, r := range cs.Records() {
		if t.clientHelloEnd < 0 {
			t.clientHelloEnd = r.End()
		}
		if r.ContentType == 23 && t.clientAppStart < 0 {
			t.clientAppStart = r.Offset
		}
	}
	if t.clientHelloEnd < 0 {
		t.clientHelloEnd = 1 // at least one byte: the hello started the stream
	}
	return t
}

// locate finds the server's first flight (rounds released by the ClientHello alone)
// and its handshake (rounds released before the client's first application data).
func (t *tlsSummary) locate(raw []rounds.Round) {
	appStart := t.clientAppStart
	for i, r := range raw {
		if r.ClientDataAtStart <= t.clientHelloEnd {
			t.flightEnd = r.EndOffset
			t.flightBytes += r.Bytes
			t.flightSegments += r.Segments
			t.flightRounds = raw[:i+1]
		}
		if appStart < 0 || r.ClientDataAtStart <= appStart {
			if appStart < 0 && r.ClientDataAtStart > t.clientHelloEnd && t.handshakeRTs >= 2 {
				// Unknown client records: assume the classic two round trips at most.
				continue
			}
			t.handshakeEnd = r.EndOffset
			t.handshakeRTs++
		}
	}
	if t.version == "1.3" {
		// The server's handshake is its first flight; what follows the client's
		// Finished (session tickets) rides with the response.
		t.handshakeEnd = t.flightEnd
		t.handshakeRTs = len(t.flightRounds)
	}
}

func (t *tlsSummary) report(labeled []rounds.Round) *report.TLS {
	// The flight's rounds were labeled in place; re-slice from the labeled rounds.
	fr := labeled[:len(t.flightRounds)]
	t.iw = rounds.InitialWindow(fr, "tls")
	if len(fr) > 0 && fr[0].Limit == report.LimitCwnd {
		t.iw.Reason = fmt.Sprintf("the server's TLS flight (%d segments) was cut after %d segments and finished one round trip later", t.flightSegments, fr[0].WindowSegments()) + fr[0].ProbeNote()
	} else if t.iw.Verdict == report.VerdictLowerBound {
		t.iw.Reason = fmt.Sprintf("the server's whole TLS flight (%d segments) fit in the first round, so the window is at least that", t.flightSegments)
	}
	return &report.TLS{
		Version:              t.version,
		ServerFlightBytes:    t.flightBytes,
		ServerFlightSegments: t.flightSegments,
		HandshakeRoundTrips:  t.handshakeRTs,
		InitialWindow:        t.iw,
	}
}
