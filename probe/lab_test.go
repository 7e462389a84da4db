package probe

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/report"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces and a live capture")
}

// startLab starts a lab server that the test removes when it ends.
func startLab(t *testing.T, cfg labserver.Config) *labserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := labserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting the lab server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the lab server: %v", err)
		}
	})
	return s
}

// probeLab probes path on s from the client namespace.
func probeLab(t *testing.T, s *labserver.Server, path string, edit func(*Options)) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{URL: s.URL(path), Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs, Timeout: 20 * time.Second}
	if edit != nil {
		edit(&opts)
	}
	return Run(ctx, opts)
}

var labKeys = server.NewKeyCache()

// TestProbeLab probes the built-in server over each protocol stack at a few initial
// windows and RTTs, and checks the verdict: exact with the true IW where the
// response is at least twice the IW, never a wrong exact.
func TestProbeLab(t *testing.T) {
	requireRoot(t)
	t.Cleanup(func() { labpath.CloseAll() })
	type point struct {
		stack  string // "h1", "tls1.2", "tls1.3-h2"
		iw     int
		rttMs  int
		bodyKB int
		nginx  bool
	}
	points := []point{
		{"h1", 10, 20, 100, false},
		{"h1", 4, 150, 3, false},
		{"tls1.2", 3, 20, 100, false},
		{"tls1.2", 32, 150, 160, false},
		{"tls1.3-h2", 16, 20, 100, false},
		{"tls1.3-h2", 2, 150, 60, false},
		{"h1", 10, 150, 100, true},
		{"tls1.2", 3, 20, 160, true},
		{"tls1.3-h2", 32, 20, 160, true},
		{"h1", 64, 20, 3, true},
	}
	for _, p := range points {
		name := fmt.Sprintf("%s/iw%d/rtt%d/%dKB", p.stack, p.iw, p.rttMs, p.bodyKB)
		if p.nginx {
			name += "/nginx"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := labserver.Config{RTT: time.Duration(p.rttMs) * time.Millisecond, IW: p.iw, Keys: labKeys,
				Nginx: p.nginx, NginxBodySizes: []int64{int64(p.bodyKB * 1000)}}
			switch p.stack {
			case "tls1.2":
				cfg.TLSVersion = "1.2"
			case "tls1.3-h2":
				cfg.TLSVersion, cfg.HTTP2 = "1.3", true
			}
			s := startLab(t, cfg)
			path := fmt.Sprintf("/bytes/%d", p.bodyKB*1000)
			res, err := probeLab(t, s, path, nil)
			// A first round the host cut short (a stalled server: the round reads as
			// limited by the application, a lower bound at the true IW) is probed
			// again, at most twice. A wrong answer is never retried.
			for attempt := 2; attempt <= 3 && err == nil && firstRoundCutShort(res, p.iw); attempt++ {
				t.Logf("the first round was cut short (a busy host): probe %d", attempt)
				res, err = probeLab(t, s, path, nil)
			}
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			checkVerdict(t, res, p.iw, int64(p.bodyKB*1000))
			if testing.Verbose() {
				var b strings.Builder
				WriteText(&b, res)
				t.Log("\n" + b.String())
			}
		})
	}
}

// firstRoundCutShort reports whether the final connection of a response long enough
// for an exact reading read as a lower bound at exactly the true IW.
func firstRoundCutShort(res *Result, trueIW int) bool {
	c := res.Final(0)
	if c == nil || c.InitialWindow == nil {
		return false
	}
	iw := c.InitialWindow
	return c.BytesToClient >= int64(2*trueIW*c.MSS) && iw.Verdict == report.VerdictLowerBound && iw.Segments == trueIW
}

