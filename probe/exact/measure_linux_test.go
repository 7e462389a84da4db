//go:build linux

package exact

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/slowstart/slowstart/internal/owner"
)

// gridEnv set to "full" runs the whole grid of bench/exact-grid.sh instead of
// the subset.
const gridEnv = "SLOWSTART_EXACT_GRID"

// protocolCase is one way of speaking to the server.
type protocolCase struct {
	tls   string
	http2 bool
}

var gridProtocols = []protocolCase{{}, {tls: "1.2"}, {tls: "1.3", http2: true}}

// gridSpecs is the grid: the full one when asked for, else a subset.
func gridSpecs(full bool) []labSpec {
	iws, rtts, servers := []int{1, 3, 10, 32, 64}, []int{20}, []bool{false}
	if full {
		iws, rtts, servers = []int{1, 2, 3, 4, 10, 16, 32, 64}, []int{20, 150}, []bool{false, true}
	}
	var specs []labSpec
	for _, nginx := range servers {
		for _, rtt := range rtts {
			for _, iw := range iws {
				for _, p := range gridProtocols {
					specs = append(specs, labSpec{iw: iw, rttMs: rtt, tls: p.tls, http2: p.http2, nginx: nginx, bodyBytes: 100000})
				}
			}
		}
	}
	return specs
}

// TestExactGrid: the exact measurement finds the route's initcwnd over HTTP,
// and over HTTPS from the TLS handshake flight, for every point of the grid.
func TestExactGrid(t *testing.T) {
	needRoot(t)
	full := os.Getenv(gridEnv) == "full"
	specs := gridSpecs(full)
	if !full {
		// IPv6 (the rules match the IPv6 header) and one nginx point in the
		// suite; the rest of nginx in the full grid.
		specs = append(specs,
			labSpec{iw: 10, rttMs: 20, ipv6: true, bodyBytes: 100000},
			labSpec{iw: 16, rttMs: 20, tls: "1.3", ipv6: true, bodyBytes: 100000},
			labSpec{iw: 10, rttMs: 20, tls: "1.3", http2: true, nginx: true, bodyBytes: 100000})
	}
	measured, right := 0, 0
	for _, spec := range specs {
		t.Run(spec.String(), func(t *testing.T) {
			if spec.nginx && !nginxInstalled() {
				t.Skip("nginx is not installed (apt-get install nginx)")
			}
			lt := startLab(t, spec)
			res := measureLab(t, lt, Options{URL: lt.url(spec.bodyBytes)})
			t.Logf("GRID %-28s verdict=%s iw=%d runs=%s", spec, res.Verdict, res.IWSegments, runOutcomes(res))
			measured++
			if res.Verdict == VerdictExact && res.IWSegments == spec.iw && res.Consistent {
				right++
			} else {
				t.Errorf("want exact %d segments, got %s %d: %s%s", spec.iw, res.Verdict, res.IWSegments, res.Reason, describeRuns(res))
			}
			wantPhase := PhaseHTTP
			if spec.tls != "" {
				wantPhase = PhaseTLS
			}
			if res.Phase != wantPhase {
				t.Errorf("phase %q, want %q", res.Phase, wantPhase)
			}
			for _, run := range res.Runs {
				if spec.tls != "" && run.TLSVersion != spec.tls {
					t.Errorf("run %d: TLS version %q, want %q", run.Index, run.TLSVersion, spec.tls)
				}
			}
		})
	}
	t.Logf("GRID SUMMARY: %d of %d points measured the true IW", right, measured)
}

// TestExactShortResponses: a response shorter than the window gives a lower
// bound, never a wrong window; one shorter than IW×1460 bytes but longer than
// IW segments of the small MSS still gives the window.
func TestExactShortResponses(t *testing.T) {
	cases := []struct {
		name        string
		spec        labSpec
		bodyBytes   int64
		wantVerdict string
		wantIW      int // for VerdictExact; for VerdictLowerBound, the bound must be below it
	}{
		{"short body over HTTP", labSpec{iw: 32, rttMs: 20}, 200, VerdictLowerBound, 32},
		{"short body over nginx", labSpec{iw: 32, rttMs: 20, nginx: true, bodyBytes: 200}, 200, VerdictLowerBound, 32},
		{"6000 bytes with IW 64", labSpec{iw: 64, rttMs: 20}, 6000, VerdictExact, 64},
		{"TLS flight shorter than IW 64 with a small chain", labSpec{iw: 64, rttMs: 20, tls: "1.3", chainBytes: 2000}, 0, VerdictLowerBound, 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.spec.nginx && !nginxInstalled() {
				t.Skip("nginx is not installed")
			}
			lt := startLab(t, tc.spec)
			res := measureLab(t, lt, Options{URL: lt.url(tc.bodyBytes)})
			if res.Verdict != tc.wantVerdict {
				t.Fatalf("verdict %s (%d segments), want %s: %s%s", res.Verdict, res.IWSegments, tc.wantVerdict, res.Reason, describeRuns(res))
			}
			switch tc.wantVerdict {
			case VerdictExact:
				if res.IWSegments != tc.wantIW {
					t.Errorf("IW %d, want %d%s", res.IWSegments, tc.wantIW, describeRuns(res))
				}
			case VerdictLowerBound:
				for _, run := range res.Runs {
					if run.Outcome != OutcomeTooShort || run.FlightBytes == 0 || run.Bytes != run.FlightBytes || run.Segments >= tc.wantIW {
						t.Errorf("run %d: want too_short with the whole flight counted, below %d segments%s", run.Index, tc.wantIW, describeRuns(res))
					}
				}
			}
		})
	}
}

