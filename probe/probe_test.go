package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// emptyCapture is a capture that sees nothing: tests of the client without root.
type emptyCapture struct{ stopped chan struct{} }

func (e *emptyCapture) Next(*capture.Packet) error { <-e.stopped; return io.EOF }
func (e *emptyCapture) Stop()                      { close(e.stopped) }
func (e *emptyCapture) Close() error               { return nil }
func (e *emptyCapture) info() captureInfo          { return captureInfo{Interface: "test0"} }

// openedCaptures records the remote endpoints captures were opened for.
type openedCaptures struct{ remotes []netip.AddrPort }

func (o *openedCaptures) open(_ context.Context, remote netip.AddrPort) (packetCapture, error) {
	o.remotes = append(o.remotes, remote)
	return &emptyCapture{stopped: make(chan struct{})}, nil
}

func runWithoutCapture(t *testing.T, opts Options) (*Result, *openedCaptures, error) {
	t.Helper()
	o, err := opts.normalized()
	if err != nil {
		return nil, nil, err
	}
	caps := &openedCaptures{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := run(ctx, &o, caps.open, nil)
	return res, caps, err
}

func TestRedirectsAreHopsOfTheirOwn(t *testing.T) {
	var sawEncoding, sawAgent string
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusMovedPermanently) })
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/page", http.StatusFound) })
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		sawEncoding, sawAgent = r.Header.Get("Accept-Encoding"), r.Header.Get("User-Agent")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, caps, err := runWithoutCapture(t, Options{URL: srv.URL + "/a", Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || len(res.Runs[0]) != 3 || len(res.Report.Connections) != 6 {
		t.Fatalf("runs %v with %d connections: want 2 runs of 3 hops", res.Runs, len(res.Report.Connections))
	}
	if len(caps.remotes) != 6 {
		t.Errorf("%d captures opened, want one per hop (6)", len(caps.remotes))
	}
	locals := map[string]bool{}
	for i, c := range res.Report.Connections {
		ct := c.ClientTiming
		if ct == nil || ct.Local == "" {
			t.Fatalf("connection %d has no client timing", i+1)
		}
		if locals[ct.Local] {
			t.Errorf("connection %d reuses %s: every hop must use a fresh connection", i+1, ct.Local)
		}
		locals[ct.Local] = true
		if c.Index != i+1 {
			t.Errorf("connection %d has index %d", i+1, c.Index)
		}
	}
	first, last := res.Report.Connections[0].ClientTiming, res.Final(0).ClientTiming
	if first.Status != 301 || !strings.HasSuffix(first.Location, "/b") || first.Hop != 1 {
		t.Errorf("first hop %+v: want 301 to /b", first)
	}
	if last.Status != 200 || last.BodyBytes != 5000 || last.Hop != 3 || last.Run != 1 {
		t.Errorf("last hop %+v: want 200 with 5000 bytes, hop 3 of run 1", last)
	}
	if last.DNSMs != nil || last.ConnectAtMs <= 0 || last.FirstByteAtMs < last.ConnectAtMs || last.LastByteAtMs < last.FirstByteAtMs {
		t.Errorf("timings out of order or missing: %+v", last)
	}
	if sawEncoding != browserAcceptEncoding || sawAgent != BrowserUserAgent {
		t.Errorf("request had Accept-Encoding %q and User-Agent %q: want a browser's", sawEncoding, sawAgent)
	}
	var redirectDiagnosis bool
	for _, d := range res.Report.Connections[0].Diagnoses {
		redirectDiagnosis = redirectDiagnosis || d.Kind == DiagnosisRedirect
	}
	if !redirectDiagnosis {
		t.Errorf("the redirecting hop has no redirect diagnosis: %+v", res.Report.Connections[0].Diagnoses)
	}
	if res.Report.Runs == nil || res.Report.Runs.Runs != 2 {
		t.Errorf("runs summary %+v: want 2 runs", res.Report.Runs)
	}
}

func TestNoCompressAndHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	_, _, err := runWithoutCapture(t, Options{URL: srv.URL, NoCompress: true, Headers: http.Header{"X-Test": {"1"}}, UserAgent: "probe-test"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("Accept-Encoding") != "identity" || got.Get("X-Test") != "1" || got.Get("User-Agent") != "probe-test" {
		t.Errorf("headers %v", got)
	}
}

func TestErrors(t *testing.T) {
	loop := http.NewServeMux()
	loop.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusFound) })
	loopSrv := httptest.NewServer(loop)
	defer loopSrv.Close()
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer untrusted.Close()
	// A listener that never accepts: the kernel completes the handshake, nobody answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + closed.Addr().String() + "/"
	closed.Close()

	tests := []struct {
		name string
		opts Options
		kind string
	}{
		{"malformed URL", Options{URL: "http://[::1"}, KindURL},
		{"no scheme", Options{URL: "example.com/"}, KindURL},
		{"ftp", Options{URL: "ftp://example.com/"}, KindURL},
		{"bad port", Options{URL: "http://example.com:99999/"}, KindURL},
		{"bad TLS version", Options{URL: "https://example.com/", TLSVersion: "1.1"}, KindURL},
		{"DNS failure", Options{URL: "http://no-such-host.invalid/"}, KindDNS},
		{"refused", Options{URL: refusedURL}, KindRefused},
		{"untrusted certificate", Options{URL: untrusted.URL}, KindTLS},
		{"timeout", Options{URL: "http://" + silent.Addr().String() + "/", Timeout: 300 * time.Millisecond}, KindTimeout},
		{"redirect loop", Options{URL: loopSrv.URL + "/"}, KindRedirect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runWithoutCapture(t, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if KindOf(err) != tc.kind {
				t.Errorf("error %q of kind %q, want %q", err, KindOf(err), tc.kind)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestRedirectLoopKeepsHops(t *testing.T) {
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusFound) }))
	defer loop.Close()
	res, _, err := runWithoutCapture(t, Options{URL: loop.URL + "/"})
	if KindOf(err) != KindRedirect {
		t.Fatalf("error %v, want a redirect loop", err)
	}
	if n := len(res.Report.Connections); n != MaxRedirects+1 {
		t.Errorf("%d connections, want %d (the page and %d redirects)", n, MaxRedirects+1, MaxRedirects)
	}
}

