package pageload

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/report"
)

// Synthetic page loads: connections with rounds and decrypted HTTP messages as
// the analysis reports them, and the requests a browser reports, on one clock.
// The expected critical paths are counted by hand in each case's comment.

const (
	t0  = int64(1_700_000_000_000_000_000) // the capture's start, Unix ns
	rtt = 100.0                            // ms
)

func f(x float64) *float64 { return &x }

// conn makes a TLS 1.3 connection starting at startMs (from the capture's start)
// with a TLS round and then data rounds, each round starting one RTT after the
// one before; rounds are listed by their start in RTTs from the SYN.
func conn(index int, client, server string, startMs float64, tlsRounds, dataRounds int) report.Connection {
	c := report.Connection{Index: index, Client: client, Server: server, StartMs: startMs, HandshakeRTTMs: f(rtt), MinRTTMs: rtt,
		MSS: 1448, Vantage: report.VantageClient, Closed: "fin", TLS: &report.TLS{Version: "1.3", HandshakeRoundTrips: tlsRounds},
		InitialWindow: &report.InitialWindow{Segments: 10, Bytes: 14480, Verdict: report.VerdictExact, Source: "tls"},
		RoundTrips:    report.RoundTrips{TCP: 1, TLS: tlsRounds, HTTP: dataRounds, Total: 1 + tlsRounds + dataRounds}}
	for i := 0; i < tlsRounds+dataRounds; i++ {
		phase := report.PhaseHTTP
		if i < tlsRounds {
			phase = report.PhaseTLS
		}
		start := rtt * float64(i+1)
		c.Rounds = append(c.Rounds, report.Round{Index: i + 1, StartMs: start, EndMs: start + 1, Segments: 10, Bytes: 14480, Phase: phase})
	}
	c.DurationMs = rtt*float64(tlsRounds+dataRounds) + 50
	return c
}

// msg is a decrypted exchange: requested at reqMs, its response in rounds.
func msg(path string, reqMs float64, rounds ...int) report.HTTPMessage {
	first := rtt * float64(rounds[0])
	last := rtt*float64(rounds[len(rounds)-1]) + 1
	return report.HTTPMessage{Method: "GET", Path: path, Authority: "a.test", Protocol: "h2", Status: 200, Rounds: rounds,
		RequestMs: f(reqMs), FirstByteMs: f(first), LastByteMs: f(last), Bytes: 10000}
}

// req is what the browser says of a request; times are ms from the capture's
// start, its last byte one ms after the capture's.
func req(url, typ, blocking, initiator, remote string, startMs, lastMs float64) Request {
	ns := func(ms float64) int64 { return t0 + int64(ms*1e6) }
	return Request{URL: url, Method: "GET", Type: typ, Status: 200, RenderBlocking: blocking, InitiatorURL: initiator,
		RemoteAddr: remote, Protocol: "h2", StartNs: ns(startMs), SentNs: ns(startMs), FirstByteNs: ns(lastMs - 1), LastByteNs: ns(lastMs + 1)}
}

func rep(conns ...report.Connection) *report.Report {
	return &report.Report{Schema: report.Schema, Source: report.Source{Kind: "file", StartUnixNs: t0}, Connections: conns, Warnings: []string{}}
}

const (
	doc    = "https://a.test/"
	server = "192.0.2.1:443"
)

