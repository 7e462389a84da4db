package analysis

import (
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/rounds"
	"github.com/slowstart/slowstart/tlsrec"
	"github.com/slowstart/slowstart/verdict"
)

// tlsSummary is what the TLS scanners and the rounds say of the handshake.
type tlsSummary struct {
	version string
	http    bool // ALPN or the port says the application data is HTTP
	// helloRetry: the server answered the first ClientHello with a HelloRetryRequest.
	helloRetry bool
	// clientHelloEnd: end offset of the client's first flight. retryHelloEnd: end of
	// its second ClientHello after a HelloRetryRequest (-1 without one).
	// clientAppStart: offset of the client's first application-data record (TLS
	// 1.3: its encrypted Finished).
	clientHelloEnd int64
	retryHelloEnd  int64
	clientAppStart int64
	// Filled by locate: the rounds the first ClientHello alone released (the
	// HelloRetryRequest, when there was one), the server's flight (ServerHello …
	// Certificate), and the end of the server's handshake.
	retryRounds    []rounds.Round
	flightRounds   []rounds.Round
	flightEnd      int64
	handshakeEnd   int64
	flightBytes    int
	flightSegments int
	retrySegments  int
	handshakeRTs   int
}

func (ca *connAnalyzer) summarizeTLS(c *flow.Conn) *tlsSummary {
	port := c.Server.Port()
	t := &tlsSummary{clientHelloEnd: -1, retryHelloEnd: -1, clientAppStart: -1, http: port == 443 || port == 8443}
	cs, ss := ca.tls[flow.ToServer], ca.tls[flow.ToClient]
	ch, sh := cs.Hello(), ss.Hello()
	if v := sh.NegotiatedVersion; v != 0 {
		t.version = tlsrec.VersionString(v)
	}
	t.helloRetry = sh.HelloRetryRequest
	for _, p := range append(append([]string{}, ch.ALPN...), sh.ALPN...) {
		if p == "h2" || p == "http/1.1" || p == "http/1.0" {
			t.http = true
		}
	}
	hellos := 0
	for _, r := range cs.EachRecord() {
		if t.clientHelloEnd < 0 {
			t.clientHelloEnd = r.End()
		}
		for _, ht := range r.HandshakeTypes {
			if ht == tlsrec.HandshakeClientHello {
				hellos++
				if hellos == 2 && t.helloRetry {
					t.retryHelloEnd = r.End()
				}
			}
		}
		if r.ContentType == tlsrec.ContentApplicationData && t.clientAppStart < 0 {
			t.clientAppStart = r.Offset
		}
	}
	if t.clientHelloEnd < 0 {
		t.clientHelloEnd = 1 // at least one byte: the hello started the stream
	}
	if t.helloRetry && t.retryHelloEnd < 0 {
		// The second ClientHello was not seen whole: take everything before the
		// client's first application data (or its Finished) for it.
		t.retryHelloEnd = t.clientAppStart
	}
	return t
}

// locate finds the server's first flight (rounds released by the ClientHello alone;
// after a HelloRetryRequest, by the second ClientHello) and its handshake (rounds
// released before the client's first application data).
func (t *tlsSummary) locate(raw []rounds.Round) {
	appStart := t.clientAppStart
	flightHello := t.clientHelloEnd
	if t.helloRetry && t.retryHelloEnd > 0 {
		flightHello = t.retryHelloEnd
		for i, r := range raw {
			if r.ClientDataAtStart <= t.clientHelloEnd {
				t.retryRounds = raw[:i+1]
				t.retrySegments += r.Segments
			}
		}
	}
	first := len(t.retryRounds)
	for i := first; i < len(raw); i++ {
		r := raw[i]
		if r.ClientDataAtStart <= flightHello {
			t.flightEnd = r.EndOffset
			t.flightBytes += r.Bytes
			t.flightSegments += r.Segments
			t.flightRounds = raw[first : i+1]
		}
	}
	for _, r := range raw {
		if appStart < 0 || r.ClientDataAtStart <= appStart {
			if appStart < 0 && r.ClientDataAtStart > flightHello && t.handshakeRTs >= 2+len(t.retryRounds) {
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
		t.handshakeRTs = len(t.retryRounds) + len(t.flightRounds)
	}
}

// report is the handshake's part of the Report, with the reading of the window
// from the server's flight (verdict.Result.TLSFlight).
func (t *tlsSummary) report(flight *report.InitialWindow) *report.TLS {
	return &report.TLS{
		Version:              t.version,
		ServerFlightBytes:    t.flightBytes,
		ServerFlightSegments: t.flightSegments,
		HandshakeRoundTrips:  t.handshakeRTs,
		InitialWindow:        flight,
	}
}

// handshake is the handshake as the verdict reads it.
func (t *tlsSummary) handshake() *verdict.Handshake {
	return &verdict.Handshake{
		RetryRounds: len(t.retryRounds), FlightRounds: len(t.flightRounds),
		RetrySegments: t.retrySegments, FlightSegments: t.flightSegments,
		FlightEnd: t.flightEnd, HandshakeEnd: t.handshakeEnd,
	}
}
