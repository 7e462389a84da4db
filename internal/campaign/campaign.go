// Package campaign checks the initial-window readings against the truth at scale.
// It draws lab trials from the space real servers' TCP stacks occupy (the MSS each
// end announces, the path's MTU, IPv6, initial windows of 1 to 100, CUBIC, Reno
// and BBR, timestamps, SACK and delayed ACKs on and off, the server's write
// pattern and Nagle, HTTP/1.1 and HTTP/2, TLS 1.2 and 1.3 with chains of every
// size, a HelloRetryRequest, loss, reordering, a bottleneck, a small receive
// window, a sender that is not Linux), runs each with the server kernel's own
// congestion window recorded (lab.Spec.KernelTruth: tcp:tcp_probe), reads both
// ends' captures with package analysis, and tallies every reading against the
// kernel's window: an exact reading must be it, a lower bound at most it, a range
// must hold it.
//
// A trial is reproduced by its seed and index (Draw). A trial with a wrong
// reading keeps its captures. The suite runs a fixed sample; bench/truth runs the
// thousands.
//
// It is a tool of the tests and the benches: it needs root, and it runs real
// servers and clients.
package campaign

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/truthcheck"
	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/report"
)

const ms = int64(1e6)

// Draw returns trial index of the campaign seeded with seed: the same seed and
// index give the same trial.
func Draw(seed uint64, index int) lab.Spec {
	r := rand.New(rand.NewPCG(seed, uint64(index)))
	chance := func(p float64) bool { return r.Float64() < p }
	between := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	logBetween := func(lo, hi float64) float64 { return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))) }

	s := lab.Spec{InitRwnd: 300, KernelTruth: true, Seed: uint64(index)}
	switch x := r.Float64(); {
	case x < 0.40:
		s.Server = lab.ServerBuiltin
	case x < 0.80:
		s.Server = lab.ServerNginx
	case x < 0.90:
		s.Server = lab.ServerNetstack
	default:
		s.Server = lab.ServerCaddy
	}
	s.Client = lab.ClientBuiltin
	if chance(0.5) || s.Server == lab.ServerCaddy {
		s.Client = lab.ClientCurl
	}
	switch x := r.Float64(); {
	case x < 0.15:
		s.IW = between(1, 4)
	case x < 0.55:
		s.IW = between(5, 16)
	case x < 0.85:
		s.IW = between(17, 50)
	default:
		s.IW = between(51, 100)
	}
	s.RTTNs = int64(logBetween(10, 200) * float64(ms))
	switch x := r.Float64(); {
	case x < 0.45:
		s.CC = "cubic"
	case x < 0.65:
		s.CC = "reno"
	default:
		s.CC = "bbr"
	}
	switch x := r.Float64(); {
	case x < 0.40 && s.Server != lab.ServerCaddy:
	case x < 0.65:
		s.TLS = "1.2"
	default:
		s.TLS = "1.3"
	}
	if s.TLS != "" {
		s.HTTP2 = chance(0.5)
		s.ChainBytes = int(logBetween(1500, 16000))
		s.HelloRetry = s.TLS == "1.3" && s.Server != lab.ServerCaddy && s.Server != lab.ServerNetstack && chance(0.06)
	}
	s.SizeBytes = int64(logBetween(2000, 400_000))
	if chance(0.3) {
		s.ServerAdvMSS = between(1220, 1440)
	}
	if chance(0.15) {
		s.ClientAdvMSS = between(1220, 1440)
	}
	if chance(0.1) {
		s.MTU = between(1280, 1500)
	}
	s.IPv6 = chance(0.2)
	s.NoTimestamps = chance(0.2)
	s.NoSACK = chance(0.15)
	s.ClientQuickAck = chance(0.2)
	if (s.Server == lab.ServerBuiltin || s.Server == lab.ServerNetstack) && chance(0.25) {
		s.WriteChunkBytes = int(logBetween(300, 20000))
		if chance(0.6) {
			s.WritePauseNs = int64(r.Float64() * 30 * float64(ms))
		}
		s.Nagle = chance(0.5)
	}
	if chance(0.05) && s.Server != lab.ServerCaddy {
		s.ThinkAfterBytes = int64(between(0, int(s.SizeBytes/2)))
		s.ThinkNs = int64(between(5, 100)) * ms
	}
	if chance(0.1) {
		s.LossRate = logBetween(0.005, 0.05)
	}
	if chance(0.1) {
		s.JitterNs = int64(r.Float64() * float64(min(s.RTTNs/4, 3*ms)))
		s.Reorder = true
	}
	if chance(0.15) {
		s.RateBitsPerSecond = int64(logBetween(2e6, 50e6))
	}
	if chance(0.1) {
		s.InitRwnd = between(2, 20)
	}
	if chance(0.03) {
		s.DropSYNs = 1
	}
	if chance(0.08) {
		// A TCP-terminating proxy at the server's end (a CDN edge, a load balancer):
		// the client's truth is the proxy's window, its sending paced by upstream.
		s.ProxyUpstreamRTTNs = int64(logBetween(2, 60) * float64(ms))
	}
	if s.Server == lab.ServerNetstack {
		s.IW = 0 // the stack's fixed window
		if s.CC == "bbr" {
			s.CC = "cubic"
		}
		s.HelloRetry = false
	}
	return s
}

