package survey

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
)

// requireRoot skips a test that needs root, except under CI=true, where not
// being root is a failure.
func requireRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces, nftables and live captures")
}

var labKeys = server.NewKeyCache()

// labNamespacesOfThisProcess lists the lab namespaces this test process made
// that still exist.
func labNamespacesOfThisProcess(t *testing.T) []string {
	t.Helper()
	names, err := netlab.NamespacesOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkNothingLeft registers a cleanup, to run after every other, that removes
// the lab's namespaces and checks that none is left.
func checkNothingLeft(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if err := netlab.CloseAll(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
		if left := labNamespacesOfThisProcess(t); len(left) > 0 {
			t.Errorf("lab namespaces left behind: %v", left)
		}
	})
}

// startLab starts an emulated server and registers its removal; the check
// that no nftables table is left in its client namespace runs before it.
func startLab(t *testing.T, cfg labserver.Config) *labserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := labserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting a lab server with IW %d: %v", cfg.IW, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the lab server: %v", err)
		}
	})
	t.Cleanup(func() {
		if tables, err := exact.Tables(s.Netns); err != nil {
			t.Errorf("listing nftables tables in %s: %v", s.Netns, err)
		} else if len(tables) > 0 {
			t.Errorf("nftables tables left in %s: %v", s.Netns, tables)
		}
	})
	return s
}

// labCase is an emulated server and what the survey must find.
type labCase struct {
	label string
	iw    int
	tls   string // "" for cleartext HTTP
}

const labBodyBytes = 150000

// labAttempts is how many times TestSurveyLab surveys at most, while the host
// keeps the page loads from a strict reading (see checkLabRow).
const labAttempts = 4

// TestSurveyLab surveys four emulated servers with different initial windows
// (three over http, one over TLS), each in its own namespace, plus a URL that
// refuses connections, and checks every row against the truth.
//
// A busy host (other tests, the race detector's slower build, the survey's own
// four page loads and exact measurements on two cores) distorts the emulated
// paths: the emulator and the servers are descheduled mid-flight, so a
// handshake takes 40-110 ms on a 20 ms path, and a server stalled in its first
// round reads as a lower bound. Those are readings of what happened, not wrong
// answers. So the handshake RTT is checked against tshark's reading of the
// page load's own capture (and never below the path's), and what needs an
// undistorted path (the cleartext IW read exactly from the page load, its
// first round of IW × MSS bytes) is asked of each server in one survey of at
// most labAttempts. A wrong answer (an IW other than the server's, a bound
// above it, an RTT the capture does not show) fails at once. When every
// survey in which a server's reading was not strict also shows the host's
// hand independently (that page load's handshake, read by tshark, more than
// labDistortedMs above the path), the test skips, saying so: the host gave
// the emulator no undistorted moment. A reading that is not strict without
// that evidence fails.
func TestSurveyLab(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (Debian package tshark): it gives the independent reading of each page load's handshake")
	}
	checkNothingLeft(t)
	cases := []labCase{{"iw3", 3, ""}, {"iw10", 10, ""}, {"iw32", 32, ""}, {"tls-iw16", 16, "1.2"}}
	var targets []Target
	var servers []*labserver.Server
	for _, c := range cases {
		s := startLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: c.iw, TLSVersion: c.tls, Keys: labKeys})
		servers = append(servers, s)
		targets = append(targets, Target{Label: c.label, URL: s.URL(fmt.Sprintf("/bytes/%d", labBodyBytes)),
			Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs})
	}
	// Nothing listens on port 81 of the first server.
	refused := Target{Label: "refused", URL: fmt.Sprintf("http://%s/", netip.AddrPortFrom(servers[0].Addr.Addr(), 81)), Netns: servers[0].Netns}
	targets = append(targets, refused)

	strict := map[string]bool{}          // a server read strictly in some survey
	unexplained := map[string][]string{} // not strict, without evidence of the host
	explained := map[string][]string{}   // not strict, with it
	for attempt := 1; attempt <= labAttempts; attempt++ {
		outcomes := surveyLabOnce(t, targets, cases)
		if t.Failed() {
			return
		}
		var pending []string
		for _, c := range cases {
			o := outcomes[c.label]
			switch {
			case o.notStrict == "":
				strict[c.label] = true
			case !strict[c.label] && o.distorted != "":
				explained[c.label] = append(explained[c.label], fmt.Sprintf("survey %d: %s, during %s", attempt, o.notStrict, o.distorted))
			case !strict[c.label]:
				unexplained[c.label] = append(unexplained[c.label], fmt.Sprintf("survey %d: %s", attempt, o.notStrict))
			}
			if !strict[c.label] {
				pending = append(pending, c.label+": "+o.notStrict)
			}
		}
		if len(pending) == 0 {
			return
		}
		t.Logf("survey %d: not read strictly (%s): surveying again", attempt, strings.Join(pending, "; "))
	}
	var skip []string
	for _, c := range cases {
		switch {
		case strict[c.label]:
		case len(unexplained[c.label]) > 0:
			t.Errorf("%s: never read strictly, without the host's distortion to explain it: %s", c.label, strings.Join(unexplained[c.label], "; "))
		default:
			skip = append(skip, c.label+" ("+strings.Join(explained[c.label], "; ")+")")
		}
	}
	if !t.Failed() && len(skip) > 0 {
		t.Skipf("the host distorted the emulated paths in every survey of %s: the strict readings could not be checked (every reading was checked for being right)", strings.Join(skip, ", "))
	}
}

