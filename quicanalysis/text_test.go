package quicanalysis

import (
	"regexp"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/report"
)

// TestSmallResponseClaimsNoWindow: a response smaller than a datagram or two
// (an empty 200) proves no window: the reading says so, with no negative or
// one-byte bounds, at both vantage points.
func TestSmallResponseClaimsNoWindow(t *testing.T) {
	for _, body := range []int{0, 100, 2000} {
		cfg := simConfig{name: "small response", rttMs: 40, initialBytes: 1200, maxDatagram: quicGoDatagram,
			certificateBytes: 1500, windowBytes: 32 * quicGoDatagram, bodyBytes: body}
		truth := runSim(t, cfg)
		w := newWire(t)
		for _, view := range [][]Datagram{truth.clientView, truth.serverView} {
			c := analyzeView(t, w, view)
			iw := c.InitialWindow
			if iw.Verdict != report.VerdictNone {
				t.Errorf("body %d B: verdict %s (%d bytes): %s; want none", body, iw.Verdict, iw.Bytes, iw.Reason)
			}
			if regexp.MustCompile(`-\d`).MatchString(iw.Reason) || strings.Contains(iw.Reason, " 1 bytes") {
				t.Errorf("body %d B: %q", body, iw.Reason)
			}
		}
	}
}

// TestVantageGiven: datagrams recorded at the client's socket are read as the
// client's, with the client's round trip, even over a path too short for the
// handshake's gaps to tell the ends apart.
func TestVantageGiven(t *testing.T) {
	for _, rttMs := range []float64{0.02, 40} {
		cfg := simConfig{name: "vantage", rttMs: rttMs, initialBytes: 1200, maxDatagram: quicGoDatagram,
			certificateBytes: 1500, windowBytes: 10 * quicGoDatagram, bodyBytes: 30_000, turnaroundMs: 0.05}
		truth := runSim(t, cfg)
		w := newWire(t)
		a := New(Options{Keys: w.Keys, Vantage: report.VantageClient})
		for _, d := range truth.clientView {
			a.Add(d)
		}
		conns := a.Connections()
		if len(conns) != 1 {
			t.Fatalf("%d connections", len(conns))
		}
		c := conns[0]
		if c.Vantage != report.VantageClient || c.HandshakeRTTMs == nil || *c.HandshakeRTTMs < rttMs {
			t.Errorf("RTT %.2f ms: vantage %s, handshake RTT %v; want the client's, at least the path's", rttMs, c.Vantage, c.HandshakeRTTMs)
		}
	}
}
