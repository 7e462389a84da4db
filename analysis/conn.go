package analysis

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/httpmsg"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/tlshttp"
	"github.com/slowstart/slowstart/tlsrec"
	"github.com/slowstart/slowstart/verdict"
)

// Application protocols as judged from the first bytes of the streams.
const (
	protoUnknown = iota
	protoTLS
	protoHTTP
	protoOther
)

// connAnalyzer is the flow.Handler of one connection: it feeds the rounds tracker
// and the TLS and HTTP scanners, and turns everything into a report.Connection.
type connAnalyzer struct {
	env *connEnv
	// captureNs is the input's first packet time (start_ms counts from it).
	captureNs int64
	rounds    *rounds.Tracker // in plain, or in data once the connection is found to be HTTP
	plain     *roundsState
	data      *dataState
	rttNs     int64 // the RTT the rounds tracker was last given
	// clientDataRTTNs is, at the client, the round trip the client's data showed
	// when the server's first data came (-1: none; 0: not yet).
	clientDataRTTNs int64
	proto           int

	tls [2]*tlsrec.Stream
	// decrypt decrypts a TLS connection with the key log's secrets (nil without a
	// key log) and finds the HTTP exchanges inside.
	decrypt *tlshttp.Conn
	http    [2]*httpmsg.Parser
	msgTime [2]messageTimes
	// timedFrom is, per direction, the first message whose last byte is not
	// yet timed: the ones before it are done, and timeMessages starts there
	// (a keep-alive connection of many requests costs no more per segment).
	timedFrom [2]int
	// next stream offset handed to the scanners, per direction
	fed [2]int64
	// time of the last data handed over, per direction
	lastDataNs [2]int64

	clientWindowInit int
	clientWindowMin  int
	clientWindowMax  int
	windowSeen       bool
	truncatedPayload bool
	// packets, when the Report should list them, kept small until build.
	packets []listedPacket
	// packetStride: one packet in packetStride is kept once the list reached the
	// cap (Options.PacketCap): a list of at most the cap, spread over the whole
	// connection. packetsSeen counts the packets offered.
	packetStride, packetsSeen int64
}

// dataState is an HTTP connection's rounds tracker and HTTP parsers, in one
// allocation: a packet then reads memory next to the tracker's instead of in
// three objects apart.
type dataState struct {
	rounds rounds.Tracker
	http   [2]httpmsg.Parser
}

// roundsState is the rounds tracker alone, made at a connection's first data
// (a connection that carries none, such as a SYN a flood sent, makes none),
// before its protocol is known. A connection found to be HTTP moves its
// tracker into a dataState; the others (TLS, most of what a capture holds)
// keep this one and never hold the two HTTP parsers' 1,152 bytes.
type roundsState struct {
	rounds rounds.Tracker
}

// dataStates and roundsStates keep the states of connections whose final
// report was built, cleared, for new connections: a capture of many short
// connections then allocates (and collects) a third less.
var (
	dataStates   = sync.Pool{New: func() any { return new(dataState) }}
	roundsStates = sync.Pool{New: func() any { return new(roundsState) }}
)

// startHTTP gives the connection its HTTP parsers, in a dataState its rounds
// tracker moves into. Called from feed, after the segment went to the tracker:
// nothing holds a pointer into the tracker then.
func (ca *connAnalyzer) startHTTP() {
	d := dataStates.Get().(*dataState)
	if ca.plain != nil {
		d.rounds = ca.plain.rounds
		*ca.plain = roundsState{}
		roundsStates.Put(ca.plain)
		ca.plain = nil
		ca.rounds = &d.rounds
	}
	ca.data = d
	h := &d.http
	h[flow.ToServer].InitRequest()
	h[flow.ToClient].InitResponse(&h[flow.ToServer])
	ca.http = [2]*httpmsg.Parser{&h[flow.ToServer], &h[flow.ToClient]}
}

// releaseData gives the connection's tracker and parsers back once its final
// report is built: nothing reads them after that (the report holds copies, and
// slices of its own).
func (ca *connAnalyzer) releaseData() {
	if ca.rounds != nil {
		ca.rounds.Release()
	}
	if ca.data != nil {
		*ca.data = dataState{}
		dataStates.Put(ca.data)
	}
	if ca.plain != nil {
		*ca.plain = roundsState{}
		roundsStates.Put(ca.plain)
	}
	ca.data, ca.plain, ca.rounds, ca.http = nil, nil, nil, [2]*httpmsg.Parser{}
}

func newConnAnalyzer(env *connEnv, c *flow.Conn) *connAnalyzer {
	return &connAnalyzer{env: env, captureNs: env.captureNs}
}