// labOutcome is what one survey gave of one server beyond right or wrong.
type labOutcome struct {
	notStrict string // why the reading was not the strict one an undistorted path gives ("" when it was)
	distorted string // the independent evidence that the host distorted the path ("" when none)
}

// surveyLabOnce surveys the targets and checks the rows: it fails the test on
// a wrong answer and returns, by label, what was not strict and why.
func surveyLabOnce(t *testing.T, targets []Target, cases []labCase) map[string]labOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var finished []int
	pcaps := t.TempDir()
	res, err := Run(ctx, targets, Options{Concurrency: 4, ExactRuns: 2, Timeout: 10 * time.Second, pcapDir: pcaps,
		OnRow: func(r Row) { finished = append(finished, r.Index) }})
	if err != nil {
		t.Fatalf("survey: %v", err)
	}
	var text strings.Builder
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())

	if len(res.Rows) != len(targets) || res.Total != len(targets) || len(finished) != len(targets) {
		t.Fatalf("%d rows of %d targets (%d reported finished)", len(res.Rows), len(targets), len(finished))
	}
	if res.Failed != 1 {
		t.Errorf("%d failed rows, want 1 (the refused URL)", res.Failed)
	}
	outcomes := map[string]labOutcome{}
	for i, c := range cases {
		r := res.Rows[i]
		if r.Index != i+1 || r.Label != c.label {
			t.Fatalf("row %d is %d %q, want %q: rows out of order", i, r.Index, r.Label, c.label)
		}
		outcomes[c.label] = checkLabRow(t, r, c, filepath.Join(pcaps, fmt.Sprintf("%d.pcap", r.Index)))
	}
	if a, b := res.Rows[0].RoundTrips, res.Rows[2].RoundTrips; a != nil && b != nil && *a <= *b {
		o := outcomes["iw3"]
		if o.notStrict == "" {
			o.notStrict = fmt.Sprintf("IW 3 took %d round trips, IW 32 %d", *a, *b)
		}
		outcomes["iw3"] = o
	}
	last := res.Rows[len(res.Rows)-1]
	if !last.Failed() || last.Error == "" || probe.KindOf(last.PassiveErr) != probe.KindRefused {
		t.Errorf("refused URL: error %q (passive kind %q), want a refused connection", last.Error, probe.KindOf(last.PassiveErr))
	}
	if last.ExactIWSegments != nil || last.RoundTrips != nil {
		t.Errorf("refused URL has measurements: %+v", last)
	}
	return outcomes
}

// labPathRTTMs is the emulated paths' round-trip time; a handshake more than
// labDistortedMs above it was slowed by the host, not by the path (the
// emulator adds well under a millisecond when it gets its time).
const (
	labPathRTTMs   = 20.0
	labDistortedMs = 5.0
)

// tsharkHandshakeMs is tshark's reading of the handshake RTT in a capture of
// one connection: Wireshark's iRTT, from the SYN to the client's ACK of the
// SYN/ACK, as the report's handshake_rtt_ms is defined.
func tsharkHandshakeMs(t *testing.T, pcap string) float64 {
	t.Helper()
	cmd := exec.Command("tshark", "-r", pcap, "-Y", "tcp.analysis.initial_rtt", "-T", "fields", "-e", "tcp.analysis.initial_rtt")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", pcap, err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	seconds, err := strconv.ParseFloat(first, 64)
	if err != nil {
		t.Fatalf("%s: no initial RTT in tshark's reading (%q)", pcap, out)
	}
	return seconds * 1e3
}

