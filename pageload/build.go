package pageload

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/report"
)

// Build matches the browser's requests to the Report's connections and HTTP
// messages and computes the page's connections, critical path and timing
// agreement. Connections of the Report that no request of the page reached (and
// whose server no request named) are left out of the page's Report.
func Build(rep *report.Report, in Input) *Page {
	b := &builder{rep: rep, in: in}
	return b.build()
}

type builder struct {
	rep  *report.Report
	in   Input
	page *Page

	startNs int64 // navigation start, capture clock
	conns   []*connState
	byIndex map[int]*connState
	reqs    []*reqState
}

// connState is a Report connection with what the page learns of it.
type connState struct {
	c       *report.Connection
	startNs int64 // its first packet, capture clock
	used    []bool
	reqs    []*reqState
	server  netip.AddrPort
}

// reqState is one request with its match.
type reqState struct {
	in        Request
	out       *PageRequest
	conn      *connState
	msg       int // -1: not decrypted
	startNs   int64
	sentNs    int64
	firstNs   int64 // capture (or browser) times, capture clock; 0 unknown
	lastNs    int64
	rounds    []int
	initiator *reqState
}

func (b *builder) build() *Page {
	rep := b.rep
	in := b.in
	page := &Page{Schema: Schema, URL: in.URL, Source: in.Source, Browser: in.Browser,
		Requests: []PageRequest{}, Connections: []PageConnection{}, Warnings: []string{}}
	b.page = page
	off := in.ClockOffsetNs
	b.startNs = in.Timings.NavigationStartNs + off
	for _, r := range in.Requests {
		if b.startNs == 0 || (r.StartNs != 0 && r.StartNs+off < b.startNs) {
			b.startNs = r.StartNs + off
		}
	}
	page.StartUnixNs = b.startNs
	page.CaptureStartMs = b.ms(rep.Source.StartUnixNs)
	page.FirstPaintMs = b.msPtr(in.Timings.FirstPaintNs, off)
	page.FirstContentfulPaintMs = b.msPtr(in.Timings.FirstContentfulPaintNs, off)
	page.DOMContentLoadedMs = b.msPtr(in.Timings.DOMContentLoadedNs, off)
	page.LoadMs = b.msPtr(in.Timings.LoadNs, off)

	b.byIndex = map[int]*connState{}
	for i := range rep.Connections {
		c := &rep.Connections[i]
		cs := &connState{c: c, startNs: rep.Source.StartUnixNs + int64(c.StartMs*1e6), used: make([]bool, len(c.HTTP))}
		cs.server, _ = parseAddrPort(c.Server)
		b.conns = append(b.conns, cs)
		b.byIndex[c.Index] = cs
	}
	byURL := map[string]*reqState{}
	for i, r := range in.Requests {
		rs := &reqState{in: r, msg: -1}
		rs.startNs = addOffset(r.StartNs, off)
		rs.out = &PageRequest{Index: i + 1, URL: r.URL, Method: r.Method, Type: r.Type, Status: r.Status,
			ContentType: r.MimeType, Protocol: r.Protocol, RenderBlocking: r.RenderBlocking, Message: -1,
			Rounds: []int{}, Notes: []string{}, StartMs: b.ms(rs.startNs),
			Browser: BrowserTiming{ConnectStartMs: b.msPtr(r.ConnectStartNs, off), ConnectEndMs: b.msPtr(r.ConnectEndNs, off), RequestMs: b.msPtr(r.SentNs, off), FirstByteMs: b.msPtr(r.FirstByteNs, off),
				LastByteMs: b.msPtr(r.LastByteNs, off), ConnectionID: r.ConnectionID, Remote: r.RemoteAddr,
				Bytes: r.EncodedBytes, Priority: r.Priority, FromCache: r.FromCache, Failed: r.Failed}}
		if u, err := url.Parse(r.URL); err == nil {
			rs.out.Host = u.Host
			rs.out.Path = u.EscapedPath()
			if rs.out.Path == "" {
				rs.out.Path = "/"
			}
			if u.RawQuery != "" {
				rs.out.Path += "?" + u.RawQuery
			}
		}
		if r.InitiatorURL != "" {
			rs.initiator = byURL[r.InitiatorURL]
		}
		if rs.initiator == nil && i > 0 && b.reqs[i-1].in.RedirectTo != "" && b.reqs[i-1].in.RedirectTo == r.URL {
			rs.initiator = b.reqs[i-1]
		}
		if rs.initiator != nil {
			rs.out.Initiator = rs.initiator.out.Index
		}
		if r.RedirectTo == "" {
			byURL[r.URL] = rs
		}
		b.reqs = append(b.reqs, rs)
	}

	b.matchDecrypted()
	b.matchByAddress()
	for _, rs := range b.reqs {
		b.fill(rs)
	}
	b.connections()
	b.criticalPath()
	b.agreement()
	for _, rs := range b.reqs {
		page.Requests = append(page.Requests, *rs.out)
	}
	// The page's Report: the connections the page used, or that went to its servers.
	servers := map[netip.AddrPort]bool{}
	for _, rs := range b.reqs {
		if a, ok := parseAddrPort(rs.in.RemoteAddr); ok {
			servers[a] = true
		}
		if rs.conn != nil {
			servers[rs.conn.server] = true
		}
	}
	kept := *rep
	kept.Connections = []report.Connection{}
	for _, cs := range b.conns {
		if servers[cs.server] && (len(cs.reqs) > 0 || !cs.c.MidStream) {
			kept.Connections = append(kept.Connections, *cs.c)
		}
	}
	if dropped := len(rep.Connections) - len(kept.Connections) + in.LeftOut; dropped > 0 {
		page.Warnings = append(page.Warnings, fmt.Sprintf("%s of the capture went to servers the page did not use (or began before it): left out", plural(dropped, "other TCP connection", "other TCP connections")))
	}
	page.Report = &kept
	unmatched := 0
	for _, rs := range b.reqs {
		if rs.conn == nil && !rs.in.FromCache && rs.in.Failed == "" && strings.HasPrefix(rs.in.URL, "http") {
			unmatched++
		}
	}
	if unmatched > 0 {
		page.Warnings = append(page.Warnings, fmt.Sprintf("%d of %d requests were not found on a TCP connection of the capture (over HTTP/3, from another interface, or outside the capture)", unmatched, len(b.reqs)))
	}
	return page
}