func (ca *connAnalyzer) Segment(c *flow.Conn, s *flow.Segment) {
	if ca.rounds == nil && (s.Len > 0 || c.HandshakeACKNs != 0) {
		cfg := rounds.Config{
			Vantage:    c.Vantage(),
			RTTNs:      c.RTTNs(),
			SegmentCap: c.SegmentCap(flow.ToClient),
			OwnMSS:     c.SegmentCap(flow.ToServer),
			Timestamps: c.Dirs[flow.ToServer].SYN.HasTimestamps && c.Dirs[flow.ToClient].SYN.HasTimestamps,
		}
		if sa := c.Dirs[flow.ToClient]; sa.SYNSeen && sa.SYNCount == 1 && sa.SYN.HasTimestamps && c.SYNACKNs != 0 {
			// One SYN/ACK: its timestamp and capture time start the server's clock.
			cfg.SYNACKTSVal, cfg.SYNACKNs = sa.SYN.TSVal, c.SYNACKNs
		}
		if cs := c.Dirs[flow.ToServer]; cs.SYNSeen && cs.SYNCount == 1 && cs.SYN.HasTimestamps && c.SYNNs != 0 {
			// One SYN: the client's clock is judged from it.
			cfg.ClientSYNTSVal, cfg.ClientSYNNs = cs.SYN.TSVal, c.SYNNs
		}
		ca.plain = roundsStates.Get().(*roundsState)
		ca.plain.rounds.Init(cfg)
		ca.rounds = &ca.plain.rounds
	}
	if ca.rounds != nil {
		if ca.clientDataRTTNs == 0 && s.Dir == flow.ToClient && s.NewLen > 0 && c.Vantage() == flow.VantageClient {
			// The round trip the client's data showed by the server's first data:
			// the one in force when the first rounds went out (a long-lived
			// connection's path can change later).
			ca.clientDataRTTNs = max(c.Dirs[flow.ToServer].MinAckDelayNs, -1)
		}
		if rtt := roundsRTTNs(c, ca.clientDataRTTNs); rtt != ca.rttNs {
			ca.rttNs = rtt
			ca.rounds.SetRTT(rtt)
		}
		if !ca.closeAlert(c, s) {
			ca.rounds.Add(s)
		}
	}
	if s.Dir == flow.ToServer && s.HasAck && s.Flags&0x02 == 0 {
		w := s.WindowBytes
		if !ca.windowSeen {
			ca.clientWindowInit, ca.clientWindowMin, ca.clientWindowMax, ca.windowSeen = w, w, w, true
		}
		ca.clientWindowMin = min(ca.clientWindowMin, w)
		ca.clientWindowMax = max(ca.clientWindowMax, w)
	}
	if s.NewLen > 0 && s.NewOffset >= 0 {
		ca.feed(s)
	}
	if ca.decrypt != nil && s.Len > 0 && s.Offset >= 0 {
		// Whole segments, retransmissions too: bytes that fill a hole late still
		// complete a record.
		ca.decrypt.Write(s.Dir, s.Offset, s.Payload, s.Len, s.TimeNs)
	}
	if ca.env.opts.Packets {
		if c.FirstOrdinal > ca.env.packetsFrom.Load() {
			ca.packets, ca.packetStride = nil, 0 // no longer wanted
		} else {
			ca.recordPacket(c, s)
		}
	}
}

// closeAlert reports whether s is the server's TLS alert answering the
// client's close: one alert record alone in its segment (TLS 1.2 shows the
// type; a TLS 1.3 alert is an application-data record of 19 bytes: the alert,
// its type and the 16-byte tag), sent after the client's FIN and after data of
// the server's. It is the connection's teardown, not a round of the server's
// data: a capture that runs a round trip past the client's close would
// otherwise count it as one more.
func (ca *connAnalyzer) closeAlert(c *flow.Conn, s *flow.Segment) bool {
	if ca.proto != protoTLS || s.Dir != flow.ToClient || s.NewLen == 0 || s.NewOffset != s.Offset ||
		!c.Dirs[flow.ToServer].FINSeen || ca.fed[flow.ToClient] == 0 || len(s.Payload) < tlsrec.RecordHeaderBytes {
		return false
	}
	p := s.Payload
	length := int(binary.BigEndian.Uint16(p[3:5]))
	if !tlsrec.PlausibleHeader(p) || tlsrec.RecordHeaderBytes+length != s.NewLen {
		return false // not one TLS record alone
	}
	return p[0] == tlsrec.ContentAlert || (p[0] == tlsrec.ContentApplicationData && length == tls13AlertRecordBytes)
}

// tls13AlertRecordBytes is the body of a TLS 1.3 record holding one alert: the
// alert's 2 bytes, the inner content type and the AEAD's 16-byte tag.
const tls13AlertRecordBytes = 2 + 1 + 16

// recordPacket lists a packet for the Report; its time is kept in ns from the
// connection's first packet until build knows the connection's start.
func (ca *connAnalyzer) recordPacket(c *flow.Conn, s *flow.Segment) {
	ca.packetsSeen++
	if ca.packetStride == 0 {
		ca.packetStride = 1
	}
	if (ca.packetsSeen-1)%ca.packetStride != 0 {
		return
	}
	if limit := ca.env.opts.packetCap(); len(ca.packets) >= limit {
		// Full: keep every other one, and from now on one in twice as many.
		kept := ca.packets[:0]
		for i := 0; i < len(ca.packets); i += 2 {
			kept = append(kept, ca.packets[i])
		}
		ca.packets = kept
		ca.packetStride *= 2
		if (ca.packetsSeen-1)%ca.packetStride != 0 {
			return
		}
	}
	p := listedPacket{timeNs: s.TimeNs - c.FirstNs, seq: s.Offset, ack: -1, len: uint32(s.Len),
		win: uint32(s.WindowBytes), flags: s.Flags}
	if s.Dir == flow.ToClient {
		p.bits |= listedToClient
		if s.NewLen > 0 && ca.rounds != nil {
			p.round = uint32(ca.rounds.Count())
		}
	}
	if s.Retransmission {
		p.bits |= listedRetx
	}
	if s.OutOfOrder {
		p.bits |= listedOOO
	}
	if s.HasAck {
		p.ack = s.AckOffset
	}
	ca.packets = append(ca.packets, p)
}