// Name names a trial (and its captures): the campaign's seed and the trial's index.
func Name(seed uint64, index int) string { return fmt.Sprintf("truth-s%d-t%d", seed, index) }

// Options say what a campaign runs.
type Options struct {
	Seed uint64
	// First and Trials: the trials run are First .. First+Trials-1.
	First, Trials int
	// Parallel trials at once (default 4).
	Parallel int
	// KeepDir receives the captures of every trial with a wrong reading (NAME.client.pcap,
	// NAME.server.pcap) and a JSON line of its spec and readings; "" keeps none.
	KeepDir string
	// Progress, when set, is called as each trial ends.
	Progress func(r Result)
}

// Reading is one initial-window reading of a trial: the connection's, or its TLS
// flight's, from one end's capture.
type Reading struct {
	Vantage     string   `json:"vantage"`
	Source      string   `json:"source"` // "connection" or "tls_flight"
	Verdict     string   `json:"verdict"`
	Segments    int      `json:"segments"`
	SegmentsMax int      `json:"segments_max,omitempty"`
	Unproven    []string `json:"unproven,omitempty"`
	Reason      string   `json:"reason"`
	// Wrong says how the reading leaves out the truth ("" when it holds it).
	Wrong string `json:"wrong,omitempty"`
}

// Result is one trial: what it was, the truth, and what the readings said.
type Result struct {
	Index int      `json:"index"`
	Name  string   `json:"name"`
	Spec  lab.Spec `json:"spec"`
	// TruthIW is the server's initial window in segments: the kernel's snd_cwnd at
	// the connection's first tcp_probe event, or the netstack server's window when
	// it sent its first data (its own TCP probe).
	TruthIW     int    `json:"truth_iw"`
	TruthSource string `json:"truth_source"`
	// Kernel is the server kernel's record of the trial's connections.
	Kernel   []lab.KernelConn `json:"kernel,omitempty"`
	Readings []Reading        `json:"readings"`
	// Error: the trial did not run through (nothing was judged).
	Error string `json:"error,omitempty"`
	// Reruns counts the runs again of a trial the host distorted (the lab's
	// PathCheck: its handshake or the emulator's schedule strayed from the
	// path drawn); Distorted says what distorted it when every run was. Its
	// readings are judged all the same, and a wrong one is told apart: its
	// packets show a path that was not drawn (a 20 ms stall of the emulator
	// after a first segment looks, from the client, like IW 1).
	Reruns    int    `json:"reruns,omitempty"`
	Distorted string `json:"distorted,omitempty"`
}

// Wrong reports whether a reading of the trial left out the truth.
func (r Result) Wrong() bool {
	for _, x := range r.Readings {
		if x.Wrong != "" {
			return true
		}
	}
	return false
}

// Tally counts a campaign's readings.
type Tally struct {
	Trials, Failed int
	// Rerun counts the trials run again because the host distorted them;
	// Distorted those still distorted after the reruns (judged all the same);
	// WrongDistorted the wrong readings of those, which Wrong counts too.
	Rerun, Distorted, WrongDistorted int
	// Readings counts every reading judged; the rest split them by verdict and
	// whether they held the truth.
	Readings                        int
	ExactRight, ExactWrong          int
	RangeHolds, RangeWrong          int
	BoundHolds, BoundWrong          int // lower_bound and rwnd_limited
	Ambiguous, None                 int
	WrongTrials                     []string
	ExactByServer, ReadingsByServer map[string]int
	UnprovenCounts                  map[string]int
}

// Wrong counts the readings that left out the truth.
func (t *Tally) Wrong() int { return t.ExactWrong + t.RangeWrong + t.BoundWrong }