func TestParseResolve(t *testing.T) {
	tests := []struct {
		in, key, addr string
		ok            bool
	}{
		{"example.com:443:192.0.2.7", "example.com:443", "192.0.2.7", true},
		{"example.com:443:[2001:db8::1]", "example.com:443", "2001:db8::1", true},
		{"example.com:443:2001:db8::1", "example.com:443", "2001:db8::1", true},
		{"example.com:0:192.0.2.7", "", "", false},
		{"example.com:443", "", "", false},
		{"example.com:443:not-an-ip", "", "", false},
	}
	for _, tc := range tests {
		key, addr, err := ParseResolve(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && (key != tc.key || addr.String() != tc.addr) {
			t.Errorf("%q: got %s → %s, want %s → %s", tc.in, key, addr, tc.key, tc.addr)
		}
	}
}

func TestResolveOverridesDNS(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Host) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res, caps, err := runWithoutCapture(t, Options{URL: fmt.Sprintf("http://site.invalid:%d/", port),
		Resolve: map[string]netip.Addr{fmt.Sprintf("site.invalid:%d", port): netip.MustParseAddr("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if caps.remotes[0].Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("captured for %s, want 127.0.0.1", caps.remotes[0])
	}
	if res.Final(0).ClientTiming.DNSMs != nil {
		t.Error("a --resolve'd name was looked up")
	}
}

func TestParseHeader(t *testing.T) {
	if n, v, err := ParseHeader("x-a:  b c "); err != nil || n != "X-A" || v != "b c" {
		t.Errorf("got %q %q %v", n, v, err)
	}
	for _, bad := range []string{"novalue", ": v", "a b: c"} {
		if _, _, err := ParseHeader(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRoundsNeeded(t *testing.T) {
	tests := []struct {
		size      int64
		iw, mss   int
		wantRound int
	}{
		{0, 10, 1448, 0},
		{1, 10, 1448, 1},
		{14480, 10, 1448, 1},
		{14481, 10, 1448, 2},
		{163840, 10, 1448, 4}, // 114 segments: 10+20+40+80
		{163840, 32, 1448, 3}, // 32+64+128
		{163840, 3, 1448, 6},  // 3+6+12+24+48+96
	}
	for _, tc := range tests {
		if got := RoundsNeeded(tc.size, tc.iw, tc.mss); got != tc.wantRound {
			t.Errorf("RoundsNeeded(%d, %d, %d) = %d, want %d", tc.size, tc.iw, tc.mss, got, tc.wantRound)
		}
	}
}

func TestSummarizeWindows(t *testing.T) {
	ex, lb := report.VerdictExact, report.VerdictLowerBound
	tests := []struct {
		name                 string
		segs                 []int
		verdicts             []string
		min, mode, spread    int
		median               float64
		growing, disagreeing bool
	}{
		{"steady", []int{10, 10, 10}, []string{ex, ex, ex}, 10, 10, 0, 10, false, false},
		{"route cache", []int{10, 10, 20, 28}, []string{ex, ex, ex, ex}, 10, 10, 18, 15, true, false},
		{"fleet", []int{10, 32, 10, 32, 10}, []string{ex, ex, ex, ex, ex}, 10, 10, 22, 10, false, true},
		{"lower bounds are no evidence", []int{4, 10, 6}, []string{lb, ex, lb}, 4, 4, 6, 6, false, false},
	}
	for _, tc := range tests {
		s := &report.RunSummary{IWSegments: tc.segs, IWVerdicts: tc.verdicts}
		summarizeWindows(s)
		if s.IWMin != tc.min || s.IWMode != tc.mode || s.IWSpread != tc.spread || s.IWMedian != tc.median || s.Growing != tc.growing || s.Disagree != tc.disagreeing {
			t.Errorf("%s: got min %d mode %d spread %d median %g growing %v disagree %v", tc.name, s.IWMin, s.IWMode, s.IWSpread, s.IWMedian, s.Growing, s.Disagree)
		}
		if (tc.growing || tc.disagreeing) && len(s.Notes) == 0 {
			t.Errorf("%s: flagged without a note", tc.name)
		}
	}
}

func TestDiagnoseChainAndWindow(t *testing.T) {
	rtt := 130.0
	c := &report.Connection{
		HandshakeRTTMs: &rtt, MSS: 1448,
		TLS: &report.TLS{Version: "1.2", ServerFlightBytes: 7300, HandshakeRoundTrips: 3,
			InitialWindow: &report.InitialWindow{Segments: 3, Bytes: 4344, Verdict: report.VerdictExact}},
		InitialWindow: &report.InitialWindow{Segments: 3, Bytes: 4344, Verdict: report.VerdictExact},
		ClientTiming:  &report.ClientTiming{ChainBytes: 6900, ContentType: "text/html", ContentEncoding: "gzip"},
	}
	for i, segs := range []int{3, 3, 9, 18, 36, 48} {
		phase := report.PhaseHTTP
		if i < 2 {
			phase = report.PhaseTLS
		}
		c.Rounds = append(c.Rounds, report.Round{Index: i + 1, Segments: segs, Bytes: segs * 1448, Phase: phase, Limit: report.LimitCwnd})
	}
	got := map[string]report.Diagnosis{}
	for _, d := range diagnose(c, diagnosisContext{tlsVersionFree: true, offeredCompression: true}) {
		got[d.Kind] = d
	}
	chain, ok := got[DiagnosisCertificateChain]
	if !ok || chain.CostRoundTrips != 1 || chain.CostMs != 130 || !strings.Contains(chain.Text, "6.9 KB") || !strings.Contains(chain.Text, "3 segments, 4.3 KB") {
		t.Errorf("certificate chain diagnosis %+v", chain)
	}
	// 111 segments of data in 4 rounds; IW 10 needs 4, IW 32 needs 3.
	iw, ok := got[DiagnosisInitialWindow]
	if !ok || iw.CostRoundTrips != 1 || !strings.Contains(iw.Text, "needs 4 rounds at IW 3; 3 at IW 32") {
		t.Errorf("initial window diagnosis %+v", iw)
	}
	if _, ok := got[DiagnosisTLSVersion]; !ok {
		t.Error("no TLS version diagnosis for a negotiated TLS 1.2")
	}
	if _, ok := got[DiagnosisCompression]; ok {
		t.Error("compression diagnosis for a gzip body")
	}
}

// TestStalledBodyIsIncomplete: a server that sends 1 KB of a 100 KB body and
// stops is reported as incomplete (with what came), and the probe fails, never
// calling the transfer done.
func TestStalledBodyIsIncomplete(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	res, _, err := runWithoutCapture(t, Options{URL: srv.URL + "/", Timeout: 300 * time.Millisecond})
	if err == nil || KindOf(err) != KindHTTP || !strings.Contains(err.Error(), "1000 of 100000") {
		t.Fatalf("error %v (kind %q), want an incomplete-response error naming 1000 of 100000 bytes", err, KindOf(err))
	}
	if res == nil || len(res.Report.Connections) != 1 {
		t.Fatalf("no connection reported for the stalled fetch")
	}
	ct := res.Report.Connections[0].ClientTiming
	if ct.BodyBytes != 1000 || ct.ExpectedBodyBytes == nil || *ct.ExpectedBodyBytes != 100000 || !strings.Contains(ct.Incomplete, "stalled") {
		t.Errorf("client timing %d of %v bytes, incomplete %q", ct.BodyBytes, ct.ExpectedBodyBytes, ct.Incomplete)
	}
	var b strings.Builder
	if err := WriteText(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "incomplete: 1000 of 100000 body bytes, stalled") {
		t.Errorf("text does not say the body is incomplete:\n%s", b.String())
	}
}

// TestLocalPathGetsNoWindowAdvice: rounds over loopback say nothing of a real
// path; the diagnoses say so instead of advising a larger initcwnd.
func TestLocalPathGetsNoWindowAdvice(t *testing.T) {
	rtt := 0.04
	c := &report.Connection{HandshakeRTTMs: &rtt, MSS: 65483,
		InitialWindow: &report.InitialWindow{Segments: 1, Bytes: 65483, Verdict: report.VerdictExact}}
	for i, segs := range []int{1, 2, 4, 8} {
		c.Rounds = append(c.Rounds, report.Round{Index: i + 1, Segments: segs, Bytes: segs * 65483, Phase: report.PhaseHTTP, Limit: report.LimitCwnd})
	}
	ds := diagnose(c, diagnosisContext{})
	if len(ds) != 1 || ds[0].Kind != DiagnosisLocalPath {
		t.Fatalf("diagnoses %+v, want only the local-path one", ds)
	}
	c.MSS, rtt = 1448, 40
	for _, d := range diagnose(c, diagnosisContext{}) {
		if d.Kind == DiagnosisLocalPath {
			t.Errorf("a 40 ms path was called local")
		}
	}
}

// TestErrorStatusIsMeasuredNotASuccess: a page that answers 404 is measured (the
// Result is whole, with its status), flagged by a warning, and not a success.
func TestErrorStatusIsMeasuredNotASuccess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/gone", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, strings.Repeat("not here ", 500))
	}))
	defer srv.Close()
	res, _, err := runWithoutCapture(t, Options{URL: srv.URL + "/moved", Runs: 2})
	if KindOf(err) != KindStatus || !strings.Contains(err.Error(), "HTTP status 404") {
		t.Fatalf("error %v (kind %q), want a %s error naming 404", err, KindOf(err), KindStatus)
	}
	if res == nil || len(res.Runs) != 2 {
		t.Fatalf("the runs were not all measured: %+v", res)
	}
	final := res.Final(1)
	if final == nil || final.ClientTiming.Status != 404 || final.ClientTiming.BodyBytes != 4500 {
		t.Fatalf("final hop %+v, want a measured 404 of 4500 bytes", final.ClientTiming)
	}
	if !slices.ContainsFunc(res.Report.Warnings, func(w string) bool { return strings.Contains(w, "HTTP status 404") }) {
		t.Errorf("no warning about the status: %q", res.Report.Warnings)
	}
	// A redirect (3xx) on the way is no error, nor is a 2xx page.
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fine") }))
	defer ok.Close()
	if _, _, err := runWithoutCapture(t, Options{URL: ok.URL + "/"}); err != nil {
		t.Errorf("a 200 page: %v", err)
	}
}