// listedPacket is a packet kept for the Report's list in 40 bytes (a
// report.Packet takes 88): a page of thousands of open connections holds
// millions of them. Its time counts from the connection's first packet; a
// window fits (65535 << 14 at most), as does a captured segment's length.
type listedPacket struct {
	timeNs   int64
	seq, ack int64 // ack -1: no ACK flag
	len, win uint32
	round    uint32
	flags    uint8
	bits     uint8 // listedToClient, listedRetx, listedOOO
}

const (
	listedToClient = 1 << iota
	listedRetx
	listedOOO
)

// appendListed appends list's packets as the Report lists them: times made
// absolute with the connection's firstNs, then given in ms by ms.
func appendListed(out []report.Packet, list []listedPacket, firstNs int64, ms func(int64) float64) []report.Packet {
	for _, p := range list {
		rp := report.Packet{TimeMs: ms(p.timeNs + firstNs), Dir: "c2s", Seq: p.seq, Len: int(p.len), Ack: p.ack,
			Win: int(p.win), Flags: flagString(p.flags), Retx: p.bits&listedRetx != 0, OOO: p.bits&listedOOO != 0,
			Round: int(p.round)}
		if p.bits&listedToClient != 0 {
			rp.Dir = "s2c"
		}
		out = append(out, rp)
	}
	return out
}

// flagString names TCP flags as the Report's packets do ("SA", "PA", "FA"...),
// from a table made once: a string per packet listed was most of a live
// view's garbage.
func flagString(f uint8) string { return flagStrings[f] }

var flagStrings = func() (t [256]string) {
	for f := range t {
		t[f] = makeFlagString(uint8(f))
	}
	return t
}()

func makeFlagString(f uint8) string {
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
			if ca.env.opts.KeyLog != nil {
				ca.decrypt = tlshttp.New(ca.env.opts.KeyLog)
			}
		case protoHTTP:
			ca.startHTTP()
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
	p := ca.http[d]
	count := p.Count()
	times := &ca.msgTime[d]
	if from := ca.timedFrom[d]; from == count-1 && times.Len() == count {
		// Only the last message is untimed, as it is through a long body: it
		// is timed once its end is handed over (what the loops below find).
		if end := p.MessageEnd(from); end < 0 || end > writtenEnd {
			return
		}
	}
	for times.Len() < count {
		i := times.Len()
		times.Append(timedMessage{firstNs: timeNs})
		// A message whose end was unknown ended at the last byte before this one.
		if i > 0 && !times.Timed(i-1) {
			prev := times.Open(i - 1)
			prev.lastNs = ca.lastDataNs[d]
			if ca.lastDataNs[d] == 0 {
				prev.lastNs = timeNs
			}
		}
	}
	from := ca.timedFrom[d]
	for i := from; i < count; i++ {
		if times.Timed(i) {
			continue
		}
		if end := p.MessageEnd(i); end >= 0 && end <= writtenEnd {
			times.Open(i).lastNs = timeNs
		}
	}
	for from < count && times.Timed(from) {
		from++
	}
	ca.timedFrom[d] = from
	// Times that are all known change no more.
	times.freeze(from)
}