func (t *Tally) add(r Result) {
	t.Trials++
	if r.Reruns > 0 {
		t.Rerun++
	}
	if r.Error != "" {
		t.Failed++
		return
	}
	if r.Distorted != "" {
		t.Distorted++
	}
	if t.ExactByServer == nil {
		t.ExactByServer, t.ReadingsByServer, t.UnprovenCounts = map[string]int{}, map[string]int{}, map[string]int{}
	}
	for _, x := range r.Readings {
		t.Readings++
		if x.Source == "connection" {
			t.ReadingsByServer[r.Spec.Server]++
			if x.Verdict == report.VerdictExact {
				t.ExactByServer[r.Spec.Server]++
			}
			if len(x.Unproven) > 0 {
				t.UnprovenCounts[x.Unproven[0]]++
			}
		}
		wrong := x.Wrong != ""
		if wrong && r.Distorted != "" {
			t.WrongDistorted++
		}
		switch x.Verdict {
		case report.VerdictExact:
			count(&t.ExactRight, &t.ExactWrong, wrong)
		case report.VerdictRange:
			count(&t.RangeHolds, &t.RangeWrong, wrong)
		case report.VerdictLowerBound, report.VerdictRwndLimited:
			count(&t.BoundHolds, &t.BoundWrong, wrong)
		case report.VerdictAmbiguous:
			t.Ambiguous++
		default:
			t.None++
		}
	}
	if r.Wrong() {
		name := r.Name
		if r.Distorted != "" {
			name += " (on a path the host distorted: " + r.Distorted + ")"
		}
		t.WrongTrials = append(t.WrongTrials, name)
	}
}

func count(right, wrong *int, isWrong bool) {
	if isWrong {
		*wrong++
	} else {
		*right++
	}
}

// Write prints the tally.
func (t *Tally) Write(w io.Writer) {
	fmt.Fprintf(w, "%d trials (%d did not run through; %d run again because the host distorted their path, %d distorted still), %d readings from both ends:\n",
		t.Trials, t.Failed, t.Rerun, t.Distorted, t.Readings)
	fmt.Fprintf(w, "  exact:        %5d right, %d wrong\n", t.ExactRight, t.ExactWrong)
	fmt.Fprintf(w, "  range:        %5d hold the truth, %d do not\n", t.RangeHolds, t.RangeWrong)
	fmt.Fprintf(w, "  lower bound:  %5d hold the truth, %d do not\n", t.BoundHolds, t.BoundWrong)
	fmt.Fprintf(w, "  ambiguous:    %5d\n  none:         %5d\n", t.Ambiguous, t.None)
	fmt.Fprintf(w, "  wrong:        %5d (%d of them on a path the host distorted)\n", t.Wrong(), t.WrongDistorted)
	var servers []string
	for s := range t.ReadingsByServer {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		fmt.Fprintf(w, "  %-9s exact in %d of %d connection readings\n", s+":", t.ExactByServer[s], t.ReadingsByServer[s])
	}
	var names []string
	for n := range t.UnprovenCounts {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return t.UnprovenCounts[names[i]] > t.UnprovenCounts[names[j]] })
	for _, n := range names {
		fmt.Fprintf(w, "  not exact for want of %-20s %d\n", n+":", t.UnprovenCounts[n])
	}
	for _, n := range t.WrongTrials {
		fmt.Fprintf(w, "  WRONG: %s\n", n)
	}
}

// Run runs the campaign's trials and judges them.
func Run(ctx context.Context, opts Options) (Tally, []Result, error) {
	var tally Tally
	par := opts.Parallel
	if par <= 0 {
		par = 4
	}
	scratch, err := os.MkdirTemp("", "slowstart-campaign-")
	if err != nil {
		return tally, nil, err
	}
	defer os.RemoveAll(scratch)
	jobs := make([]lab.Job, 0, opts.Trials)
	for i := opts.First; i < opts.First+opts.Trials; i++ {
		jobs = append(jobs, lab.Job{Spec: Draw(opts.Seed, i), Trial: 1, Name: Name(opts.Seed, i)})
	}
	results := make([]Result, len(jobs))
	indexOf := make(map[string]int, len(jobs))
	for i, j := range jobs {
		indexOf[j.Name] = opts.First + i
	}
	var mu sync.Mutex
	env := lab.NewEnv()
	_, err = env.RunJobs(ctx, jobs, lab.RunOptions{Parallel: par, CaptureDir: scratch, DistortedReruns: lab.DefaultDistortedReruns, OnResult: func(j lab.Job, row lab.Row, _ error) {
		index := indexOf[j.Name]
		res := judge(ctx, index, j, row)
		if res.Wrong() && opts.KeepDir != "" {
			keep(opts.KeepDir, res, row)
		}
		// Each trial's captures go as soon as it is judged: a long campaign keeps
		// no more than the ones running.
		os.Remove(row.ClientPcap)
		os.Remove(row.ServerPcap)
		mu.Lock()
		results[index-opts.First] = res
		mu.Unlock()
		if opts.Progress != nil {
			opts.Progress(res)
		}
	}})
	for _, r := range results {
		if r.Name != "" {
			tally.add(r)
		}
	}
	return tally, results, err
}

