package quicanalysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/report"
)

// analyzeView runs the analysis on one end's datagrams.
func analyzeView(t *testing.T, w *wire, view []Datagram) *report.Connection {
	t.Helper()
	a := New(Options{Keys: w.Keys})
	for _, d := range view {
		a.Add(d)
	}
	conns := a.Connections()
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	return &conns[0]
}

const quicGoDatagram = 1280

// simCases are the table of simulated connections. The expected values are not here:
// each comes from the simulation's record of what its server did (simTruth).
var simCases = []simConfig{
	{name: "small chain", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 1500, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000},
	{name: "chain just under the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 2800, windowBytes: 32 * quicGoDatagram, bodyBytes: 100_000},
	{name: "chain over the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 9000, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000},
	{name: "chain three times over", rttMs: 150, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 20_000, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000},
	{name: "a larger first datagram fits the chain", rttMs: 40, initialBytes: 3000, maxDatagram: quicGoDatagram, certificateBytes: 6000, windowBytes: 32 * quicGoDatagram, bodyBytes: 100_000},
	{name: "a strict server", rttMs: 40, initialBytes: 1200, maxDatagram: 1200, certificateBytes: 9000, windowBytes: 10 * 1200, bodyBytes: 60_000, strict: true},
	{name: "a small window cuts the handshake too", rttMs: 70, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 9000, windowBytes: 4 * quicGoDatagram, bodyBytes: 30_000},
	{name: "IW 10 datagrams", rttMs: 100, initialBytes: 1200, maxDatagram: 1252, certificateBytes: 4000, windowBytes: 10 * 1252, bodyBytes: 100_000},
	{name: "the window grows during the response's first round", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 1500, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, lateAppAck: true},
	{name: "a loaded server over the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 9000, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, turnaroundMs: 8},
	{name: "a loaded server under the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 1500, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, turnaroundMs: 8},
	{name: "a slow signature and application over the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 9000, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, signMs: 16, appMs: 10},
	{name: "a slow signature and application under the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 1500, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, signMs: 16, appMs: 10},
	{name: "late reads of every sample over the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 9000, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, slowReadMs: 10},
	{name: "late reads of every sample under the budget", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 1500, windowBytes: 32 * quicGoDatagram, bodyBytes: 200_000, slowReadMs: 10},
	{name: "late reads and a slow signature on a long path", rttMs: 150, initialBytes: 1200, maxDatagram: quicGoDatagram, certificateBytes: 12_000, windowBytes: 10 * quicGoDatagram, bodyBytes: 100_000, slowReadMs: 30, signMs: 20},
}

// TestRoundsOfSimulatedConnections checks, at both ends of every simulated connection,
// the handshake's round trips, the rounds the amplification limit ended, the chain
// diagnosis and its cost, the first flights, and the initial window's verdict against
// the window the simulated server had.
func TestRoundsOfSimulatedConnections(t *testing.T) {
	for _, cfg := range simCases {
		t.Run(cfg.name, func(t *testing.T) {
			truth := runSim(t, cfg)
			w := newWire(t) // the same made-up secrets
			if truth.amplificationRounds == 0 && cfg.certificateBytes > 3*cfg.initialBytes {
				t.Fatalf("the simulation's server was not held back by the amplification limit with a %d-byte certificate and a %d-byte Initial", cfg.certificateBytes, cfg.initialBytes)
			}
			for _, vantage := range []string{report.VantageClient, report.VantageServer} {
				view := truth.clientView
				if vantage == report.VantageServer {
					view = truth.serverView
				}
				c := analyzeView(t, w, view)
				what := vantage + " capture"
				if c.Vantage != vantage {
					t.Errorf("%s: vantage %q", what, c.Vantage)
				}
				checkAgainstTruth(t, what, cfg, truth, c)
			}
		})
	}
}

func checkAgainstTruth(t *testing.T, what string, cfg simConfig, truth *simTruth, c *report.Connection) {
	t.Helper()
	if c.QUIC.Decrypted != "all" || c.QUIC.Undecrypted != 0 {
		t.Fatalf("%s: decrypted %s, %d packets not (%v)", what, c.QUIC.Decrypted, c.QUIC.Undecrypted, c.Notes)
	}
	if c.RoundTrips.TLS != truth.handshakeRounds {
		t.Errorf("%s: %d handshake round trips, the server's handshake took %d (rounds %+v)", what, c.RoundTrips.TLS, truth.handshakeRounds, truth.rounds)
	}
	amplification := 0
	for _, r := range c.Rounds {
		if r.Phase == report.PhaseTLS && r.Limit == report.LimitAmplification {
			amplification++
		}
	}
	if amplification != truth.amplificationRounds {
		t.Errorf("%s: %d handshake rounds ended by the amplification limit, the server was held back in %d", what, amplification, truth.amplificationRounds)
	}
	if c.QUIC.AmplificationLimited != (truth.amplificationRounds > 0) {
		t.Errorf("%s: amplification_limited %v", what, c.QUIC.AmplificationLimited)
	}
	var diag *report.Diagnosis
	for i := range c.Diagnoses {
		if c.Diagnoses[i].Kind == DiagnosisCertificateChain {
			diag = &c.Diagnoses[i]
		}
	}
	wantCost := min(truth.amplificationRounds, truth.handshakeRounds-1)
	switch {
	case wantCost == 0 && diag != nil:
		t.Errorf("%s: diagnosis %q though the limit cost nothing", what, diag.Text)
	case wantCost > 0 && diag == nil:
		t.Errorf("%s: no certificate_chain diagnosis, though the limit cost %d round trips", what, wantCost)
	case diag != nil:
		if diag.CostRoundTrips != wantCost {
			t.Errorf("%s: the diagnosis costs %d round trips, the limit cost %d", what, diag.CostRoundTrips, wantCost)
		}
		if want := fmt.Sprintf("the chain (%s) does not fit in 3× your %s-byte Initial", report.Size(int64(cfg.certificateBytes)), thousands(cfg.initialBytes)); !strings.Contains(diag.Text, want) {
			t.Errorf("%s: diagnosis %q, want it to say %q", what, diag.Text, want)
		}
	}
	if c.QUIC.ClientInitialBytes != truth.clientInitialBytes {
		t.Errorf("%s: the client's first flight %d bytes, it sent %d", what, c.QUIC.ClientInitialBytes, truth.clientInitialBytes)
	}
	if c.QUIC.ServerFirstFlightBytes != truth.firstFlightBytes {
		t.Errorf("%s: the server's first flight %d bytes, it sent %d before an acknowledgement arrived", what, c.QUIC.ServerFirstFlightBytes, truth.firstFlightBytes)
	}
	if c.QUIC.CertificateBytes != cfg.certificateBytes {
		t.Errorf("%s: certificate %d bytes, want %d", what, c.QUIC.CertificateBytes, cfg.certificateBytes)
	}
	// The handshake's rounds, one by one: bytes and the limit that ended each.
	for k := 0; k < truth.handshakeRounds && k < len(c.Rounds); k++ {
		got, want := c.Rounds[k], truth.rounds[k]
		if got.Bytes != want.bytes || got.Limit != want.limit {
			t.Errorf("%s: round %d: %d bytes, limit %s; the server sent %d bytes and was stopped by %s", what, k+1, got.Bytes, got.Limit, want.bytes, want.limit)
		}
	}
	checkWindow(t, what, cfg, truth, c)
}

// checkWindow: whatever the verdict, what it claims holds the server's window; and it
// is exact when nothing could have grown the window in the round and the timing is
// clean.
func checkWindow(t *testing.T, what string, cfg simConfig, truth *simTruth, c *report.Connection) {
	t.Helper()
	iw, window := c.InitialWindow, cfg.windowBytes
	switch iw.Verdict {
	case report.VerdictExact:
		if !(iw.Bytes-c.MSS < window && window <= iw.Bytes) {
			t.Errorf("%s: IW exact %d bytes (datagrams up to %d): the server's window of %d is not within a datagram below it", what, iw.Bytes, c.MSS, window)
		}
	case report.VerdictRange:
		if window < iw.Bytes || window > iw.BytesMax {
			t.Errorf("%s: IW between %d and %d bytes, the server's was %d", what, iw.Bytes, iw.BytesMax, window)
		}
	case report.VerdictLowerBound:
		if window < iw.Bytes {
			t.Errorf("%s: IW at least %d bytes, the server's was %d", what, iw.Bytes, window)
		}
	}
	wantExact := !truth.windowGrew && cfg.turnaroundMs == 0 && cfg.signMs == 0 && cfg.slowReadMs == 0 && int64(cfg.bodyBytes) > 2*int64(window)
	if wantExact && iw.Verdict != report.VerdictExact {
		t.Errorf("%s: IW %s (%s), want exact", what, iw.Verdict, iw.Reason)
	}
	if truth.windowGrew && iw.Verdict == report.VerdictExact {
		t.Errorf("%s: IW exact %d bytes, though the server's window grew before the round ended", what, iw.Bytes)
	}
	if cfg.lateAppAck && !truth.windowGrew {
		t.Errorf("the simulated server's window did not grow during the first response round with a late acknowledgement")
	}
	t.Logf("%s: IW %s %d-%d (%s)", what, iw.Verdict, iw.Bytes, iw.BytesMax, iw.Reason)
}

// TestInitialCopiesNoted: a client Initial sent again before the server answered
// (a probe timeout) is noted with the time the server took; a ClientHello in two
// datagrams (new CRYPTO bytes in each) is not a copy.
func TestInitialCopiesNoted(t *testing.T) {
	for _, c := range []struct {
		name  string
		copy  bool
		notes bool
	}{{"a copy", true, true}, {"a ClientHello in two datagrams", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWire(t)
			hello := w.clientHello()
			var view []Datagram
			first, _ := w.packet(true, quic.SpaceInitial, cryptoFrame(0, hello[:20]), 1200)
			view = append(view, w.datagram(0, true, first))
			second := cryptoFrame(0, hello[:20]) // the same bytes again
			if !c.copy {
				second = cryptoFrame(20, hello[20:])
			}
			p, _ := w.packet(true, quic.SpaceInitial, second, 1200)
			view = append(view, w.datagram(200_000_000, true, p))
			sh, _ := w.packet(false, quic.SpaceInitial, append(ackFrame(0, 1, 0), cryptoFrame(0, serverHello())...), 0)
			view = append(view, w.datagram(240_000_000, false, sh))
			conn := analyzeView(t, w, view)
			noted := false
			for _, n := range conn.Notes {
				noted = noted || strings.Contains(n, "sent its Initial again 1 time before")
			}
			if noted != c.notes {
				t.Errorf("noted %v, want %v: %q", noted, c.notes, conn.Notes)
			}
		})
	}
}