// checkVerdict checks the final connection's IW verdict against the true IW.
func checkVerdict(t *testing.T, res *Result, trueIW int, bodyBytes int64) {
	t.Helper()
	c := res.Final(0)
	if c == nil {
		t.Fatal("no connection in the result")
	}
	if c.ClientTiming == nil || c.ClientTiming.BodyBytes != bodyBytes {
		t.Fatalf("client timing %+v: want a body of %d bytes", c.ClientTiming, bodyBytes)
	}
	iw := c.InitialWindow
	if iw == nil {
		t.Fatal("no initial window")
	}
	mss := c.MSS
	long := c.BytesToClient >= int64(2*trueIW*mss)
	rwndSmaller := c.ClientWindow.InitialBytes > 0 && c.ClientWindow.InitialBytes < trueIW*mss
	// Over TLS, a flight that fit in the window leaves the IW to the first HTTP
	// round, read after the handshake's segments were acknowledged: a range (the
	// window may have grown), exactly its top for CUBIC, which the lab runs.
	flightFit := c.TLS != nil && c.TLS.InitialWindow != nil && c.TLS.InitialWindow.Verdict == report.VerdictLowerBound
	switch {
	case iw.Verdict == report.VerdictRwndLimited && rwndSmaller:
		// The client's receive window was below the IW: rwnd_limited is the truth.
	case iw.Verdict == report.VerdictExact && iw.Segments != trueIW:
		t.Errorf("verdict exact with %d segments, true IW %d (reason: %s)", iw.Segments, trueIW, iw.Reason)
	case iw.Verdict == report.VerdictRange && (trueIW < iw.Segments || trueIW > iw.SegmentsMax):
		t.Errorf("range %d-%d excludes the true IW %d (reason: %s)", iw.Segments, iw.SegmentsMax, trueIW, iw.Reason)
	case iw.Verdict == report.VerdictRange && iw.ExactIf == "linux_cubic_or_reno" && iw.SegmentsMax != trueIW:
		t.Errorf("range %d-%d says %d for CUBIC, the lab's, true IW %d", iw.Segments, iw.SegmentsMax, iw.SegmentsMax, trueIW)
	case iw.Verdict == report.VerdictLowerBound && iw.Segments > trueIW:
		t.Errorf("lower bound %d above the true IW %d", iw.Segments, trueIW)
	case long && flightFit && iw.Verdict != report.VerdictRange && iw.Verdict != report.VerdictExact && iw.Verdict != report.VerdictLowerBound:
		t.Errorf("response %d bytes ≥ 2 IW after a TLS flight that fit: verdict %s, want a range, exact or a lower bound (reason: %s)", c.BytesToClient, iw.Verdict, iw.Reason)
	case long && !flightFit && iw.Verdict != report.VerdictExact:
		t.Errorf("response %d bytes ≥ 2 IW, verdict %s (%d segments), want exact %d (reason: %s)", c.BytesToClient, iw.Verdict, iw.Segments, trueIW, iw.Reason)
	case !long && iw.Verdict != report.VerdictLowerBound && iw.Verdict != report.VerdictExact && iw.Verdict != report.VerdictRange:
		t.Errorf("short response: verdict %s, want lower_bound", iw.Verdict)
	}
	if c.HandshakeRTTMs == nil {
		t.Error("no handshake RTT")
	}
}