// judge reads a trial's captures and judges each reading against the truth.
func judge(ctx context.Context, index int, j lab.Job, row lab.Row) Result {
	res := Result{Index: index, Name: j.Name, Spec: j.Spec, Reruns: row.Reruns}
	if row.Error != "" {
		res.Error = row.Error
		return res
	}
	if row.Excluded {
		res.Distorted = row.DistortedBy
	}
	spec := j.Spec
	if err := spec.Normalize(); err != nil {
		res.Error = err.Error()
		return res
	}
	res.Kernel = row.Kernel
	byClient := map[string]lab.KernelConn{}
	for _, k := range row.Kernel {
		byClient[k.Client] = k
	}
	// The client's capture once more as a capture above the receiver's GRO shows it:
	// back-to-back segments merged into frames of many segments each.
	gro := row.ClientPcap + ".gro"
	if err := mergeGRO(row.ClientPcap, gro); err != nil {
		res.Error = fmt.Sprintf("merging the client capture as GRO would: %v", err)
		return res
	}
	defer os.Remove(gro)
	// And the server's as a capture above the sender's TSO shows it: what the
	// server wrote in one burst handed to the capture as one frame.
	tso := row.ServerPcap + ".tso"
	if err := mergeGRO(row.ServerPcap, tso); err != nil {
		res.Error = fmt.Sprintf("merging the server capture as TSO would: %v", err)
		return res
	}
	defer os.Remove(tso)
	for _, side := range []struct{ vantage, path string }{{report.VantageClient, row.ClientPcap}, {report.VantageServer, row.ServerPcap}, {vantageClientGRO, gro}, {vantageServerTSO, tso}} {
		rep, err := analysis.File(ctx, side.path, analysis.Options{})
		if err != nil {
			res.Error = fmt.Sprintf("%s capture: %v", side.vantage, err)
			return res
		}
		for i := range rep.Connections {
			c := &rep.Connections[i]
			if c.BytesToClient == 0 {
				continue
			}
			k, ok := byClient[canonical(c.Client)]
			if !ok || k.InitialWindow == 0 {
				res.Error = fmt.Sprintf("%s capture: the server's stack has no record of connection %s", side.vantage, c.Client)
				return res
			}
			truth, source := k.InitialWindow, "kernel"
			switch {
			case spec.ProxyUpstreamRTTNs > 0:
				source = "proxy's kernel"
			case spec.Server == lab.ServerNetstack:
				source = "netstack" // its own TCP probe
			}
			res.TruthIW, res.TruthSource = truth, source
			res.Readings = append(res.Readings, reading(side.vantage, "connection", c.InitialWindow, truth))
			if c.TLS != nil && c.TLS.InitialWindow != nil {
				res.Readings = append(res.Readings, reading(side.vantage, "tls_flight", c.TLS.InitialWindow, truth))
			}
		}
	}
	if len(res.Readings) == 0 {
		res.Error = "no connection with server data in the captures"
	}
	return res
}

// vantageClientGRO names the readings of the client's capture merged as GRO would.
const vantageClientGRO = "client_gro"

// vantageServerTSO names the readings of the server's capture merged as the
// sender's TSO (or GSO) would hand its bursts to a capture on the server.
const vantageServerTSO = "server_tso"

// canonical writes an address as the kernel record does.
func canonical(s string) string {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return s
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

func reading(vantage, source string, iw *report.InitialWindow, truth int) Reading {
	if iw == nil {
		return Reading{Vantage: vantage, Source: source, Verdict: report.VerdictNone}
	}
	return Reading{Vantage: vantage, Source: source, Verdict: iw.Verdict, Segments: iw.Segments, SegmentsMax: iw.SegmentsMax,
		Unproven: iw.Unproven, Reason: iw.Reason, Wrong: truthcheck.Contradicts(iw, truth)}
}

// keep copies a wrong trial's captures into dir with a JSON line of what it was.
func keep(dir string, res Result, row lab.Row) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = row.KeepCaptures(dir, res.Name) // what could be copied is; the line below says what the trial was
	f, err := os.OpenFile(filepath.Join(dir, "wrong.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, jsonLine(res))
}

func jsonLine(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("{\"error\": %q}", err.Error())
	}
	return string(b)
}