// checkLabRow checks one row of an emulated server against its true IW and
// against tshark's reading of its page load's capture. It fails the test on a
// wrong answer, and returns what of the reading was not strict, with the
// evidence of the host's distortion when there is some.
func checkLabRow(t *testing.T, r Row, c labCase, pcap string) (o labOutcome) {
	cmpOr := cmp.Or[string]
	t.Helper()
	if r.Failed() {
		t.Errorf("%s: failed: %s", c.label, r.Error)
		return o
	}
	wantPhase := exact.PhaseHTTP
	if c.tls != "" {
		wantPhase = exact.PhaseTLS
	}
	// The exact measurement: exact and right. A busy host can keep it from an
	// answer (its runs disagree when a tail loss probe's new segment is timed
	// among the window's): it then says so, which is not wrong.
	switch {
	case r.ExactVerdict == exact.VerdictExact && (r.ExactIWSegments == nil || *r.ExactIWSegments != c.iw):
		t.Errorf("%s: exact verdict with %s segments, the server's IW is %d (%s)", c.label, optInt(r.ExactIWSegments), c.iw, r.ExactReason)
	case r.ExactVerdict != exact.VerdictExact:
		o.notStrict = fmt.Sprintf("the exact measurement gave no answer (%s: %s)", r.ExactVerdict, r.ExactReason)
	case r.ExactIWBytes == nil || *r.ExactIWBytes <= (c.iw-1)*40 || *r.ExactIWBytes > c.iw*exact.DefaultMSS:
		// At the 64-byte MSS the server's segments carry 52 bytes (12 of timestamps).
		t.Errorf("%s: exact IW bytes %s for %d segments at MSS %d", c.label, optInt(r.ExactIWBytes), c.iw, exact.DefaultMSS)
	}
	if r.ExactPhase != wantPhase {
		t.Errorf("%s: exact counted %q, want %q", c.label, r.ExactPhase, wantPhase)
	}
	if r.HandshakeRTTMs == nil {
		t.Errorf("%s: no handshake RTT", c.label)
	} else {
		// What the capture shows (tshark's reading of the same packets), and
		// never less than the path: the emulator cannot deliver early.
		if want := tsharkHandshakeMs(t, pcap); math.Abs(*r.HandshakeRTTMs-want) > 0.01 {
			t.Errorf("%s: handshake RTT %.3f ms, tshark reads %.3f ms in the page load's capture", c.label, *r.HandshakeRTTMs, want)
		}
		if *r.HandshakeRTTMs < labPathRTTMs-1 {
			t.Errorf("%s: handshake RTT %.3f ms, below the path's %.0f ms", c.label, *r.HandshakeRTTMs, labPathRTTMs)
		}
		if *r.HandshakeRTTMs > labPathRTTMs+labDistortedMs {
			o.distorted = fmt.Sprintf("a handshake of %.1f ms on a %.0f ms path", *r.HandshakeRTTMs, labPathRTTMs)
		}
	}
	// The page load: its own reading never contradicts the truth, and over
	// cleartext with 150 KB (≥ 2 IW at any of these IWs) it is exact on an
	// undistorted path (a server stalled in its first round reads as a lower
	// bound, which is not wrong).
	switch {
	case r.PassiveIWSegments == nil && c.tls == "":
		t.Errorf("%s: no page-load IW (verdict %q)", c.label, r.PassiveVerdict)
		return o
	case r.PassiveIWSegments == nil:
		// Over TLS the first round may be the TLS flight's or the
		// response's: a reading of neither (ambiguous) is not wrong.
		o.notStrict = cmpOr(o.notStrict, fmt.Sprintf("no page-load IW (verdict %s)", r.PassiveVerdict))
	case r.PassiveVerdict == report.VerdictExact && *r.PassiveIWSegments != c.iw:
		t.Errorf("%s: page load says exact %d, true IW %d", c.label, *r.PassiveIWSegments, c.iw)
	case r.PassiveVerdict == report.VerdictLowerBound && *r.PassiveIWSegments > c.iw:
		t.Errorf("%s: page load's lower bound %d is above the true IW %d", c.label, *r.PassiveIWSegments, c.iw)
	case c.tls == "" && r.PassiveVerdict != report.VerdictExact:
		o.notStrict = cmpOr(o.notStrict, fmt.Sprintf("the page load read the IW as %s %d", r.PassiveVerdict, *r.PassiveIWSegments))
	}
	if r.MSS == nil || r.FirstRoundBytes == nil {
		t.Fatalf("%s: no MSS or first round: %+v", c.label, r)
	}
	if c.tls == "" && *r.FirstRoundBytes != min(c.iw**r.MSS, labBodyBytes) && o.notStrict == "" {
		// Cleartext: the first round is the IW, full-sized segments.
		o.notStrict = fmt.Sprintf("a first round of %d bytes, not IW × MSS = %d × %d", *r.FirstRoundBytes, c.iw, *r.MSS)
	}
	if *r.FirstRoundBytes <= 0 || *r.FirstRoundBytes > c.iw**r.MSS*4 {
		t.Errorf("%s: first round %d bytes", c.label, *r.FirstRoundBytes)
	}
	if c.tls != "" {
		if r.TLSFlightBytes == nil || *r.TLSFlightBytes < 4000 || r.TLSRoundTrips == nil || *r.TLSRoundTrips < 1 {
			t.Errorf("%s: TLS flight %s bytes, %s TLS round trips: want a flight with the 4 KB chain", c.label, optInt(r.TLSFlightBytes), optInt(r.TLSRoundTrips))
		}
	} else if r.TLSFlightBytes != nil {
		t.Errorf("%s: a TLS flight of %d bytes over cleartext", c.label, *r.TLSFlightBytes)
	}
	// Slow start from IW over 150 KB: more data rounds with a smaller IW.
	if r.RoundTrips == nil || *r.RoundTrips < 3 {
		t.Errorf("%s: %s round trips", c.label, optInt(r.RoundTrips))
	}
	if r.Status == nil || *r.Status != 200 || r.BodyBytes == nil || *r.BodyBytes != labBodyBytes {
		t.Errorf("%s: status %s, body %v", c.label, optInt(r.Status), r.BodyBytes)
	}
	return o
}