// TestExactLoss: with random loss on the data path, every run either finds the
// true window or says why it cannot (loss, timeout): never a wrong success.
func TestExactLoss(t *testing.T) {
	cases := []struct {
		spec labSpec
		runs int
	}{
		{labSpec{iw: 10, rttMs: 20, lossRate: 0.01, seed: 1}, 20},
		{labSpec{iw: 10, rttMs: 20, tls: "1.3", lossRate: 0.01, seed: 2}, 20},
		// A heavier loss to see the loss outcome at all in a short test.
		{labSpec{iw: 32, rttMs: 20, lossRate: 0.05, seed: 3}, 20},
	}
	for _, tc := range cases {
		t.Run(tc.spec.String(), func(t *testing.T) {
			lt := startLab(t, tc.spec)
			res := measureLab(t, lt, Options{URL: lt.url(100000), Runs: tc.runs})
			t.Logf("verdict=%s iw=%d runs=%s", res.Verdict, res.IWSegments, runOutcomes(res))
			for _, run := range res.Runs {
				if run.Outcome == OutcomeSuccess && run.Segments != tc.spec.iw {
					t.Errorf("run %d: a wrong success: %d segments, true IW %d%s", run.Index, run.Segments, tc.spec.iw, describeRuns(res))
				}
			}
			if res.Verdict == VerdictExact && res.IWSegments != tc.spec.iw {
				t.Errorf("wrong exact verdict %d, true IW %d", res.IWSegments, tc.spec.iw)
			}
		})
	}
}

// TestExactAfterHandshake: measuring the HTTP response after a completed TLS
// handshake gives at least the initial window (the handshake's ACKs may have
// grown it), and says it is the response that was counted.
func TestExactAfterHandshake(t *testing.T) {
	lt := startLab(t, labSpec{iw: 4, rttMs: 20, tls: "1.3"})
	res := measureLab(t, lt, Options{URL: lt.url(100000), AfterHandshake: true})
	if res.Phase != PhaseHTTP || !res.AfterHandshake {
		t.Errorf("phase %q after_handshake %v, want http after the handshake", res.Phase, res.AfterHandshake)
	}
	if res.Verdict != VerdictExact || res.IWSegments < 4 {
		t.Fatalf("want an exact window of at least 4 segments, got %s %d: %s%s", res.Verdict, res.IWSegments, res.Reason, describeRuns(res))
	}
	t.Logf("window after the handshake: %d segments (IW 4)%s", res.IWSegments, describeRuns(res))
}

// TestExactCancel: a measurement cancelled mid-run leaves no table behind (the
// cleanup of startLab checks it) and returns the context's error.
func TestExactCancel(t *testing.T) {
	lt := startLab(t, labSpec{iw: 10, rttMs: 150})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// With a 150 ms path a run waits about 2 s for the retransmission: cancel
	// in the middle of the first run's wait.
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := Measure(ctx, Options{URL: lt.url(100000), Netns: lt.netns})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled measurement returned %v, want context.Canceled", err)
	}
}

// TestCleanRemovesStaleTables: Clean removes a table whose marker names a dead
// process, and keeps the table of a live process and a table that has the
// package's name but no marker.
func TestCleanRemovesStaleTables(t *testing.T) {
	lt := startLab(t, labSpec{iw: 10, rttMs: 1})
	conn, release, err := openNftables(lt.netns)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "300")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	liveStart, err := owner.StartTime(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := installFirewall(conn, owner.Process{PID: dead.Process.Pid, StartTime: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.remove()
	alive, err := installFirewall(conn, owner.Process{PID: live.Process.Pid, StartTime: liveStart})
	if err != nil {
		t.Fatal(err)
	}
	defer alive.remove()
	// A table named as the package names them, without the marker: not proven ours.
	unmarked := conn.AddTable(&nftables.Table{Name: tableName(1<<22 + 1), Family: nftables.TableFamilyINet})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	defer func() { conn.DelTable(unmarked); conn.Flush() }()

	removed, err := CleanNamespace(context.Background(), lt.netns)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale.table.Name {
		t.Fatalf("removed %v, want only %s", removed, stale.table.Name)
	}
	left, err := Tables(lt.netns)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	want := []string{alive.table.Name, unmarked.Name}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("tables left %v, want %v", left, want)
	}
}

func runOutcomes(res *Result) string {
	var parts []string
	for _, r := range res.Runs {
		parts = append(parts, r.Outcome)
	}
	return strings.Join(parts, ",")
}

func nginxInstalled() bool {
	_, err := exec.LookPath("nginx")
	return err == nil
}
