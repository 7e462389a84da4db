package survey

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

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

// exactTables lists the exact measurement's nftables tables in the namespace.
func exactTables(netnsPath string) ([]string, error) {
	handle, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return nil, err
	}
	defer handle.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(handle)))
	if err != nil {
		return nil, err
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tb := range tables {
		if strings.HasPrefix(tb.Name, exact.TablePrefix) {
			names = append(names, tb.Name)
		}
	}
	return names, nil
}

// startLab starts an emulated server and registers its removal; the check
// that no nftables table is left in its client namespace runs before it.
func startLab(t *testing.T, cfg probe.LabServerConfig) *probe.LabServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := probe.StartLabServer(ctx, cfg)
	if err != nil {
		t.Fatalf("starting a lab server with IW %d: %v", cfg.IW, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the lab server: %v", err)
		}
	})
	t.Cleanup(func() {
		if tables, err := exactTables(s.Netns); err != nil {
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

// TestSurveyLab surveys four emulated servers with different initial windows
// (three over http, one over TLS), each in its own namespace, plus a URL that
// refuses connections, and checks every row against the truth.
func TestSurveyLab(t *testing.T) {
	requireRoot(t)
	checkNothingLeft(t)
	cases := []labCase{{"iw3", 3, ""}, {"iw10", 10, ""}, {"iw32", 32, ""}, {"tls-iw16", 16, "1.2"}}
	var targets []Target
	var servers []*probe.LabServer
	for _, c := range cases {
		s := startLab(t, probe.LabServerConfig{RTT: 20 * time.Millisecond, IW: c.iw, TLSVersion: c.tls, Keys: labKeys})
		servers = append(servers, s)
		targets = append(targets, Target{Label: c.label, URL: s.URL(fmt.Sprintf("/bytes/%d", labBodyBytes)),
			Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs})
	}
	// Nothing listens on port 81 of the first server.
	refused := Target{Label: "refused", URL: fmt.Sprintf("http://%s/", netip.AddrPortFrom(servers[0].Addr.Addr(), 81)), Netns: servers[0].Netns}
	targets = append(targets, refused)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var finished []int
	res, err := Run(ctx, targets, Options{Concurrency: 4, ExactRuns: 2, Timeout: 10 * time.Second,
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
	for i, c := range cases {
		r := res.Rows[i]
		if r.Index != i+1 || r.Label != c.label {
			t.Fatalf("row %d is %d %q, want %q: rows out of order", i, r.Index, r.Label, c.label)
		}
		checkLabRow(t, r, c)
	}
	if a, b := res.Rows[0].RoundTrips, res.Rows[2].RoundTrips; a != nil && b != nil && *a <= *b {
		t.Errorf("IW 3 took %d round trips, IW 32 %d: want more with IW 3", *a, *b)
	}
	last := res.Rows[len(res.Rows)-1]
	if !last.Failed() || last.Error == "" || probe.KindOf(last.PassiveErr) != probe.KindRefused {
		t.Errorf("refused URL: error %q (passive kind %q), want a refused connection", last.Error, probe.KindOf(last.PassiveErr))
	}
	if last.ExactIWSegments != nil || last.RoundTrips != nil {
		t.Errorf("refused URL has measurements: %+v", last)
	}
}

// checkLabRow checks one row of an emulated server against its true IW.
func checkLabRow(t *testing.T, r Row, c labCase) {
	t.Helper()
	if r.Failed() {
		t.Errorf("%s: failed: %s", c.label, r.Error)
		return
	}
	wantPhase := exact.PhaseHTTP
	if c.tls != "" {
		wantPhase = exact.PhaseTLS
	}
	if r.ExactVerdict != exact.VerdictExact || r.ExactIWSegments == nil || *r.ExactIWSegments != c.iw {
		t.Errorf("%s: exact verdict %s, %s segments, want exact %d (%s)", c.label, r.ExactVerdict, optInt(r.ExactIWSegments), c.iw, r.ExactReason)
	}
	if r.ExactPhase != wantPhase {
		t.Errorf("%s: exact counted %q, want %q", c.label, r.ExactPhase, wantPhase)
	}
	// At the 64-byte MSS the server's segments carry 52 bytes (12 of timestamps).
	if r.ExactIWBytes == nil || *r.ExactIWBytes <= (c.iw-1)*40 || *r.ExactIWBytes > c.iw*exact.DefaultMSS {
		t.Errorf("%s: exact IW bytes %s for %d segments at MSS %d", c.label, optInt(r.ExactIWBytes), c.iw, exact.DefaultMSS)
	}
	// The page load: its own reading never contradicts the truth, and over
	// cleartext with 150 KB (≥ 2 IW at any of these IWs) it is exact.
	switch {
	case r.PassiveIWSegments == nil:
		t.Errorf("%s: no page-load IW (verdict %q)", c.label, r.PassiveVerdict)
	case r.PassiveVerdict == report.VerdictExact && *r.PassiveIWSegments != c.iw:
		t.Errorf("%s: page load says exact %d, true IW %d", c.label, *r.PassiveIWSegments, c.iw)
	case r.PassiveVerdict == report.VerdictLowerBound && *r.PassiveIWSegments > c.iw:
		t.Errorf("%s: page load's lower bound %d is above the true IW %d", c.label, *r.PassiveIWSegments, c.iw)
	case c.tls == "" && r.PassiveVerdict != report.VerdictExact:
		t.Errorf("%s: page load verdict %s, want exact", c.label, r.PassiveVerdict)
	}
	if r.MSS == nil || r.FirstRoundBytes == nil {
		t.Fatalf("%s: no MSS or first round: %+v", c.label, r)
	}
	if c.tls == "" && *r.FirstRoundBytes != min(c.iw**r.MSS, labBodyBytes) {
		// Cleartext: the first round is the IW, full-sized segments.
		t.Errorf("%s: first round %d bytes, want IW × MSS = %d × %d", c.label, *r.FirstRoundBytes, c.iw, *r.MSS)
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
	if r.HandshakeRTTMs == nil || *r.HandshakeRTTMs < 19 || *r.HandshakeRTTMs > 40 {
		t.Errorf("%s: handshake RTT %s ms, want about 20", c.label, optFloat(r.HandshakeRTTMs))
	}
	if r.Status == nil || *r.Status != 200 || r.BodyBytes == nil || *r.BodyBytes != labBodyBytes {
		t.Errorf("%s: status %s, body %v", c.label, optInt(r.Status), r.BodyBytes)
	}
}

// TestSurveyInterrupted cancels a survey in the middle: Run returns the rows
// finished before, with the context's error, and leaves no table behind (the
// lab server's cleanup checks).
func TestSurveyInterrupted(t *testing.T) {
	requireRoot(t)
	checkNothingLeft(t)
	s := startLab(t, probe.LabServerConfig{RTT: 20 * time.Millisecond, IW: 10, Keys: labKeys})
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