// TestSurveyInterrupted cancels a survey in the middle: Run returns the rows
// finished before, with the context's error, and leaves no table behind (the
// lab server's cleanup checks).
func TestSurveyInterrupted(t *testing.T) {
	requireRoot(t)
	checkNothingLeft(t)
	s := startLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: 10, Keys: labKeys})
	var targets []Target
	for i := range 6 {
		targets = append(targets, Target{Label: fmt.Sprint(i), URL: s.URL(fmt.Sprintf("/bytes/%d", labBodyBytes)), Netns: s.Netns})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The survey takes one address's targets in an order of its own, so the
	// test cancels after the second finished row, whichever target it was.
	var finished atomic.Int32
	res, err := Run(ctx, targets, Options{Concurrency: 1, ExactRuns: 1, OnRow: func(Row) {
		if finished.Add(1) == 2 {
			cancel()
		}
	}})
	if err == nil {
		t.Fatal("an interrupted survey returned no error")
	}
	if res == nil || !res.Interrupted || len(res.Rows) != 2 || res.Total != 6 {
		t.Fatalf("interrupted survey: %+v, want 2 of 6 rows", res)
	}
	for _, r := range res.Rows {
		if r.Failed() || r.ExactIWSegments == nil || *r.ExactIWSegments != 10 {
			t.Errorf("row %d: %s, exact %s", r.Index, r.Error, optInt(r.ExactIWSegments))
		}
	}
	var b strings.Builder
	if err := WriteText(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Interrupted: 2 of 6 URLs measured") {
		t.Errorf("the table does not say it was interrupted:\n%s", b.String())
	}
}

// TestSurveyOptions checks what Run refuses before measuring anything.
func TestSurveyOptions(t *testing.T) {
	good := []Target{{URL: "http://192.0.2.1/"}}
	for _, tc := range []struct {
		name    string
		targets []Target
		opts    Options
	}{
		{"nothing to measure", good, Options{NoExact: true, NoPassive: true}},
		{"concurrency", good, Options{Concurrency: -1}},
		{"too much concurrency", good, Options{Concurrency: MaxConcurrency + 1}},
		{"MSS", good, Options{MSS: 20}},
		{"runs", good, Options{ExactRuns: 101}},
		{"timeout", good, Options{Timeout: -time.Second}},
		{"bad URL", []Target{{URL: "ftp://x/"}}, Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(context.Background(), tc.targets, tc.opts)
			if _, ok := err.(*OptionsError); !ok || res != nil {
				t.Errorf("got %v, %v; want an *OptionsError and no result", res, err)
			}
		})
	}
}