// sniff tells the protocol from the first captured bytes of a stream.
func sniff(b []byte) int {
	if len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04 {
		return protoTLS
	}
	if _, ok := tlsrec.SSLv2Hello(b); ok {
		return protoTLS // a ClientHello in SSL 2.0's format, before SSL 3.0 or TLS records
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
	ca.env.finish(c, ca)
}

// build makes the connection's report in three stages whose types fix their
// order: annotate (what the TLS and HTTP scanners found: the TLS flight, the
// decrypted exchanges, where messages end), label (the server's rounds cut at
// those ends and named by what limited them), assemble (the report: rounds,
// round trips, the verdict, the HTTP messages, packets). A snapshot of a
// connection still open (final false) leaves the analyzer as it was, to go on.
func (ca *connAnalyzer) build(c *flow.Conn, final bool) report.Connection {
	a := ca.annotate(c, final)
	defer a.releaseMessages()
	return ca.assemble(c, ca.label(a))
}

// annotated is the first stage's product: the connection's TLS and HTTP
// annotations and the notes they add, before any round is labelled.
type annotated struct {
	final bool
	// tls: the TLS handshake (nil for a connection that is not TLS), located
	// on the server's rounds.
	tls *tlsSummary
	// decrypted: the exchanges inside a TLS connection decrypted with a key log.
	decrypted *tlshttp.Result
	// msgEnds: the stream offsets of the server's message ends, where a round
	// is cut (the TLS flight, the handshake, each response).
	msgEnds []int64
	notes   []string
	// messages: the cleartext HTTP requests [0] and responses [1], decoded
	// once for the whole report (nil when the connection is not HTTP).
	messages *[2][]httpmsg.Message
}

// releaseMessages gives the decoded messages' slices back for the next
// report: the report holds copies of what it needs (the strings are shared,
// and immutable).
func (a *annotated) releaseMessages() {
	if m := a.messages; m != nil {
		clear(m[0])
		clear(m[1])
		m[0], m[1] = m[0][:0], m[1][:0]
		messageScratch.Put(m)
		a.messages = nil
	}
}

// annotate closes what a final report closes (the HTTP parsers, the
// decryption) and gathers the TLS and HTTP annotations.
func (ca *connAnalyzer) annotate(c *flow.Conn, final bool) annotated {
	a := annotated{final: final}
	if final {
		for _, p := range ca.http {
			if p != nil {
				p.Close()
			}
		}
	}
	if req, resp := ca.http[flow.ToServer], ca.http[flow.ToClient]; req != nil && resp != nil {
		m := messageScratch.Get().(*[2][]httpmsg.Message)
		m[0] = req.AppendMessages(m[0][:0])
		m[1] = resp.AppendMessages(m[1][:0])
		a.messages = m
	}
	if ca.proto == protoTLS {
		a.tls = ca.summarizeTLS(c)
	}
	if ca.decrypt != nil && final {
		res := ca.decrypt.Close()
		ca.decrypt = nil
		if res.Decrypted {
			a.decrypted = &res
			for _, x := range res.Exchanges {
				if x.ResponseEnd > 0 {
					a.msgEnds = append(a.msgEnds, x.ResponseEnd)
				}
			}
			for _, p := range res.Decryption.Problems {
				a.notes = append(a.notes, "decryption: "+p.String())
			}
		} else if res.NoKeysReason != "" {
			a.notes = append(a.notes, "not decrypted: "+res.NoKeysReason)
		}
	}
	if ca.rounds == nil {
		return a
	}
	if a.tls != nil {
		a.tls.locate(ca.rounds.Rounds())
		if a.decrypted != nil && a.decrypted.HandshakeEnd[flow.ToClient] > 0 {
			// The server's Finished, decrypted: where its handshake ends exactly.
			a.tls.handshakeEnd = a.decrypted.HandshakeEnd[flow.ToClient]
			a.tls.http = a.tls.http || a.decrypted.Protocol != ""
		}
		a.msgEnds = append(a.msgEnds, a.tls.flightEnd, a.tls.handshakeEnd)
	}
	a.msgEnds = appendResponseEnds(a.msgEnds, a.messages)
	return a
}

// labelled is the second stage's product: the server's rounds, cut at the
// messages' ends and labelled, with how they were split.
type labelled struct {
	annotated
	raw    []rounds.Round
	method string
	// methodNotes say what the way the rounds were split means for them.
	methodNotes []string
}

// label cuts and labels the server's rounds; a snapshot labels a copy.
func (ca *connAnalyzer) label(a annotated) labelled {
	l := labelled{annotated: a}
	if ca.rounds == nil {
		return l
	}
	l.method = ca.rounds.Method()
	if n := ca.rounds.MethodNote(); n != "" {
		l.methodNotes = append(l.methodNotes, n)
	}
	if l.method == rounds.MethodGaps {
		l.methodNotes = append(l.methodNotes, "rounds were split by gaps in the server's sending (no handshake or timestamps to follow the ACK clock): treat them as estimates")
	}
	if a.final {
		l.raw = ca.rounds.Label(a.msgEnds, ca.ending())
	} else {
		l.raw = ca.rounds.LabelCopy(a.msgEnds, ca.ending())
	}
	return l
}

// assemble makes the report from the labelled rounds and the annotations.
func (ca *connAnalyzer) assemble(c *flow.Conn, l labelled) report.Connection {
	final, tlsInfo, raw := l.final, l.tls, l.raw
	base := c.SYNNs
	if base == 0 {
		base = c.FirstNs
	}
	ms := func(ns int64) float64 { return nsToMs(ns - base) }
	toServer, toClient := &c.Dirs[flow.ToServer], &c.Dirs[flow.ToClient]
	rc := report.Connection{
		Index:                c.Index,
		Client:               c.Client.String(),
		Server:               c.Server.String(),
		Vantage:              c.Vantage(),
		StartMs:              nsToMs(c.FirstNs - ca.captureNs),
		DurationMs:           nsToMs(c.LastNs - c.FirstNs),
		MSS:                  c.SegmentCap(flow.ToClient),
		ClientSYN:            endpoint(toServer),
		ServerSYN:            endpoint(toClient),
		ClientWindow:         report.ReceiveWindow{InitialBytes: ca.clientWindowInit, MinBytes: ca.clientWindowMin, MaxBytes: ca.clientWindowMax},
		MidStream:            c.MidStream,
		Closed:               c.Closed(),
		BytesToServer:        toServer.Bytes,
		BytesToClient:        toClient.Bytes,
		MissingBytesToServer: toServer.MissingBytes(),
		MissingBytesToClient: toClient.MissingBytes(),
		Retransmission:       int(toClient.Retransmissions + toServer.Retransmissions),
		OutOfOrder:           int(toClient.OutOfOrder + toServer.OutOfOrder),
		RoundMethod:          l.method,
		Rounds:               []report.Round{},
		HTTP:                 []report.HTTPMessage{},
		Notes:                make([]string, 0, 6), // room for the usual few: one allocation
	}
	if hs := handshakeRTTNs(c); hs > 0 {
		v := nsToMs(hs)
		rc.HandshakeRTTMs = &v
		if c.HandshakeACKNs != 0 {
			rc.RoundTrips.TCP = 1
		}
	}
	rttNs := c.RTTNs()
	rc.MinRTTMs = nsToMs(rttNs)
	if ca.rounds != nil && ca.rounds.Count() > 0 {
		// What a full segment of the server's carried, as its frames show it.
		rc.MSS = ca.rounds.FullSegmentBytes()
	}
	ca.noteCapture(c, &rc)
	rc.Notes = append(rc.Notes, l.notes...)
	rc.Notes = append(rc.Notes, l.methodNotes...)

	if len(raw) > 0 {
		rc.Rounds = make([]report.Round, 0, len(raw))
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
			CaptureGaps:        r.Holes,
			InFlightBytes:      int(r.InFlightBytes),
			ReceiveWindowBytes: r.ReceiveWindowBytes,
			WindowFull:         r.WindowRoomBytes < int64(max(rc.MSS, 1)),
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

	readings := verdict.Read(ca.verdictInput(c, raw, tlsInfo, base, l.messages))
	rc.InitialWindow = readings.InitialWindow
	if tlsInfo != nil {
		rc.TLS = tlsInfo.report(readings.TLSFlight)
		if tlsInfo.helloRetry {
			rc.Notes = append(rc.Notes, "the server answered the first ClientHello with a HelloRetryRequest (it wanted another key share): the TLS handshake took a round trip more")
		}
	}
	spans := newRoundSpans(raw)
	if l.decrypted != nil {
		rc.HTTP = exchangeMessages(l.decrypted, spans, ms)
	} else {
		rc.HTTP = ca.httpMessages(l.messages, ms, spans)
	}
	var packets []report.Packet
	if ca.packets != nil {
		packets = appendListed(make([]report.Packet, 0, len(ca.packets)), ca.packets, c.FirstNs, ms)
	}
	rc.Packets = packets
	if ca.packetStride > 1 {
		rc.PacketStride = int(ca.packetStride)
	}
	if final {
		ca.packets = nil
	}
	return rc
}

// noteCapture adds the notes that say what the capture did not show or showed
// twice, and what the numbers were read with.
func (ca *connAnalyzer) noteCapture(c *flow.Conn, rc *report.Connection) {
	toServer, toClient := &c.Dirs[flow.ToServer], &c.Dirs[flow.ToClient]
	if c.MidStream {
		rc.Notes = append(rc.Notes, "the capture started after the handshake: no handshake RTT, and the first round seen need not be the initial window")
	}
	if c.HandshakeRetried() && c.HandshakeRTTNs() > 0 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the SYN was sent %s and the SYN/ACK %s: the handshake RTT is timed from the latest of each (Karn's rule), the one that was answered",
			times(int(toServer.SYNCount)), times(int(max(toClient.SYNCount, 1)))))
	}
	if c.RefusedNs != 0 && c.HandshakeACKNs == 0 {
		rc.Notes = append(rc.Notes, "the server refused the connection (a RST answered the SYN): the handshake RTT is from the SYN to the RST")
	}
	if hs := c.HandshakeRTTNs(); hs > 0 && handshakeRTTNs(c) < hs {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the handshake was retried and took %.1f ms from the SYN the SYN/ACK answered to the client's ACK, a timeout's worth more than the %.1f ms the data and its acknowledgements show (Karn's rule: a retried exchange's time may hold a timeout): the handshake RTT reported is the data's",
			nsToMs(hs), nsToMs(handshakeRTTNs(c))))
	} else if hs > 0 && c.RTTNs() < hs {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the handshake was retried; the data and its acknowledgements show a shorter round trip (%.1f ms), which the rounds use", nsToMs(c.RTTNs())))
	}
	if c.SYNACKInferred {
		rc.Notes = append(rc.Notes, "the capture has no SYN/ACK: the handshake RTT is timed from the SYN to the client's acknowledgement of the SYN/ACK")
	}
	if n := toServer.Duplicates + toClient.Duplicates; n > 0 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("%d packets were captured twice (the same frame seen at two points): each was counted once", n))
	}
	for _, d := range []struct {
		dir  *flow.DirState
		name string
	}{{toClient, "server"}, {toServer, "client"}} {
		missing := d.dir.MissingBytes()
		if missing == 0 {
			continue
		}
		total := d.dir.Bytes + missing
		switch {
		case d.dir.Packets == 0 || d.dir.Bytes == 0:
			rc.Notes = append(rc.Notes, fmt.Sprintf("the capture holds none of the %s's %s of data (the other side acknowledged them): it was filtered to one direction or missed them", d.name, report.Size(missing)))
		case d.dir.AckedUnseenBytes > 0:
			rc.Notes = append(rc.Notes, fmt.Sprintf("the capture missed %s of the %s's data (%.1f%% of %s; the other side acknowledged bytes the capture never saw): rounds with a gap are ambiguous", report.Size(missing), d.name, 100*float64(missing)/float64(total), report.Size(total)))
		default:
			rc.Notes = append(rc.Notes, fmt.Sprintf("the capture missed %s of the %s's data (%.1f%% of %s; gaps in the sequence never filled): rounds with a gap are ambiguous", report.Size(missing), d.name, 100*float64(missing)/float64(total), report.Size(total)))
		}
		if d.dir.HolesOverflowed() {
			rc.Notes = append(rc.Notes, fmt.Sprintf("the %s's stream had too many gaps to follow: some bytes that filled old gaps were counted as retransmitted", d.name))
		}
	}
	if ca.truncatedPayload {
		rc.Notes = append(rc.Notes, "payloads were cut by the capture's snaplen: TLS and HTTP boundaries past the captured bytes are inferred or unknown")
	}
	ca.noteSegmentSize(c, rc)
	if rc.Vantage == report.VantageUnknown && !c.MidStream {
		rc.Notes = append(rc.Notes, "the vantage point could not be told from the handshake")
	}
	if rtt := c.HandshakeRTTNs(); (rtt > 0 && rtt < 1e6) || rc.MSS > 9000 {
		rc.Notes = append(rc.Notes, "this path is local (handshake RTT "+strconv.FormatFloat(nsToMs(rtt), 'f', 3, 64)+" ms, MSS "+strconv.Itoa(rc.MSS)+
			"): segment sizes and round trips here say nothing about a real network path, and no initcwnd change would matter on it")
	}
}