// TestCriticalPathOneConnection: HTTP/2, one connection. The document comes in
// rounds 2-3; its first round names the stylesheet and the script, which the
// server sends behind the rest of the document: the stylesheet in round 3-4, the
// script in round 4-5. The script ends last; it waited for the document's round
// 2 (the round that named it), then rounds 3, 4 and 5 of the connection (behind
// the document and the stylesheet): TCP 1 + TLS 1 + 1 + 3 = 6 round trips.
func TestCriticalPathOneConnection(t *testing.T) {
	c := conn(1, "10.0.0.1:40000", server, 0, 1, 4)
	c.HTTP = []report.HTTPMessage{msg("/", 101, 2, 3), msg("/a.css", 205, 3, 4), msg("/b.js", 206, 4, 5), msg("/c.png", 206, 5)}
	in := Input{URL: doc, Source: SourceChromium, Requests: []Request{
		req(doc, TypeDocument, "", "", server, 0, 301),
		req("https://a.test/a.css", TypeStylesheet, RenderBlocking, doc, server, 205, 401),
		req("https://a.test/b.js", TypeScript, RenderBlocking, doc, server, 206, 501),
		req("https://a.test/c.png", TypeImage, RenderNonBlocking, doc, server, 206, 501),
	}}
	p := Build(rep(c), in)
	cp := p.CriticalPath
	if cp.RoundTrips != 6 || len(cp.Steps) != 2 || cp.Steps[0].Request != 1 || cp.Steps[1].Request != 3 {
		t.Fatalf("critical path %d round trips, steps %+v; want 6 over the document and the script", cp.RoundTrips, cp.Steps)
	}
	if s := cp.Steps[0]; s.HandshakeRoundTrips != 2 || s.DataRoundTrips != 1 || !s.Partial || s.FirstRound != 2 || s.LastRound != 2 {
		t.Errorf("document step %+v: want 2 handshake round trips and round 2 only", s)
	}
	if s := cp.Steps[1]; s.HandshakeRoundTrips != 0 || s.DataRoundTrips != 3 || s.FirstRound != 3 || s.LastRound != 5 {
		t.Errorf("script step %+v: want rounds 3-5", s)
	}
	for i, want := range []struct{ blocking, critical bool }{{true, true}, {true, false}, {true, true}, {false, false}} {
		if r := p.Requests[i]; r.Blocking != want.blocking || r.Critical != want.critical || r.Connection != 1 {
			t.Errorf("request %d: blocking %t critical %t connection %d", i+1, r.Blocking, r.Critical, r.Connection)
		}
	}
	if !p.Requests[0].NewConnection || p.Requests[1].NewConnection {
		t.Errorf("only the document opened the connection: %t, %t", p.Requests[0].NewConnection, p.Requests[1].NewConnection)
	}
	if len(p.Connections) != 1 || p.Connections[0].ALPN != "h2" || p.Connections[0].TLSVersion != "1.3" || len(p.Connections[0].Requests) != 4 {
		t.Errorf("connections %+v", p.Connections)
	}
	// Inlining the 10 KB script: with a 10 KB document at IW 10 both fit in
	// RoundsNeeded(20000, 10, 1448) = 2 rounds against the document's 1: the
	// script's 3 round trips become 1, saving 2.
	found := false
	for _, s := range cp.Savings {
		if s.Kind == SavingInline && s.Request == 3 && s.CostRoundTrips == 2 {
			found = true
		}
	}
	if !found {
		t.Errorf("no saving of 2 round trips by inlining the script: %+v", cp.Savings)
	}
}

// TestCriticalPathNewConnection: HTTP/1.1, the stylesheet on a connection opened
// when the document's round 2 named it. The chain: TCP 1 + TLS 1 + round 2 of the
// document, then the new connection's TCP 1 + TLS 1 + its round 2: 6. A
// preconnected connection, ready long before, carries the script without a
// handshake: 3 + its round 2 = 4, shorter.
func TestCriticalPathNewConnection(t *testing.T) {
	a := conn(1, "10.0.0.1:40000", server, 0, 1, 2)
	a.HTTP = []report.HTTPMessage{msg("/", 101, 2, 3)}
	a.HTTP[0].Protocol = "http/1.1"
	pre := conn(2, "10.0.0.1:40001", server, 0, 1, 1)
	pre.HTTP = []report.HTTPMessage{msg("/b.js", 205, 2)}
	pre.Rounds[1].StartMs, pre.Rounds[1].EndMs = 305, 306 // the script's round, after the request at 205
	pre.HTTP[0].FirstByteMs, pre.HTTP[0].LastByteMs = f(305), f(306)
	b := conn(3, "10.0.0.1:40002", server, 205, 1, 1)
	b.HTTP = []report.HTTPMessage{msg("/a.css", 201, 2)}
	in := Input{URL: doc, Source: SourceChromium, Requests: []Request{
		req(doc, TypeDocument, "", "", server, 0, 301),
		req("https://a.test/a.css", TypeStylesheet, RenderBlocking, doc, server, 204, 205+201),
		req("https://a.test/b.js", TypeScript, RenderBlocking, doc, server, 204, 306),
	}}
	for i := range in.Requests {
		in.Requests[i].Protocol = "http/1.1"
	}
	p := Build(rep(a, pre, b), in)
	cp := p.CriticalPath
	if cp.RoundTrips != 6 || len(cp.Steps) != 2 || cp.Steps[1].Request != 2 || cp.Steps[1].HandshakeRoundTrips != 2 || cp.Steps[1].DataRoundTrips != 1 {
		t.Fatalf("critical path %d round trips, steps %+v; want 6: the document's 3, the stylesheet's new connection 2 and its round 1", cp.RoundTrips, cp.Steps)
	}
	if p.Requests[1].Connection != 3 || !p.Requests[1].NewConnection || p.Requests[2].Connection != 2 || !p.Requests[2].NewConnection {
		t.Errorf("stylesheet on %d (new %t), script on %d (new %t)", p.Requests[1].Connection, p.Requests[1].NewConnection,
			p.Requests[2].Connection, p.Requests[2].NewConnection)
	}
	// The stylesheet's connection went to the same host as the document: no
	// preconnect to suggest; a larger IW can't shorten one round.
	for _, s := range cp.Savings {
		if s.Kind == SavingPreconnect || s.Kind == SavingInitialWindow {
			t.Errorf("unexpected saving %+v", s)
		}
	}
}

