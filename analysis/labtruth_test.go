package analysis_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/truthcheck"
	"github.com/slowstart/slowstart/report"
)

// labCase is one line of testdata/captures/labtruth.tsv: a lab trial made to test a
// rule where the real-world corpus has no instance (a HelloRetryRequest, an
// application's writes with and without Nagle, a dropped first SYN, BBR and Reno
// servers, initial windows of 50 and 100), with the server's initcwnd known.
type labCase struct {
	name   string
	truth  truthcheck.Truth
	holes  bool
	fields map[string]string
}

const capturesDir = "../testdata/captures"

func loadLabTruth(t *testing.T) []labCase {
	t.Helper()
	f, err := os.Open(filepath.Join(capturesDir, "labtruth.tsv"))
	if err != nil {
		t.Fatalf("the lab ground-truth captures are missing: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatal("labtruth.tsv is empty")
	}
	header := strings.Split(sc.Text(), "\t")
	var cases []labCase
	for sc.Scan() {
		values := strings.Split(sc.Text(), "\t")
		if len(values) != len(header) {
			t.Fatalf("labtruth.tsv: %d fields in %q, want %d", len(values), sc.Text(), len(header))
		}
		fields := map[string]string{}
		for i, h := range header {
			fields[h] = values[i]
		}
		number := func(key string) int {
			n, err := strconv.Atoi(fields[key])
			if err != nil {
				t.Fatalf("labtruth.tsv: %s %q: %v", key, fields[key], err)
			}
			return n
		}
		tls := ""
		if p := fields["proto"]; strings.HasPrefix(p, "tls") {
			tls = p[3:4] + "." + p[4:5] // tls13h2 → 1.3
		}
		cases = append(cases, labCase{
			name: fields["name"],
			truth: truthcheck.Truth{IW: number("iw"), RTTMs: float64(number("rtt_ms")), TLS: tls,
				HelloRetry: number("hello_retry") == 1, SYNsDropped: number("syns_dropped"), Expect: fields["expect"]},
			holes:  number("holes") == 1,
			fields: fields,
		})
	}
	if len(cases) == 0 {
		t.Fatal("labtruth.tsv lists no cases")
	}
	return cases
}

// TestLabGroundTruth: every committed lab capture of labtruth.tsv, from both ends,
// reads what the lab set up (truthcheck.Check: never a reading that leaves out the
// true IW; exact where the packets prove it; not exact where the situation leaves the
// window unproven; one more TLS round trip for a HelloRetryRequest; a handshake RTT
// without the dropped SYN's timeout). These captures are fixed: what a busy host could
// have caused when they were made is checked as strictly as the rest.
func TestLabGroundTruth(t *testing.T) {
	ctx := context.Background()
	for _, tc := range loadLabTruth(t) {
		for _, vantage := range []string{"client", "server"} {
			t.Run(tc.name+"/"+vantage, func(t *testing.T) {
				path := filepath.Join(capturesDir, tc.name+"."+vantage+".pcap")
				wrong, timing := truthcheck.CheckFile(ctx, path, vantage, tc.truth)
				for _, problem := range append(wrong, timing...) {
					t.Error(problem)
				}
				if tc.truth.SYNsDropped > 0 {
					// The capture shows the situation: the client's SYN sent once
					// more than the path dropped, at the client.
					ps, err := truthcheck.Packets(path)
					if err != nil {
						t.Fatal(err)
					}
					want := 1
					if vantage == "client" {
						want += tc.truth.SYNsDropped
					}
					if got := truthcheck.ClientSYNs(ps); got != want {
						t.Errorf("%d SYNs in the capture, want %d", got, want)
					}
				}
				if tc.holes {
					wrong, timing := truthcheck.CheckHoles(ctx, t.TempDir(), path, vantage, tc.truth)
					for _, problem := range append(wrong, timing...) {
						t.Error(problem)
					}
				}
			})
		}
	}
}

// TestHelloRetryAddsARoundTrip: a HelloRetryRequest is one TLS round trip more than
// the same handshake without it (same server, client, path and window), from both
// ends.
func TestHelloRetryAddsARoundTrip(t *testing.T) {
	cases := loadLabTruth(t)
	byName := map[string]labCase{}
	for _, tc := range cases {
		byName[tc.name] = tc
	}
	pairs := 0
	for _, tc := range cases {
		base, ok := byName[strings.TrimPrefix(tc.name, "hrr-")]
		if !tc.truth.HelloRetry || !ok || base.truth.HelloRetry {
			continue
		}
		pairs++
		for _, vantage := range []string{"client", "server"} {
			hrr := onlyServerData(t, filepath.Join(capturesDir, tc.name+"."+vantage+".pcap"))
			plain := onlyServerData(t, filepath.Join(capturesDir, base.name+"."+vantage+".pcap"))
			if hrr.TLS == nil || plain.TLS == nil {
				t.Fatalf("%s, %s (%s): no TLS seen", tc.name, base.name, vantage)
			}
			if hrr.TLS.HandshakeRoundTrips != plain.TLS.HandshakeRoundTrips+1 {
				t.Errorf("%s (%s): %d TLS round trips, %s: %d; want one more with the HelloRetryRequest",
					tc.name, vantage, hrr.TLS.HandshakeRoundTrips, base.name, plain.TLS.HandshakeRoundTrips)
			}
		}
	}
	if pairs == 0 {
		t.Fatal("labtruth.tsv has no HelloRetryRequest case with a plain twin")
	}
}

// TestCaptureHolesInCorpusCaptures: the capture-loss check (truthcheck.CheckHoles)
// over nginx captures of testdata/captures/truth.tsv whose first round the window cut
// (cleartext, a response more than twice the IW): without round 1's last segment or
// one in its middle the reading is ambiguous, never a smaller exact window.
func TestCaptureHolesInCorpusCaptures(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		iw, rttMs int
	}{
		{"rtt40-iw10-h1-100000", 10, 40},
		{"rtt150-iw32-h1-100000", 32, 150},
		{"rtt40-iw3-h1-100000", 3, 40},
	} {
		for _, vantage := range []string{"client", "server"} {
			t.Run(c.name+"/"+vantage, func(t *testing.T) {
				path := filepath.Join(capturesDir, c.name+"."+vantage+".pcap")
				truth := truthcheck.Truth{IW: c.iw, RTTMs: float64(c.rttMs), Expect: truthcheck.ExpectExact}
				wrong, timing := truthcheck.CheckHoles(ctx, t.TempDir(), path, vantage, truth)
				for _, problem := range append(wrong, timing...) {
					t.Error(problem)
				}
			})
		}
	}
}