// noteSegmentSize says how the server's segment size was found when the SYNs alone
// do not say it: the client's MSS option missing (the size is inferred from the
// frames), the server announcing less than it sends, a path that carries less.
func (ca *connAnalyzer) noteSegmentSize(c *flow.Conn, rc *report.Connection) {
	limit := c.SegmentCap(flow.ToClient)
	client, server := &c.Dirs[flow.ToServer], &c.Dirs[flow.ToClient]
	if ca.rounds == nil || ca.rounds.Count() == 0 {
		if rc.MSS == 0 && !c.MidStream && (client.SYNSeen || server.SYNSeen) {
			rc.Notes = append(rc.Notes, "the client's SYN carried no MSS option")
		}
		return
	}
	size, proven := ca.rounds.SegmentSize()
	switch {
	case c.MidStream:
	case limit == 0 && !client.SYNSeen:
		rc.Notes = append(rc.Notes, fmt.Sprintf("the client's SYN was not captured: the server's segments are taken to carry %d bytes, inferred from its frames; counts in segments rest on that", size))
	case limit == 0:
		rc.Notes = append(rc.Notes, fmt.Sprintf("the client's SYN carried no MSS option: the server's segments are taken to carry %d bytes, inferred from its frames; counts in segments rest on that", size))
	case proven && size < limit:
		rc.Notes = append(rc.Notes, fmt.Sprintf("the server's segments carried %d bytes, less than the %d the client's MSS option allows (a smaller MTU on the path, a tunnel): segments are counted at %d", size, limit, size))
	}
	if sm := int(server.SYN.MSS); server.SYNSeen && sm > 0 && limit > 0 && proven && size > sm-(int(client.SYN.MSS)-limit) {
		rc.Notes = append(rc.Notes, fmt.Sprintf("the server announced an MSS of %d bytes but sent %d-byte segments, as the client's MSS option (%d) allows: a sender's segments are bounded by its peer's MSS, not its own", sm, size, client.SYN.MSS))
	}
}