// TestCriticalPathFontChain: a font on a second host, named by the stylesheet,
// that completed before the first contentful paint: document (TCP 1 + TLS 1 +
// round 2 = 3), stylesheet on the same connection (round 3: 1), font on a new
// connection to the second host opened when the stylesheet had arrived (TCP 1 +
// TLS 1 + round 2 = 3): 7. A preload in the document's head would save the
// stylesheet's round trip (the chain between the document and the font); a
// preconnect would have opened the font's connection earlier.
func TestCriticalPathFontChain(t *testing.T) {
	const fonts = "192.0.2.9:443"
	a := conn(1, "10.0.0.1:40000", server, 0, 1, 2)
	a.HTTP = []report.HTTPMessage{msg("/", 101, 2), msg("/a.css", 205, 3)}
	fc := conn(2, "10.0.0.1:40010", fonts, 305, 1, 1)
	fc.HTTP = []report.HTTPMessage{msg("/f.woff2", 201, 2)}
	fc.HTTP[0].Authority = "fonts.test"
	in := Input{URL: doc, Source: SourceChromium, Requests: []Request{
		req(doc, TypeDocument, "", "", server, 0, 201),
		req("https://a.test/a.css", TypeStylesheet, RenderBlocking, doc, server, 204, 301),
		req("https://fonts.test/f.woff2", TypeFont, RenderNonBlocking, "https://a.test/a.css", fonts, 304, 305+201),
	}, Timings: Timings{FirstContentfulPaintNs: t0 + 600e6}}
	p := Build(rep(a, fc), in)
	cp := p.CriticalPath
	if cp.RoundTrips != 7 || len(cp.Steps) != 3 || cp.Steps[2].Request != 3 || cp.Steps[2].HandshakeRoundTrips != 2 {
		t.Fatalf("critical path %d round trips, steps %+v; want 7 through the font's new connection", cp.RoundTrips, cp.Steps)
	}
	kinds := map[string]int{}
	for _, s := range cp.Savings {
		kinds[s.Kind] = s.CostRoundTrips
	}
	if kinds[SavingChain] != 1 || kinds[SavingPreconnect] == 0 {
		t.Errorf("savings %+v: want a preload saving the stylesheet's round trip and a preconnect", cp.Savings)
	}
	// Without a first paint before it, the same font does not hold the render.
	in.Timings.FirstContentfulPaintNs = t0 + 450e6
	p = Build(rep(a, fc), in)
	if p.CriticalPath.RoundTrips != 4 || p.Requests[2].Blocking {
		t.Errorf("with the first paint before the font: %d round trips, font blocking %t; want 4 and false", p.CriticalPath.RoundTrips, p.Requests[2].Blocking)
	}
}

// TestMatching: requests are matched to the message of the same method,
// authority and path on a connection to the server the browser named, the nearest
// in time; a request whose server no connection has stays unmatched and is said to.
func TestMatching(t *testing.T) {
	a := conn(1, "10.0.0.1:40000", server, 0, 1, 3)
	a.HTTP = []report.HTTPMessage{msg("/", 101, 2), msg("/x.png", 150, 3), msg("/x.png", 250, 4)}
	other := conn(2, "10.0.0.1:40001", "192.0.2.2:443", 0, 1, 1)
	other.HTTP = []report.HTTPMessage{msg("/y.png", 150, 2)}
	in := Input{URL: doc, Source: SourceChromium, Requests: []Request{
		req(doc, TypeDocument, "", "", server, 0, 201),
		req("https://a.test/x.png", TypeImage, "", doc, server, 249, 401),
		req("https://a.test/x.png", TypeImage, "", doc, server, 149, 301),
		req("https://a.test/y.png", TypeImage, "", doc, server, 150, 301), // the wrong server: not the other connection's
	}}
	p := Build(rep(a, other), in)
	want := []struct{ conn, message int }{{1, 0}, {1, 2}, {1, 1}, {0, -1}}
	for i, w := range want {
		if r := p.Requests[i]; r.Connection != w.conn || r.Message != w.message {
			t.Errorf("request %d: connection %d message %d, want %d %d", i+1, r.Connection, r.Message, w.conn, w.message)
		}
	}
	if len(p.Report.Connections) != 1 || !strings.Contains(strings.Join(p.Warnings, " "), "1 of 4 requests") {
		t.Errorf("report connections %d, warnings %q", len(p.Report.Connections), p.Warnings)
	}
	var b bytes.Buffer
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Critical path to the first render", "https://a.test/x.png", "192.0.2.1:443"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, b.String())
		}
	}
}