// TestAgreesWithCurl compares the probe's client timings with curl -w on the same
// lab path: TCP connect, TLS and time to first byte within 1 ms plus 2%.
func TestAgreesWithCurl(t *testing.T) {
	requireRoot(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	t.Cleanup(func() { labpath.CloseAll() })
	// A path long enough that 2% of its times exceed the CPU curl (OpenSSL)
	// spends in the handshake beyond Go's TLS (2-4 ms here: it loads and parses
	// the CA file there).
	s := startLab(t, labserver.Config{RTT: 100 * time.Millisecond, IW: 10, TLSVersion: "1.2", Keys: labKeys})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, s.RootPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	path := "/bytes/50000"
	// Five runs of each, alternating, compared by their minima: a stall of the host
	// (tens of ms on a busy virtual machine) only ever makes a run slower, while a
	// systematic disagreement shows in the minima too.
	const runs = 5
	metrics := []string{"connect", "TLS done", "first byte", "TLS done to first byte"}
	probeMs, curlMs := map[string][]float64{}, map[string][]float64{}
	for range runs {
		res, err := probeLab(t, s, path, func(o *Options) { o.HTTP1Only = true; o.TLSVersion = "1.2" })
		if err != nil {
			t.Fatal(err)
		}
		pt := res.Final(0).ClientTiming
		out, err := exec.Command("nsenter", "--net="+s.Netns, "--", curl, "-s", "-o", "/dev/null", "--http1.1", "--tlsv1.2", "--tls-max", "1.2",
			"--cacert", caFile, "--resolve", fmt.Sprintf("%s:%d:%s", labserver.ServerName, s.Addr.Port(), s.Addr.Addr()),
			"-w", "%{time_connect} %{time_appconnect} %{time_starttransfer}", s.URL(path)).Output()
		if err != nil {
			t.Fatalf("curl: %v", err)
		}
		var connect, appconnect, firstByte float64
		if _, err := fmt.Sscan(string(out), &connect, &appconnect, &firstByte); err != nil {
			t.Fatalf("curl printed %q: %v", out, err)
		}
		// The wait for the first byte after the handshake is network time for both.
		for i, pair := range [][2]float64{
			{pt.ConnectAtMs, connect * 1000},
			{*pt.TLSAtMs, appconnect * 1000},
			{pt.FirstByteAtMs, firstByte * 1000},
			{pt.FirstByteAtMs - *pt.TLSAtMs, (firstByte - appconnect) * 1000},
		} {
			probeMs[metrics[i]] = append(probeMs[metrics[i]], pair[0])
			curlMs[metrics[i]] = append(curlMs[metrics[i]], pair[1])
		}
	}
	for _, name := range metrics {
		probeMin, curlMin := slices.Min(probeMs[name]), slices.Min(curlMs[name])
		t.Logf("%s: probe %.2f ms, curl %.2f ms (minima of %d runs: probe %.2f, curl %.2f)", name, probeMin, curlMin, runs, probeMs[name], curlMs[name])
		if diff := math.Abs(probeMin - curlMin); diff > 1+0.02*curlMin {
			t.Errorf("%s: probe %.2f ms, curl %.2f ms (minima of %d runs): differ by %.2f ms, more than 1 ms + 2%%", name, probeMin, curlMin, runs, diff)
		}
	}
}

// TestProbeGrid is the full grid (bench/probe-grid.sh runs it): every IW in
// {1, 2, 3, 4, 10, 16, 32, 64} at RTT 20 and 150 ms over cleartext HTTP/1.1, TLS
// 1.2 with HTTP/1.1 and TLS 1.3 with HTTP/2, with the built-in server.
func TestProbeGrid(t *testing.T) {
	requireRoot(t)
	if os.Getenv("SLOWSTART_PROBE_GRID") == "" {
		t.Skip("set SLOWSTART_PROBE_GRID=1 (bench/probe-grid.sh) for the full grid")
	}
	t.Cleanup(func() { labpath.CloseAll() })
	const bodyBytes = 150000
	for _, stack := range []string{"h1", "tls1.2", "tls1.3-h2"} {
		for _, rtt := range []int{20, 150} {
			for _, iw := range []int{1, 2, 3, 4, 10, 16, 32, 64} {
				t.Run(fmt.Sprintf("%s/rtt%d/iw%d", stack, rtt, iw), func(t *testing.T) {
					t.Parallel()
					cfg := labserver.Config{RTT: time.Duration(rtt) * time.Millisecond, IW: iw, Keys: labKeys}
					switch stack {
					case "tls1.2":
						cfg.TLSVersion = "1.2"
					case "tls1.3-h2":
						cfg.TLSVersion, cfg.HTTP2 = "1.3", true
					}
					s := startLab(t, cfg)
					res, err := probeLab(t, s, fmt.Sprintf("/bytes/%d", bodyBytes), nil)
					if err != nil {
						t.Fatalf("probe: %v", err)
					}
					c := res.Final(0)
					if c.InitialWindow != nil {
						t.Logf("GRID %s rtt=%d iw=%d verdict=%s segments=%d", stack, rtt, iw, c.InitialWindow.Verdict, c.InitialWindow.Segments)
					}
					checkVerdict(t, res, iw, bodyBytes)
				})
			}
		}
	}
}