// roundsRTTNs is the round trip the rounds are split with: the connection's
// (flow.Conn.RTTNs), or the data's when that is less than half of it. Data
// acknowledged that much faster than the handshake shows something near the
// capture answering for the server (a split-TCP middlebox, a proxy that held the
// SYN/ACK until its own connection was up), or a handshake slowed on the way; the
// data's round trip is then the one that clocks the sending, and the shorter of
// the two never merges rounds. At the client, where every round trip the data
// shows is at least the path's (the server's own delay comes on top), a handshake
// longer than the data's was slowed on the way (a loaded host: 19 ms on a
// 13 ms path merged two rounds of the server's into one of 10 segments for an IW
// of 8): the floor is then the better estimate.
func roundsRTTNs(c *flow.Conn, clientDataRTTNs int64) int64 {
	rtt := c.RTTNs()
	if sampled := c.SampledRTTNs(); sampled > 0 && 2*sampled < rtt {
		return sampled
	}
	// At the client: its data and the server's acknowledgement of it, by Karn's
	// rule (a floor that counts retransmissions from their latest sending can be
	// shorter than the path), as of the server's first data.
	if clientDataRTTNs > 0 && clientDataRTTNs < rtt {
		return clientDataRTTNs
	}
	return rtt
}

// verdictInput gathers what the initial-window verdict reads.
func (ca *connAnalyzer) verdictInput(c *flow.Conn, raw []rounds.Round, t *tlsSummary, baseNs int64, messages *[2][]httpmsg.Message) verdict.Input {
	in := verdict.Input{
		Rounds: raw,
		Path: verdict.Path{Vantage: c.Vantage(), MidStream: c.MidStream, HandshakeRTTNs: handshakeRTTNs(c),
			DataRTTNs: c.DataRTTFloorNs(), RoundsRTTNs: ca.rttNs, BaseNs: baseNs},
	}
	if c.SYNNs > 0 && c.SYNACKNs > c.SYNNs {
		in.Path.ServerRTTNs = c.SYNACKNs - c.SYNNs
	}
	if ca.rounds != nil {
		in.Path.Method = ca.rounds.Method()
		in.Segment.Bytes, in.Segment.Proven = ca.rounds.SegmentSize()
	}
	in.Segment.Cap = c.SegmentCap(flow.ToClient)
	// Only the spans around the first rounds can matter (the verdict reads the
	// first round, the TLS flight's and the first after the handshake).
	horizon := int64(0)
	for i := range raw {
		horizon = raw[i].EndOffset
		if i >= 2+ca.firstRounds(t) {
			break
		}
	}
	if t != nil {
		in.TLS = t.handshake()
		for _, r := range ca.tls[flow.ToClient].EachRecord() {
			if r.Offset > horizon {
				break
			}
			in.Records = append(in.Records, verdict.Span{Start: r.Offset, End: r.End()})
		}
		if t.flightEnd > 0 {
			in.Messages = append(in.Messages, verdict.Span{Start: 0, End: t.flightEnd})
		}
	}
	if messages != nil {
		for _, m := range messages[1] {
			if m.Offset > horizon {
				break
			}
			if m.End > 0 {
				in.Messages = append(in.Messages, verdict.Span{Start: m.Offset, End: m.End})
			}
		}
	}
	return in
}

