package lab

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/truthcheck"
)

var keepCaptures = flag.String("keep-captures", "", "copy the captures of TestGroundTruthSituations into this directory, with a labtruth.tsv naming them (see testdata/captures/README.md)")

// situation is one lab trial built to test a rule of the analysis where the
// real-world corpus has no instance: a HelloRetryRequest, an application's writes
// with and without Nagle's algorithm, a lost first SYN, BBR and Reno servers, large
// initial windows.
type situation struct {
	name   string
	spec   Spec
	expect string // truthcheck.Expect*
	// holes: also analyze copies of its captures with packets cut out.
	holes bool
}

func (s situation) truth() truthcheck.Truth {
	return truthcheck.Truth{IW: s.spec.IW, RTTMs: float64(s.spec.RTTNs) / 1e6, TLS: s.spec.TLS,
		HelloRetry: s.spec.HelloRetry, SYNsDropped: s.spec.DropSYNs, Expect: s.expect}
}

// proto names the protocol as testdata/captures/labtruth.tsv does.
func (s situation) proto() string {
	p := "h1"
	if s.spec.TLS != "" {
		p = "tls" + strings.ReplaceAll(s.spec.TLS, ".", "")
	}
	if s.spec.HTTP2 {
		p += "h2"
	}
	return p
}

func situations() []situation {
	const ms = int64(1e6)
	nginx := func(s Spec) Spec { s.Server, s.Client = ServerNginx, ClientCurl; return s }
	hrr := func(s Spec) Spec { s.HelloRetry = true; return s }
	var out []situation
	add := func(name string, spec Spec, expect string, holes bool) {
		if spec.InitRwnd == 0 {
			spec.InitRwnd = 300
		}
		out = append(out, situation{name: name, spec: spec, expect: expect, holes: holes})
	}
	// A HelloRetryRequest: the server accepts only P-256, the clients lead with an
	// X25519 key share. The built-in server sends it in two packets, which Linux lets
	// grow a window of 3 to 5 (a window under twice what is in flight grows in slow
	// start): its flight of 4 then fits, so IW 3 must not read "at least 4".
	tls13 := Spec{RTTNs: 40 * ms, TLS: "1.3", SizeBytes: 100_000}
	for _, iw := range []int{3, 10} {
		s := tls13
		s.IW = iw
		add(fmt.Sprintf("hrr-builtin-iw%d-tls13", iw), hrr(s), truthcheck.ExpectBound, false)
		add(fmt.Sprintf("builtin-iw%d-tls13", iw), s, truthcheck.ExpectBound, false)
	}
	s := tls13
	s.IW = 10
	add("hrr-nginx-iw10-tls13", nginx(hrr(s)), truthcheck.ExpectBound, false)
	add("nginx-iw10-tls13", nginx(s), truthcheck.ExpectBound, false)

	// Writes: the built-in server sends its header alone, then the body in chunks.
	// With a pause between chunks the application sends less than the window in a
	// round trip (the rate the pauses allow is below IW/RTT), so no reading may be
	// exact; without one the window cuts the rounds and any reading that holds the
	// truth is right.
	writes := func(rttMs int64, iw, chunk int, pauseMs int64, nagle bool) Spec {
		return Spec{RTTNs: rttMs * ms, IW: iw, SizeBytes: int64(4 * iw * 1448), WriteChunkBytes: chunk, WritePauseNs: pauseMs * ms, Nagle: nagle}
	}
	// Nagle holds the rest of each chunk while the header is unacknowledged and lets
	// it go with the header's acknowledgement, as the window would.
	add("writes-iw30-c1000-p1ms-nagle", writes(40, 30, 1000, 1, true), truthcheck.ExpectNotExact, false)
	// Each chunk ends in a short segment; the next may leave as an ACK arrives.
	add("writes-iw30-c5000-p10ms", writes(40, 30, 5000, 10, false), truthcheck.ExpectNotExact, false)
	// Two full segments every 3 ms: rounds of the same size, whose ends the ACK
	// clock takes for window cuts.
	add("writes-iw50-c2896-p3ms-nagle", writes(20, 50, 2896, 3, true), truthcheck.ExpectNotExact, false)
	// A chunk as large as the first round every round trip: the second round is
	// twice the first.
	add("writes-iw10-c7000-p20ms-nagle", writes(20, 10, 7000, 20, true), truthcheck.ExpectNotExact, false)
	add("writes-iw10-c3000", writes(40, 10, 3000, 0, false), truthcheck.ExpectBound, false)
	add("writes-iw10-c3000-nagle", writes(40, 10, 3000, 0, true), truthcheck.ExpectBound, false)

	// The client's first SYN dropped on the path: it sends it again after 1 s.
	add("synloss-iw10-h1", Spec{RTTNs: 40 * ms, IW: 10, SizeBytes: 100_000, DropSYNs: 1}, truthcheck.ExpectExact, false)
	add("synloss-iw10-tls13", Spec{RTTNs: 40 * ms, IW: 10, SizeBytes: 100_000, DropSYNs: 1, TLS: "1.3"}, truthcheck.ExpectBound, false)

	// BBR and Reno servers (nginx, curl). Over TLS, BBR grows its window during the
	// handshake: the first HTTP round reads a range.
	for _, cc := range []string{"bbr", "reno"} {
		for _, iw := range []int{10, 30} {
			h1 := Spec{RTTNs: 40 * ms, IW: iw, SizeBytes: 200_000, CC: cc}
			add(fmt.Sprintf("%s-iw%d-h1", cc, iw), nginx(h1), truthcheck.ExpectExact, cc == "bbr" && iw == 10)
			tls := h1
			tls.TLS, tls.HTTP2 = "1.3", true
			add(fmt.Sprintf("%s-iw%d-tls13h2", cc, iw), nginx(tls), truthcheck.ExpectRange, false)
		}
	}

	// A server that announces a smaller MSS than the client (route advmss 1400, as
	// some CDNs announce) still sends segments as large as the client's MSS allows
	// (1448 bytes): counted with the smaller option every segment was two, and IW 10
	// read "at least 20", IW 4 "at least 8", IW 25 over TLS 1.2 "41 to 48".
	for _, iw := range []int{4, 10} {
		add(fmt.Sprintf("advmss1400-iw%d-h1", iw), nginx(Spec{RTTNs: 40 * ms, IW: iw, SizeBytes: 100_000, ServerAdvMSS: 1400}), truthcheck.ExpectExact, false)
	}
	add("advmss1400-iw25-tls12", nginx(Spec{RTTNs: 40 * ms, IW: 25, SizeBytes: 100_000, TLS: "1.2", ServerAdvMSS: 1400}), truthcheck.ExpectRange, false)

	// Large initial windows (the built-in server, cubic).
	for _, rttMs := range []int64{20, 150} {
		for _, iw := range []int{50, 100} {
			add(fmt.Sprintf("rtt%d-iw%d-h1", rttMs, iw), Spec{RTTNs: rttMs * ms, IW: iw, SizeBytes: int64(5 * iw * 1448 / 2)},
				truthcheck.ExpectExact, rttMs == 20 && iw == 100 || rttMs == 150 && iw == 50)
		}
	}
	return out
}