func onlyServerData(t *testing.T, path string) report.Connection {
	t.Helper()
	rep, err := analysis.File(context.Background(), path, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var found []report.Connection
	for _, c := range rep.Connections {
		if c.BytesToClient > 0 {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d connections with server data, want 1", path, len(found))
	}
	return found[0]
}

// TestLoadedPathProbeIsNoWindow: on a loaded host, a tail loss probe the server sent
// alone 43 ms after its first ten segments (its timestamp echo unchanged: it had
// heard nothing from the client) reached the client 4 ms after the tenth, as if part
// of the first round (testdata/captures/README.md reads the trace). The route's
// initcwnd was 10: the reading must leave room for it, and must not be an exact 11.
func TestLoadedPathProbeIsNoWindow(t *testing.T) {
	rep, err := analysis.File(context.Background(), filepath.Join(capturesDir, "loaded-tlp-iw10.client.pcap"), analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Other page loads of the same client namespace show up too (a SYN, a
	// handshake): the one that carried the page is the one with data.
	var iw *report.InitialWindow
	for _, c := range rep.Connections {
		if c.Server == "10.64.0.10:8080" && len(c.Rounds) > 0 {
			iw = c.InitialWindow
		}
	}
	if iw == nil {
		t.Fatal("no IW reading")
	}
	const truth = 10
	high := iw.Segments
	if iw.SegmentsMax > 0 {
		high = iw.SegmentsMax
	}
	switch iw.Verdict {
	case "exact":
		if iw.Segments != truth {
			t.Errorf("exact %d, the route's initcwnd was %d", iw.Segments, truth)
		}
	case "range":
		if iw.Segments > truth || high < truth {
			t.Errorf("range %d-%d leaves out the true %d", iw.Segments, high, truth)
		}
	case "lower_bound":
		if iw.Segments > truth {
			t.Errorf("at least %d, above the true %d", iw.Segments, truth)
		}
	}
}

// TestCloseAlertIsNoRound: the server's TLS close_notify, sent a round trip after
// the client closed (its alert and FIN), is the connection's teardown. The response
// took three data rounds (testdata/captures/README.md reads the trace with tshark:
// its data from 130.2 to 211.1 ms, two round trips of 40 ms); the alert at 252.7 ms
// must not make a fourth.
func TestCloseAlertIsNoRound(t *testing.T) {
	rep, err := analysis.File(context.Background(), filepath.Join(capturesDir, "close-alert-h2-iw10.client.pcap"), analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Connections) != 1 {
		t.Fatalf("%d connections, want 1", len(rep.Connections))
	}
	c := rep.Connections[0]
	if rt := c.RoundTrips; rt.TCP != 1 || rt.TLS != 1 || rt.HTTP != 3 {
		t.Errorf("round trips %+v, want 1 TCP + 1 TLS + 3 data", rt)
	}
	last := c.Rounds[len(c.Rounds)-1]
	if last.StartMs > 250 || last.Bytes < 1000 {
		t.Errorf("the last round starts at %.1f ms with %d bytes: the alert at 252.7 ms made a round", last.StartMs, last.Bytes)
	}
}