// TestAgreement: the browser's times are compared with the capture's; a last
// byte 12 ms late is a disagreement.
func TestAgreement(t *testing.T) {
	a := conn(1, "10.0.0.1:40000", server, 0, 1, 1)
	a.HTTP = []report.HTTPMessage{msg("/", 101, 2)}
	r := req(doc, TypeDocument, "", "", server, 0, 201)
	r.SentNs = t0 + 101e6
	in := Input{URL: doc, Source: SourceChromium, Requests: []Request{r}}
	p := Build(rep(a), in)
	if a := p.Agreement; a.Compared != 3 || !a.Agree || a.MaxDiffMs > 1.5 {
		t.Errorf("agreement %+v: want 3 timings within 1.5 ms", a)
	}
	in.Requests[0].LastByteNs += 12e6
	p = Build(rep(a), in)
	if a := p.Agreement; a.Agree || len(a.Differences) != 1 || a.Differences[0].What != "last_byte" {
		t.Errorf("agreement %+v: want the last byte to disagree", a)
	}
}

// TestByAddress: without decryption, requests are placed by their server and
// time, with the rounds that arrived while the browser received them.
func TestByAddress(t *testing.T) {
	a := conn(1, "10.0.0.1:40000", server, 0, 1, 3)
	in := Input{URL: doc, Source: SourceHAR, Requests: []Request{
		req(doc, TypeDocument, "", "", server, 0, 201),
		req("https://a.test/a.css", TypeStylesheet, "", doc, server, 205, 401),
	}}
	in.Requests[0].ConnectStartNs = t0 + 1e6
	in.Requests[1].FirstByteNs = t0 + 300e6
	p := Build(rep(a), in)
	if r := p.Requests[0]; r.Connection != 1 || len(r.Rounds) != 1 || r.Rounds[0] != 2 {
		t.Errorf("document: connection %d rounds %v, want 1 and [2]", r.Connection, r.Rounds)
	}
	if r := p.Requests[1]; r.Connection != 1 || len(r.Rounds) != 2 || r.Rounds[0] != 3 || r.Rounds[1] != 4 {
		t.Errorf("stylesheet: connection %d rounds %v, want 1 and [3 4]", r.Connection, r.Rounds)
	}
	// A HAR says nothing of render blocking: the document's stylesheets block.
	if !p.Requests[1].Blocking || p.CriticalPath.RoundTrips != 5 {
		t.Errorf("stylesheet blocking %t, critical path %d round trips; want true and 5 (3 + rounds 3-4)", p.Requests[1].Blocking, p.CriticalPath.RoundTrips)
	}
}

// TestEstimateClockOffset: a HAR whose clock is 3 s behind the capture's is put
// back on it by its connections' starts.
func TestEstimateClockOffset(t *testing.T) {
	a := conn(1, "10.0.0.1:40000", server, 10, 1, 1)
	b := conn(2, "10.0.0.1:40001", server, 250, 1, 1)
	in := Input{Requests: []Request{
		{URL: doc, RemoteAddr: server, ConnectStartNs: t0 + 10e6 - 3e9},
		{URL: "https://a.test/x", RemoteAddr: server, ConnectStartNs: t0 + 251e6 - 3e9},
	}}
	if off := EstimateClockOffset(rep(a, b), in); off < 2_990e6 || off > 3_010e6 {
		t.Errorf("offset %d ns, want about 3 s", off)
	}
	in.Requests[0].ConnectStartNs += 3e9
	in.Requests[1].ConnectStartNs += 3e9
	if off := EstimateClockOffset(rep(a, b), in); off != 0 {
		t.Errorf("offset %d ns on the same clock, want 0", off)
	}
}