// ms converts a capture-clock time to the page's milliseconds.
func (b *builder) ms(ns int64) float64 {
	if ns == 0 {
		return 0
	}
	return round3(float64(ns-b.startNs) / 1e6)
}

func (b *builder) msPtr(ns, off int64) *float64 {
	if ns == 0 {
		return nil
	}
	v := b.ms(ns + off)
	return &v
}

func addOffset(ns, off int64) int64 {
	if ns == 0 {
		return 0
	}
	return ns + off
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// msgNs is the capture-clock time of a time of message m on connection cs.
func (cs *connState) at(ms *float64) int64 {
	if ms == nil {
		return 0
	}
	// Message and round times count from the connection's SYN (its first packet
	// when the SYN was captured).
	return cs.startNs + int64(*ms*1e6)
}

// messageRef is one HTTP message of a connection, with its request's time and
// its authority as a request's host compares with it (per scheme).
type messageRef struct {
	cs           *connState
	msg          int
	requestNs    int64
	authHTTPS    string // normalizeHost(authority, "https"), "" when none
	authHTTP     string
	hasAuthority bool
}

// maxCandidateMessages bounds the messages of the same method and path a
// request is weighed against: the ones nearest it in time. A page asks a path
// once or a few times; a capture with thousands of requests of one path
// would otherwise make matching quadratic.
const maxCandidateMessages = 1024

// messagesByRequest indexes the connections' HTTP messages by method (lower
// case) and path, each list in order of the request's time, so that a request
// is compared with the messages nearest it that can be it, not with every
// message of the capture.
func (b *builder) messagesByRequest() map[[2]string][]messageRef {
	index := map[[2]string][]messageRef{}
	for _, cs := range b.conns {
		for mi, m := range cs.c.HTTP {
			key := [2]string{strings.ToLower(m.Method), m.Path}
			ref := messageRef{cs: cs, msg: mi, requestNs: cs.at(m.RequestMs), hasAuthority: m.Authority != ""}
			if ref.hasAuthority {
				ref.authHTTPS, ref.authHTTP = normalizeHost(m.Authority, "https"), normalizeHost(m.Authority, "http")
			}
			index[key] = append(index[key], ref)
		}
	}
	for _, refs := range index {
		sort.SliceStable(refs, func(i, j int) bool { return refs[i].requestNs < refs[j].requestNs })
	}
	return index
}

// matchDecrypted matches requests to decrypted HTTP messages: the same method,
// authority and path, on a connection to the server the browser named, the
// nearest in time (of the maxCandidateMessages nearest).
func (b *builder) matchDecrypted() {
	index := b.messagesByRequest()
	for _, rs := range b.reqs {
		if rs.in.FromCache || rs.out.Host == "" {
			continue
		}
		scheme := "https"
		if strings.HasPrefix(rs.in.URL, "http:") {
			scheme = "http"
		}
		host := normalizeHost(rs.out.Host, scheme)
		remote, hasRemote := parseAddrPort(rs.in.RemoteAddr)
		want := rs.in.SentNs + b.in.ClockOffsetNs
		if rs.in.SentNs == 0 {
			want = rs.startNs
		}
		refs := index[[2]string{strings.ToLower(rs.in.Method), rs.out.Path}]
		after := sort.Search(len(refs), func(i int) bool { return refs[i].requestNs >= want })
		below, above := after-1, after
		best := -1
		bestDiff := int64(math.MaxInt64)
		for range maxCandidateMessages {
			i := -1
			switch {
			case below >= 0 && (above >= len(refs) || want-refs[below].requestNs <= refs[above].requestNs-want):
				i = below
				below--
			case above < len(refs):
				i = above
				above++
			}
			if i < 0 || absNs(refs[i].requestNs-want) > bestDiff {
				break // every later one is further
			}
			ref := refs[i]
			if (hasRemote && ref.cs.server != remote) || ref.cs.used[ref.msg] {
				continue
			}
			auth := ref.authHTTPS
			if scheme == "http" {
				auth = ref.authHTTP
			}
			if ref.hasAuthority && auth != host {
				continue
			}
			if diff := absNs(ref.requestNs - want); diff < bestDiff || (diff == bestDiff && lessRef(ref, refs[best])) {
				best, bestDiff = i, diff
			}
		}
		if best >= 0 {
			ref := refs[best]
			ref.cs.used[ref.msg] = true
			rs.conn, rs.msg = ref.cs, ref.msg
		}
	}
}

// lessRef orders messages as the capture does: by connection, then message.
func lessRef(a, b messageRef) bool {
	if a.cs.c.Index != b.cs.c.Index {
		return a.cs.c.Index < b.cs.c.Index
	}
	return a.msg < b.msg
}

// maxCandidateConns bounds the connections to its server a request is weighed
// against: the ones that started nearest the time it is placed by. A page
// opens a handful per server; a capture with thousands to one server (a load
// test, a crafted file) would otherwise make placing a page quadratic.
const maxCandidateConns = 1024

// serverConns are the connections to one server whose HTTP was not read, in
// order of their first packet, and the first of them from each client port.
type serverConns struct {
	byStart []*connState
	byPort  map[uint16]*connState
}

// connsByServer indexes the connections a request may be placed on by address.
func (b *builder) connsByServer() map[netip.AddrPort]*serverConns {
	index := map[netip.AddrPort]*serverConns{}
	for _, cs := range b.conns {
		if len(cs.c.HTTP) > 0 {
			// A connection whose HTTP was read did not carry it.
			continue
		}
		sc := index[cs.server]
		if sc == nil {
			sc = &serverConns{byPort: map[uint16]*connState{}}
			index[cs.server] = sc
		}
		sc.byStart = append(sc.byStart, cs)
		if a, ok := parseAddrPort(cs.c.Client); ok && sc.byPort[a.Port()] == nil {
			sc.byPort[a.Port()] = cs
		}
	}
	for _, sc := range index {
		sort.SliceStable(sc.byStart, func(i, j int) bool { return sc.byStart[i].startNs < sc.byStart[j].startNs })
	}
	return index
}

// matchByAddress places the requests no decrypted message matched: on the
// connection to their server that the browser's connection id already maps to,
// else the one whose SYN is nearest the request's connection start, else the one
// to that server that was open when the response arrived. Connections whose HTTP
// messages were read (decrypted, or in the clear) are not candidates: the request
// was not among them. Of a server's connections, the maxCandidateConns that
// started nearest are weighed.
func (b *builder) matchByAddress() {
	byBrowserID := map[string]*connState{}
	for _, rs := range b.reqs {
		if rs.conn != nil && rs.in.ConnectionID != "" {
			byBrowserID[rs.in.RemoteAddr+"#"+rs.in.ConnectionID] = rs.conn
		}
	}
	index := b.connsByServer()
	off := b.in.ClockOffsetNs
	tolerance := int64(AgreementToleranceMs * 1e6)
	for _, rs := range b.reqs {
		if rs.conn != nil || rs.in.FromCache {
			continue
		}
		remote, ok := parseAddrPort(rs.in.RemoteAddr)
		if !ok {
			continue
		}
		key := rs.in.RemoteAddr + "#" + rs.in.ConnectionID
		if cs := byBrowserID[key]; cs != nil && rs.in.ConnectionID != "" {
			rs.conn = cs
			continue
		}
		sc := index[remote]
		if sc == nil {
			continue
		}
		best := (*connState)(nil)
		if clientPort, err := strconv.ParseUint(rs.in.ConnectionID, 10, 16); err == nil {
			// HAR writers may name the connection by its client port.
			best = sc.byPort[uint16(clientPort)]
		}
		if best == nil {
			best = b.nearestConn(rs, sc.byStart, off, tolerance)
		}
		if best != nil {
			rs.conn = best
			if rs.in.ConnectionID != "" {
				byBrowserID[key] = best
			}
		}
	}
}

// nearestConn is the connection of conns (one server's, in order of start) a
// request was carried by: the one whose start is nearest its connection's
// start, or without one the latest started before the request was sent (and
// not closed by then); one that was not receiving data when the response
// arrived comes after every one that was (a spare connection opened at the
// same time, a preconnect, carried none).
func (b *builder) nearestConn(rs *reqState, conns []*connState, off, tolerance int64) *connState {
	penalty := func(cs *connState) int64 {
		if rs.in.FirstByteNs != 0 && cs.bytesBetween(rs.in.FirstByteNs+off-tolerance, rs.in.LastByteNs+off+tolerance) < rs.in.EncodedBytes/2 {
			return 1e15
		}
		return 0
	}
	var best *connState
	bestScore := int64(math.MaxInt64)
	if rs.in.ConnectStartNs != 0 {
		target := rs.in.ConnectStartNs + off
		after := sort.Search(len(conns), func(i int) bool { return conns[i].startNs >= target })
		below, above := after-1, after
		for range maxCandidateConns {
			var cs *connState
			switch {
			case below >= 0 && (above >= len(conns) || target-conns[below].startNs <= conns[above].startNs-target):
				cs = conns[below]
				below--
			case above < len(conns):
				cs = conns[above]
				above++
			}
			if cs == nil || absNs(cs.startNs-target) > bestScore {
				break // every later one is further
			}
			if score := absNs(cs.startNs-target) + penalty(cs); score < bestScore {
				best, bestScore = cs, score
			}
		}
		return best
	}
	sent := addOffset(max(rs.in.SentNs, rs.in.StartNs), off)
	for i, seen := sort.Search(len(conns), func(i int) bool { return conns[i].startNs > sent })-1, 0; i >= 0 && seen < maxCandidateConns; i, seen = i-1, seen+1 {
		cs := conns[i]
		if sent-cs.startNs > bestScore {
			break // every earlier one started longer before
		}
		if end := cs.startNs + int64(cs.c.DurationMs*1e6); sent > end && cs.c.Closed != "open" {
			continue
		}
		if score := sent - cs.startNs + penalty(cs); score < bestScore {
			best, bestScore = cs, score
		}
	}
	return best
}

// bytesBetween sums the bytes of the server's rounds that arrived between from
// and to (capture clock).
func (cs *connState) bytesBetween(from, to int64) int64 {
	var n int64
	for _, r := range cs.c.Rounds {
		start, end := cs.startNs+int64(r.StartMs*1e6), cs.startNs+int64(r.EndMs*1e6)
		if end >= from && start <= to {
			n += int64(r.Bytes)
		}
	}
	return n
}

// fill copies what the capture says of a matched request into its PageRequest.
func (b *builder) fill(rs *reqState) {
	out := rs.out
	off := b.in.ClockOffsetNs
	rs.sentNs = addOffset(rs.in.SentNs, off)
	rs.firstNs = addOffset(rs.in.FirstByteNs, off)
	rs.lastNs = addOffset(rs.in.LastByteNs, off)
	out.Bytes = rs.in.EncodedBytes
	if rs.conn == nil {
		return
	}
	cs := rs.conn
	out.Connection = cs.c.Index
	cs.reqs = append(cs.reqs, rs)
	if rs.msg >= 0 {
		m := cs.c.HTTP[rs.msg]
		out.Message = rs.msg
		out.Stream = m.Stream
		if m.Protocol != "" {
			out.Protocol = m.Protocol
		}
		if m.ContentType != "" {
			out.ContentType = m.ContentType
		}
		if m.Status != 0 {
			out.Status = m.Status
		}
		out.Bytes = m.Bytes
		rs.rounds = append([]int{}, m.Rounds...)
		for _, p := range []struct {
			ms  *float64
			ns  *int64
			out **float64
		}{{m.RequestMs, &rs.sentNs, &out.RequestMs}, {m.FirstByteMs, &rs.firstNs, &out.FirstByteMs}, {m.LastByteMs, &rs.lastNs, &out.LastByteMs}} {
			if p.ms != nil {
				*p.ns = cs.at(p.ms)
				v := b.ms(*p.ns)
				*p.out = &v
			}
		}
		if m.Incomplete {
			out.Notes = append(out.Notes, "the capture did not hold the whole response: "+m.IncompleteReason)
		}
	} else {
		// Not decrypted: the rounds that were arriving while the browser received
		// the response.
		if rs.firstNs != 0 && rs.lastNs != 0 {
			for _, r := range cs.c.Rounds {
				start, end := cs.startNs+int64(r.StartMs*1e6), cs.startNs+int64(r.EndMs*1e6)
				if end >= rs.firstNs-int64(AgreementToleranceMs*1e6) && start <= rs.lastNs {
					rs.rounds = append(rs.rounds, r.Index)
				}
			}
		}
		out.Notes = append(out.Notes, "placed on its connection by address, port and time (the capture was not decrypted): its rounds are those that arrived while the browser received it")
	}
	out.Rounds = rs.rounds
	if out.Rounds == nil {
		out.Rounds = []int{}
	}
}

// connections sums up the page's connections, in order of their first packet, and
// marks each one's first request.
func (b *builder) connections() {
	hosts := map[netip.AddrPort]string{}
	for _, rs := range b.reqs {
		if a, ok := parseAddrPort(rs.in.RemoteAddr); ok && hosts[a] == "" {
			hosts[a] = rs.out.Host
		}
	}
	for _, cs := range b.conns {
		c := cs.c
		host := hosts[cs.server]
		if len(cs.reqs) == 0 && (host == "" || c.MidStream || c.HandshakeRTTMs == nil) {
			continue // not the page's: another server, or begun before the capture
		}
		sort.SliceStable(cs.reqs, func(i, j int) bool { return reqOrder(cs.reqs[i]) < reqOrder(cs.reqs[j]) })
		var first *reqState
		if len(cs.reqs) > 0 {
			first = cs.reqs[0]
			host = first.out.Host
			if !c.MidStream {
				first.out.NewConnection = true
			}
		}
		pc := PageConnection{Connection: c.Index, Host: host, Server: c.Server, Client: c.Client,
			StartMs: b.ms(cs.startNs), HandshakeRTTMs: c.HandshakeRTTMs, InitialWindow: c.InitialWindow,
			Rounds: len(c.Rounds), RoundTrips: c.RoundTrips, Requests: []int{}}
		if c.TLS != nil {
			pc.TLSVersion = c.TLS.Version
			pc.TLSRoundTrips = c.TLS.HandshakeRoundTrips
		}
		for _, m := range c.HTTP {
			if m.Protocol != "" {
				pc.ALPN = m.Protocol
				break
			}
		}
		if pc.ALPN == "" && first != nil {
			pc.ALPN = normalizeProtocol(first.in.Protocol)
		}
		for _, rs := range cs.reqs {
			pc.Requests = append(pc.Requests, rs.out.Index)
		}
		sort.Ints(pc.Requests)
		b.page.Connections = append(b.page.Connections, pc)
	}
}

// reqOrder is when a request went out on its connection.
func reqOrder(rs *reqState) int64 {
	if rs.sentNs != 0 {
		return rs.sentNs
	}
	return rs.startNs
}

// agreement compares the browser's timings of each matched request with the
// capture's: when the request left and when the response's last byte arrived
// must agree within the tolerance; the response's first byte reaches the browser
// only once the TLS record carrying it is whole, which may be a round after the
// capture saw its first byte, so the browser's must lie between the capture's
// first and last byte (within the tolerance).
func (b *builder) agreement() {
	a := &b.page.Agreement
	a.ToleranceMs = AgreementToleranceMs
	a.Differences = []Disagreement{}
	for _, rs := range b.reqs {
		out := rs.out
		if rs.msg < 0 {
			continue
		}
		for _, p := range []struct {
			what             string
			browser, capture *float64
		}{{"request", out.Browser.RequestMs, out.RequestMs}, {"first_byte", out.Browser.FirstByteMs, out.FirstByteMs}, {"last_byte", out.Browser.LastByteMs, out.LastByteMs}} {
			if p.browser == nil || p.capture == nil {
				continue
			}
			a.Compared++
			d := math.Abs(*p.browser - *p.capture)
			if p.what == "first_byte" {
				d = 0
				if *p.browser < *p.capture {
					d = *p.capture - *p.browser
				} else if out.LastByteMs != nil && *p.browser > *out.LastByteMs {
					d = *p.browser - *out.LastByteMs
				}
			}
			a.MaxDiffMs = max(a.MaxDiffMs, round3(d))
			if d > a.ToleranceMs {
				a.Differences = append(a.Differences, Disagreement{Request: out.Index, What: p.what, BrowserMs: *p.browser, CaptureMs: *p.capture})
			}
		}
	}
	a.Agree = a.Compared > 0 && len(a.Differences) == 0
}

// normalizeHost lower-cases host[:port] and drops the scheme's default port.
func normalizeHost(host, scheme string) string {
	host = strings.ToLower(host)
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return strings.Trim(host, "[]")
	}
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		return h
	}
	return net.JoinHostPort(h, port)
}

// parseAddrPort reads ip:port (or [v6]:port), unmapping v4-in-v6.
func parseAddrPort(s string) (netip.AddrPort, bool) {
	if s == "" {
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return netip.AddrPort{}, false
		}
		ip, err := netip.ParseAddr(host)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil {
			return netip.AddrPort{}, false
		}
		a = netip.AddrPortFrom(ip, uint16(p))
	}
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()), true
}

// normalizeProtocol maps a browser's protocol names to ALPN ids.
func normalizeProtocol(p string) string {
	switch strings.ToLower(p) {
	case "h2", "http/2.0", "http/2":
		return "h2"
	case "http/1.1":
		return "http/1.1"
	case "h3", "http/3", "h3-29":
		return "h3"
	}
	return strings.ToLower(p)
}

func absNs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