// firstRounds is how many rounds the TLS handshake's flight and retry took.
func (ca *connAnalyzer) firstRounds(t *tlsSummary) int {
	if t == nil {
		return 0
	}
	return len(t.retryRounds) + len(t.flightRounds)
}

// timeoutNs is about the least time a retransmission timeout adds to an exchange:
// RFC 6298's initial RTO is 1 s.
const timeoutNs = 900_000_000

// handshakeRTTNs is the handshake RTT the report gives: the handshake that
// completed, timed from the SYN the SYN/ACK answered to the client's ACK, unless
// the handshake was retried and took a timeout's worth longer than the round trips
// of the data (Karn's rule: a retried exchange may hold a timeout, as when a client
// ignores a SYN/ACK and sends its SYN again); then the data's.
func handshakeRTTNs(c *flow.Conn) int64 {
	hs, sampled := c.HandshakeRTTNs(), c.SampledRTTNs()
	if hs > 0 && c.HandshakeRetried() && sampled > 0 && hs-sampled >= timeoutNs {
		return sampled
	}
	return hs
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// ending tells the rounds whether the server's data was cut before its last HTTP
// message was complete (cleartext HTTP only: elsewhere nothing says).
func (ca *connAnalyzer) ending() rounds.Ending {
	p := ca.http[flow.ToClient]
	if p == nil {
		return rounds.EndingComplete
	}
	n := p.Count()
	if n == 0 {
		return rounds.EndingComplete
	}
	last := p.Message(n - 1)
	if last.Incomplete && last.IncompleteReason == httpmsg.ReasonEndedInBody {
		return rounds.EndingIncomplete
	}
	return rounds.EndingComplete
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

// appendResponseEnds appends the stream offsets where the cleartext HTTP
// responses ended.
func appendResponseEnds(ends []int64, messages *[2][]httpmsg.Message) []int64 {
	if messages == nil {
		return ends
	}
	for _, m := range messages[1] {
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

// exchangeMessages turns a decrypted connection's exchanges into the report's,
// with the rounds their response records arrived in.
func exchangeMessages(res *tlshttp.Result, spans roundSpans, ms func(int64) float64) []report.HTTPMessage {
	out := make([]report.HTTPMessage, 0, len(res.Exchanges))
	at := func(ns int64) *float64 {
		if ns <= 0 {
			return nil
		}
		v := ms(ns)
		return &v
	}
	for _, x := range res.Exchanges {
		m := report.HTTPMessage{Method: x.Method, Path: x.Path, Authority: x.Authority, Protocol: x.Protocol,
			Stream: x.StreamID, Pushed: x.Pushed, EarlyData: x.EarlyData, Status: x.Status, ContentType: x.ContentType,
			RequestMs: at(x.RequestNs), FirstByteMs: at(x.FirstByteNs), LastByteMs: at(x.LastByteNs),
			Bytes: x.Bytes, BodyBytes: x.BodyBytes, Incomplete: x.Incomplete || !x.Complete, IncompleteReason: x.Reason}
		for _, sp := range x.ResponseSpans {
			m.Rounds = spans.appendRoundsOf(m.Rounds, sp.Start, sp.End)
		}
		out = append(out, m)
	}
	return out
}

// roundSpans finds the rounds that carried a span of the stream.
type roundSpans struct {
	raw []rounds.Round
	// ascending: every round starts and ends at or after the one before (new
	// data comes in order, so they do), and a span's rounds are found by
	// binary search rather than by looking at every round.
	ascending bool
}

func newRoundSpans(raw []rounds.Round) roundSpans {
	for i := 1; i < len(raw); i++ {
		if raw[i].StartOffset < raw[i-1].StartOffset || raw[i].EndOffset < raw[i-1].EndOffset {
			return roundSpans{raw: raw}
		}
	}
	return roundSpans{raw: raw, ascending: true}
}

func (s roundSpans) len() int { return len(s.raw) }

// appendRoundsOf adds the (1-based) indexes of the rounds that carried any byte of
// [start, end) to list, keeping it sorted and without repeats.
func (s roundSpans) appendRoundsOf(list []int, start, end int64) []int {
	raw := s.raw
	first := 0
	if s.ascending {
		// The rounds before first end at or before start, and from the first
		// that starts at or after end on, none is in the span.
		first = sort.Search(len(raw), func(i int) bool { return raw[i].EndOffset > start })
	}
	for i := first; i < len(raw); i++ {
		r := &raw[i]
		if r.EndOffset <= start || r.StartOffset >= end {
			if s.ascending && r.StartOffset >= end {
				break
			}
			continue
		}
		k := i + 1
		if n := len(list); n == 0 || list[n-1] < k {
			list = append(list, k)
		} else if !containsInt(list, k) {
			list = append(list, k)
			sort.Ints(list)
		}
	}
	return list
}

// intSlab hands out the lists of many messages from one array.
type intSlab struct{ buf []int }

// free is an empty list to append to, in the slab's free room.
func (s *intSlab) free() []int { return s.buf[len(s.buf):len(s.buf)] }

// take keeps list, made from free: in the slab if it fit there (nil when
// empty, as a list never appended to).
func (s *intSlab) take(list []int) []int {
	n := len(list)
	if n == 0 {
		return nil
	}
	if start := len(s.buf); cap(s.buf)-start >= n && &s.buf[:start+1][start] == &list[0] {
		s.buf = s.buf[:start+n]
		return list[:n:n]
	}
	return list
}

func containsInt(list []int, k int) bool {
	for _, x := range list {
		if x == k {
			return true
		}
	}
	return false
}

// messageScratch keeps the slices a report decodes a connection's requests
// and responses into (annotated.messages), for the next report's.
var messageScratch = sync.Pool{New: func() any { return new([2][]httpmsg.Message) }}

func (ca *connAnalyzer) httpMessages(messages *[2][]httpmsg.Message, ms func(int64) float64, spans roundSpans) []report.HTTPMessage {
	if messages == nil {
		return []report.HTTPMessage{}
	}
	reqs, resps := messages[0], messages[1]
	reqTimes, respTimes := ca.msgTime[flow.ToServer].All(), ca.msgTime[flow.ToClient].All()
	out := make([]report.HTTPMessage, 0, len(reqs))
	// The messages' times and round lists in a few arrays, not a few
	// allocations per message.
	times := make([]float64, 0, 3*len(reqs))
	at := func(ns int64) *float64 {
		times = append(times, ms(ns))
		return &times[len(times)-1]
	}
	lists := intSlab{buf: make([]int, 0, len(resps)+spans.len())}
	for i, q := range reqs {
		m := report.HTTPMessage{Method: q.Method, Path: q.Target, Authority: q.Host, Protocol: "http/1.1",
			Incomplete: q.Incomplete, IncompleteReason: q.IncompleteReason}
		if i < len(reqTimes) {
			m.RequestMs = at(reqTimes[i].firstNs)
		}
		if i < len(resps) {
			r := resps[i]
			m.Status = r.Status
			m.ContentType = r.ContentType
			m.Chunked = r.Chunked
			m.Incomplete = m.Incomplete || r.Incomplete
			if m.IncompleteReason == "" {
				m.IncompleteReason = r.IncompleteReason
			}
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
			m.Rounds = lists.take(spans.appendRoundsOf(lists.free(), r.Offset, r.Offset+m.Bytes))
			if i < len(respTimes) {
				t := respTimes[i]
				m.FirstByteMs = at(t.firstNs)
				last := t.lastNs
				if last == 0 {
					last = ca.lastDataNs[flow.ToClient]
				}
				m.LastByteMs = at(last)
			}
		}
		out = append(out, m)
	}
	return out
}

// MarkIncomplete records what the client that opened the connection knew and the
// packets could not show (over TLS): the response stopped before it was whole.
// The last round is then "incomplete", not "end", and a first round that was the
// last reads as a lower bound for that reason.
func MarkIncomplete(c *report.Connection, why string) {
	c.Notes = append(c.Notes, "the response was incomplete: "+why)
	n := len(c.Rounds)
	if n == 0 || c.Rounds[n-1].Limit != report.LimitEnd {
		return
	}
	c.Rounds[n-1].Limit = report.LimitIncomplete
	iw := c.InitialWindow
	if iw != nil && iw.Verdict == report.VerdictLowerBound && iw.Source == report.PhaseHTTP && firstDataRound(c) == n-1 {
		iw.Reason = "the transfer stopped before the response was complete (" + why + "), so the window is at least this large"
	}
}

// firstDataRound is the index of the connection's first round that is not the TLS
// handshake (-1 when none).
func firstDataRound(c *report.Connection) int {
	for i, r := range c.Rounds {
		if r.Phase != report.PhaseTLS {
			return i
		}
	}
	return -1
}