// TestGroundTruthSituations: real Linux TCP in the lab, in situations the real-world
// corpus has no instance of, with the server's initial window known. Every reading
// holds the truth (the true IW exact, or a bound, range or ambiguous reading around
// it); a trial built so that its packets prove the window reads it exactly; one built
// to defeat a rule reads what that rule says (not exact, ambiguous, one more TLS
// round trip, a handshake RTT without the dropped SYN's timeout). The captures of the
// cleartext trials are also analyzed with packets cut out (capture loss).
func TestGroundTruthSituations(t *testing.T) {
	needRoot(t)
	meter := hoststeal.Start()
	sits := situations()
	jobs := make([]Job, len(sits))
	for i, s := range sits {
		jobs[i] = Job{Spec: s.spec, Trial: 1, Name: s.name}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := NewEnv()
	// Four at a time: nginx, TLS and the emulators of eight trials at once stall one
	// another's handshakes on two busy cores.
	rows, err := env.RunJobs(ctx, jobs, RunOptions{Parallel: 4, CaptureDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// A trial that only the host's timing upset is run again, at most twice; a wrong
	// answer is never retried.
	for attempt := 2; attempt <= 3; attempt++ {
		var retry []int
		for i, row := range rows {
			if wrong, timing := checkSituation(ctx, t.TempDir(), sits[i], row); len(wrong) == 0 && len(timing) > 0 {
				retry = append(retry, i)
			}
		}
		if len(retry) == 0 {
			break
		}
		var again []Job
		for _, i := range retry {
			t.Logf("%s: upset by the host's timing; trial %d", sits[i].name, attempt)
			again = append(again, Job{Spec: sits[i].spec, Trial: attempt, Name: sits[i].name})
		}
		retried, err := env.RunJobs(ctx, again, RunOptions{Parallel: 4, CaptureDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range retry {
			rows[i] = retried[k]
		}
	}
	steal := meter.Read()
	var notCheckable int
	for i, row := range rows {
		s := sits[i]
		t.Run(s.name, func(t *testing.T) {
			wrong, timing := checkSituation(ctx, t.TempDir(), s, row)
			for _, problem := range wrong {
				t.Error(problem)
			}
			notCheckable += steal.Check(t, timing)
		})
	}
	if *keepCaptures != "" {
		if err := keepSituationCaptures(*keepCaptures, sits, rows); err != nil {
			t.Error(err)
		}
	}
	steal.SkipIfNotCheckable(t, notCheckable)
}

// checkSituation lists what is wrong with a trial (wrong whatever the host did) and
// what a busy host can cause (timing).
func checkSituation(ctx context.Context, scratch string, s situation, row Row) (wrong, timing []string) {
	if row.Error != "" {
		return []string{"trial failed: " + row.Error}, nil
	}
	if row.Bytes != s.spec.SizeBytes {
		wrong = append(wrong, fmt.Sprintf("received %d bytes, want %d", row.Bytes, s.spec.SizeBytes))
	}
	truth := s.truth()
	for _, side := range []struct{ vantage, path string }{{"client", row.ClientPcap}, {"server", row.ServerPcap}} {
		w, tm := truthcheck.CheckFile(ctx, side.path, side.vantage, truth)
		wrong, timing = append(wrong, w...), append(timing, tm...)
		if s.spec.DropSYNs > 0 {
			// The situation itself, counted in the packets: the client sent its SYN
			// once more than the path dropped, and the server saw one.
			ps, err := truthcheck.Packets(side.path)
			want := 1
			if side.vantage == "client" {
				want += s.spec.DropSYNs
			}
			if err != nil {
				wrong = append(wrong, err.Error())
			} else if got := truthcheck.ClientSYNs(ps); got != want {
				wrong = append(wrong, fmt.Sprintf("%s capture: %d SYNs, want %d (the path was to drop %d)", side.vantage, got, want, s.spec.DropSYNs))
			}
		}
		if s.holes {
			w, tm := truthcheck.CheckHoles(ctx, scratch, side.path, side.vantage, truth)
			wrong, timing = append(wrong, w...), append(timing, tm...)
		}
	}
	return wrong, timing
}

// keepSituationCaptures copies each situation's captures into dir as NAME.client.pcap
// and NAME.server.pcap, with labtruth.tsv listing them.
func keepSituationCaptures(dir string, sits []situation, rows []Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tsv strings.Builder
	tsv.WriteString(labTruthHeader + "\n")
	for i, s := range sits {
		if rows[i].Error != "" {
			continue
		}
		if err := rows[i].KeepCaptures(dir, s.name); err != nil {
			return err
		}
		b := func(v bool) int {
			if v {
				return 1
			}
			return 0
		}
		sp := s.spec
		if err := sp.Normalize(); err != nil {
			return err
		}
		fmt.Fprintf(&tsv, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n",
			s.name, sp.RTTNs/1e6, sp.IW, sp.CC, sp.Server, sp.Client, s.proto(), sp.SizeBytes, b(sp.HelloRetry), sp.DropSYNs,
			sp.WriteChunkBytes, sp.WritePauseNs/1e6, b(sp.Nagle), sp.InitRwnd, s.expect, b(s.holes), sp.ServerAdvMSS)
	}
	return os.WriteFile(filepath.Join(dir, "labtruth.tsv"), []byte(tsv.String()), 0o644)
}

// labTruthHeader is the header of testdata/captures/labtruth.tsv.
const labTruthHeader = "name\trtt_ms\tiw\tcc\tserver\tclient\tproto\tbytes\thello_retry\tsyns_dropped\twrite_chunk\twrite_pause_ms\tnagle\tinitrwnd\texpect\tholes\tserver_advmss"
