package analysis_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/truthcheck"
	"github.com/slowstart/slowstart/report"
)

// TestCampaignCapturesHoldTheTruth: captures of truth-campaign trials that were
// read wrong once (testdata/captures/campaign; the truth is the server kernel's
// snd_cwnd at its first tcp:tcp_probe event, recorded by the campaign), each
// read by hand with tshark below. Every reading must hold the truth: an exact
// one equal to it, a bound at or under it, a range around it (truthcheck.Contradicts).
func TestCampaignCapturesHoldTheTruth(t *testing.T) {
	for _, tc := range []struct {
		file  string
		truth int
		why   string
	}{
		{"truth-s12-t386.client.pcap", 86,
			"a TCP-terminating proxy (IW 86) relaying nginx 19.6 ms upstream, the client 15.0 ms away: SYN/ACK 15.8 ms after the SYN; " +
				"10 segments at 72.7 ms (the origin's IW 10), ACKed at 72.8; the next two at 92.5, 19.7 ms after the ACK: later than the " +
				"15.8 ms round trip and a turnaround, so not released by it (read exact 10)"},
		{"truth-s11-t515.server.pcap", 35,
			"the proxy (IW 35) answered the SYN 10.6 ms late (a host stall), so the capture's vantage is unknown; the request at 33.7 ms, " +
				"10 segments at 121.5, ACKed at 144.2, the next 7 at 158.9: 14.7 ms after the ACK where the SYN to SYN/ACK took 10.6 (read exact 10)"},
		{"truth-s11-t2853.server.pcap", 29,
			"a proxy (IW 29) that connects to its origin (33.0 ms away, the client 32.9) when the client connects: the request at 34.8 ms, " +
				"the first 10 segments at 101.6, 66.8 ms later, two round trips (read exact 10)"},
		{"truth-s12-t1822.client.pcap", 50,
			"TLS 1.2: two segments of the server's flight at 37.7 ms, its third (915 bytes) only at 277.7, 240 ms later on an 18 ms path " +
				"with no client data between: lost before the capture and sent again on the timer, which cut the window to 35 before the " +
				"first HTTP round of 35 segments (read 31 to 35)"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rep, err := analysis.File(context.Background(), filepath.Join("../testdata/captures/campaign", tc.file), analysis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Connections) != 1 {
				t.Fatalf("%d connections, want 1", len(rep.Connections))
			}
			iw := rep.Connections[0].InitialWindow
			if iw == nil {
				t.Fatal("no reading")
			}
			if iw.Verdict == report.VerdictNone {
				t.Fatalf("no reading (%s), the truth is %d: %s", iw.Reason, tc.truth, tc.why)
			}
			if why := truthcheck.Contradicts(iw, tc.truth); why != "" {
				t.Errorf("read %s: %s", why, tc.why)
			}
		})
	}
}
