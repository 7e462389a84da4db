// Command survey-bench surveys an emulated fleet of servers with known initial
// windows (package survey/surveylab) with the slowstart binary, the way a user
// would: a list of addresses × paths, `slowstart survey --netns VANTAGE --store
// STORE`, killed at random moments and resumed, then the same list again in
// shards run as separate processes and merged. It prints targets per minute,
// peak RSS and CPU of the survey processes, and checks that every target has
// exactly one row, that the sharded-and-merged store holds the same rows as
// the whole one, and that every reading equals the server's configured window
// (or is a lower bound below it, with its reason). It exits 1 when a check
// fails. Run by hand, as root (bench/survey-scale.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/survey"
	"github.com/slowstart/slowstart/survey/surveylab"
)

// pathKinds are the URLs of one address, in turn: server, scheme and size.
// The short ones (200 bytes) are answered inside the window, so that the
// survey's retries (a long path, the smallest MSS) and lower bounds show.
var pathKinds = []struct {
	port int
	tls  bool
	size int64
}{
	{surveylab.BuiltinHTTPPort, false, 20000},
	{surveylab.NginxHTTPPort, false, 30000},
	{surveylab.BuiltinTLSPort, true, 10000},
	{surveylab.NginxTLSPort, true, 20000},
	{surveylab.BuiltinHTTPPort, false, 60000},
	{surveylab.NginxHTTPPort, false, 200},
	{surveylab.BuiltinHTTPPort, false, 8000},
	{surveylab.NginxHTTPPort, false, 100000},
	{surveylab.BuiltinHTTPPort, false, 200},
	{surveylab.NginxHTTPPort, false, 12000},
}

func main() {
	var (
		binary      = flag.String("bin", "", "the slowstart binary (required)")
		workDir     = flag.String("work", "", "directory for the list and the stores (required)")
		addresses   = flag.Int("addresses", 2000, "server addresses")
		paths       = flag.Int("paths", 50, "URLs per address")
		concurrency = flag.Int("concurrency", 256, "survey --parallel")
		pageLoads   = flag.Int("page-loads", 0, "survey --parallel-page-loads (0: its default)")
		exactRuns   = flag.Int("exact-runs", 2, "survey --exact-runs")
		kills       = flag.Int("kills", 5, "kill the whole survey this many times at random moments, resuming each time")
		shards      = flag.Int("shards", 4, "then survey the first --shard-targets targets in this many shards (0: skip)")
		shardN      = flag.Int("shard-targets", 5000, "targets of the sharded comparison")
		pause       = flag.Duration("pause", 200*time.Millisecond, "survey --pause")
		seed        = flag.Uint64("seed", 1, "seed of the kill moments")
		hold        = flag.Bool("hold", false, "only start the fleet, write the list, and keep them until Ctrl-C (for surveys by hand)")
	)
	flag.Parse()
	if *binary == "" || *workDir == "" {
		fmt.Fprintln(os.Stderr, "usage: survey-bench -bin SLOWSTART -work DIR [flags]")
		os.Exit(2)
	}
	ctx, stop := netlab.HandleSignals(context.Background())
	defer stop()
	ok, err := run(ctx, config{binary: *binary, work: *workDir, addresses: *addresses, paths: *paths, concurrency: *concurrency,
		pageLoads: *pageLoads, exactRuns: *exactRuns, kills: *kills, shards: *shards, shardTargets: *shardN, pause: *pause, seed: *seed,
		hold: *hold})
	if closeErr := netlab.CloseAll(); closeErr != nil {
		fmt.Fprintln(os.Stderr, "closing the fleet:", closeErr)
		ok = false
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "survey-bench:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Println("RESULT: a check failed")
		os.Exit(1)
	}
	fmt.Println("RESULT: every check passed")
}

type config struct {
	binary, work                             string
	addresses, paths, concurrency, pageLoads int
	exactRuns, kills, shards, shardTargets   int
	pause                                    time.Duration
	seed                                     uint64
	hold                                     bool
}

func run(ctx context.Context, c config) (bool, error) {
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return false, err
	}
	// Four paths of different round-trip times, five initial windows per path.
	rtts := []time.Duration{10 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond}
	iws := [][]int{{10, 3, 32, 4, 16}, {16, 10, 2, 48, 4}, {4, 32, 10, 3, 64}, {32, 4, 16, 10, 2}}
	var groups []surveylab.Group
	for i, rtt := range rtts {
		n := c.addresses / len(rtts)
		if i < c.addresses%len(rtts) {
			n++
		}
		groups = append(groups, surveylab.Group{RTT: rtt, Addresses: n, IWs: iws[i], Nginx: true})
	}
	sizes := []int64{}
	for _, k := range pathKinds {
		sizes = append(sizes, k.size)
	}
	start := time.Now()
	fleet, err := surveylab.Start(ctx, surveylab.Options{Groups: groups, NginxBodySizes: sizes})
	if err != nil {
		return false, err
	}
	defer fleet.Close()
	fmt.Printf("fleet: %d addresses in %d groups (RTT %v), up in %.1f s; vantage %s\n", len(fleet.Servers), len(groups), rtts,
		time.Since(start).Seconds(), fleet.Vantage)

	// The list: path by path, so that neighbouring lines are on different addresses.
	truth := map[string]surveylab.Server{}
	var lines []string
	for p := range c.paths {
		kind := pathKinds[p%len(pathKinds)]
		for _, s := range fleet.Servers {
			scheme := "http"
			if kind.tls {
				scheme = "https"
			}
			u := fmt.Sprintf("%s://%s/bytes/%d?p=%d", scheme, netip.AddrPortFrom(s.Addr, uint16(kind.port)), kind.size, p)
			truth[u] = s
			lines = append(lines, fmt.Sprintf("g%d-rtt%dms-iw%d %s", s.Group, s.RTT.Milliseconds(), s.IW, u))
		}
	}
	listPath := filepath.Join(c.work, "list.txt")
	if err := os.WriteFile(listPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return false, err
	}
	fmt.Printf("list: %d targets (%d addresses × %d paths) in %s\n", len(lines), len(fleet.Servers), c.paths, listPath)

	if c.hold {
		fmt.Printf("holding the fleet: survey it with --netns %s; Ctrl-C ends\n", fleet.Vantage)
		<-ctx.Done()
		return true, nil
	}
	ok := true
	args := func(list, store string, extra ...string) []string {
		a := []string{"survey", list, "--netns", fleet.Vantage, "--store", store, "-k", "--parallel", strconv.Itoa(c.concurrency),
			"--exact-runs", strconv.Itoa(c.exactRuns), "--pause", c.pause.String(), "--timeout", "10s"}
		if c.pageLoads > 0 {
			a = append(a, "--parallel-page-loads", strconv.Itoa(c.pageLoads))
		}
		return append(a, extra...)
	}

	// The whole list, killed c.kills times at random moments, resumed each time.
	store := filepath.Join(c.work, "all.db")
	os.Remove(store)
	rng := rand.New(rand.NewPCG(c.seed, 2))
	var total usage
	for attempt := 0; ; attempt++ {
		var killAfter time.Duration
		if attempt < c.kills {
			// Somewhere in the next stretch: a few seconds to a few minutes.
			killAfter = time.Duration(5+rng.IntN(60)) * time.Second
		}
		u, err := runSurvey(ctx, c.binary, args(listPath, store), killAfter, filepath.Join(c.work, fmt.Sprintf("run%d.log", attempt)))
		if err != nil {
			return false, err
		}
		total.add(u)
		rows := countRows(store)
		fmt.Printf("run %d: %s after %.1f s, %d rows so far; peak RSS %.0f MB, CPU %.1f s\n", attempt+1, u.ended, u.wall.Seconds(),
			rows, float64(u.maxRSSKB)/1024, u.cpu.Seconds())
		if !u.killed {
			break
		}
		if attempt > c.kills+3 {
			return false, fmt.Errorf("the survey did not finish")
		}
	}
	measured := countRows(store)
	fmt.Printf("\nwhole list: %d targets in %.1f s of survey (%d processes): %.0f targets/min; peak RSS %.0f MB; CPU %.1f s (%.0f%% of one core)\n",
		measured, total.wall.Seconds(), total.runs, float64(measured)/total.wall.Minutes(), float64(total.maxRSSKB)/1024,
		total.cpu.Seconds(), 100*total.cpu.Seconds()/total.wall.Seconds())
	if total.maxRSSKB > 300*1024 {
		fmt.Printf("FAIL: peak RSS %.0f MB above 300 MB\n", float64(total.maxRSSKB)/1024)
		ok = false
	}
	ok = checkRows(store, truth, len(lines)) && ok
	ok = checkNoTable(fleet.Vantage) && ok

	if c.shards > 1 {
		n := min(c.shardTargets, len(lines))
		sample := filepath.Join(c.work, "sample.txt")
		if err := os.WriteFile(sample, []byte(strings.Join(lines[:n], "\n")+"\n"), 0o644); err != nil {
			return false, err
		}
		whole := filepath.Join(c.work, "sample-whole.db")
		os.Remove(whole)
		u, err := runSurvey(ctx, c.binary, args(sample, whole), 0, filepath.Join(c.work, "sample-whole.log"))
		if err != nil {
			return false, err
		}
		fmt.Printf("\nsample of %d targets, unsharded: %.1f s, %.0f targets/min, peak RSS %.0f MB\n", n, u.wall.Seconds(),
			float64(n)/u.wall.Minutes(), float64(u.maxRSSKB)/1024)
		var wg sync.WaitGroup
		stores := make([]string, c.shards)
		usages := make([]usage, c.shards)
		errs := make([]error, c.shards)
		shardStart := time.Now()
		for i := range c.shards {
			stores[i] = filepath.Join(c.work, fmt.Sprintf("shard-%d.db", i))
			os.Remove(stores[i])
			wg.Go(func() {
				a := args(sample, stores[i], "--shard", fmt.Sprintf("%d/%d", i, c.shards), "--parallel", strconv.Itoa(max(1, c.concurrency/c.shards)))
				usages[i], errs[i] = runSurvey(ctx, c.binary, a, 0, filepath.Join(c.work, fmt.Sprintf("shard-%d.log", i)))
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return false, err
			}
		}
		fmt.Printf("%d shards as %d processes: %.1f s\n", c.shards, c.shards, time.Since(shardStart).Seconds())
		merged := filepath.Join(c.work, "sample-merged.db")
		os.Remove(merged)
		out, err := exec.Command(c.binary, append([]string{"survey", "merge", "--store", merged}, stores...)...).CombinedOutput()
		fmt.Printf("merge: %s", out)
		if err != nil {
			return false, fmt.Errorf("survey merge: %w", err)
		}
		ok = compareStores(whole, merged) && ok
		ok = checkRows(merged, truth, n) && ok
	}
	return ok, nil
}

// usage is what survey processes used.
type usage struct {
	wall     time.Duration
	cpu      time.Duration
	maxRSSKB int64
	runs     int
	killed   bool
	ended    string
}

func (u *usage) add(o usage) {
	u.wall += o.wall
	u.cpu += o.cpu
	u.maxRSSKB = max(u.maxRSSKB, o.maxRSSKB)
	u.runs++
}

// runSurvey runs slowstart; with killAfter > 0 it kills it (SIGKILL) then, if
// it is still running.
func runSurvey(ctx context.Context, binary string, args []string, killAfter time.Duration, logPath string) (usage, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return usage{}, err
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return usage{}, err
	}
	done := make(chan struct{})
	killed := false
	var mu sync.Mutex
	go func() {
		var timer <-chan time.Time
		if killAfter > 0 {
			timer = time.After(killAfter)
		}
		interrupt := make(chan os.Signal, 1)
		signal.Notify(interrupt, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(interrupt)
		select {
		case <-timer:
			mu.Lock()
			killed = true
			mu.Unlock()
			cmd.Process.Kill()
		case <-ctx.Done():
			cmd.Process.Signal(os.Interrupt)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	u := usage{wall: time.Since(start), runs: 1}
	if st := cmd.ProcessState; st != nil {
		u.cpu = st.UserTime() + st.SystemTime()
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			u.maxRSSKB = ru.Maxrss
		}
	}
	mu.Lock()
	u.killed = killed
	mu.Unlock()
	switch {
	case u.killed:
		u.ended = "killed (SIGKILL)"
	case err == nil:
		u.ended = "finished"
	default:
		u.ended = "exited: " + err.Error()
		if ctx.Err() != nil {
			return u, ctx.Err()
		}
		if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != 1 {
			tail, _ := os.ReadFile(logPath)
			return u, fmt.Errorf("slowstart %s: %v\n%s", strings.Join(args, " "), err, lastLines(string(tail), 15))
		}
	}
	return u, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func countRows(store string) int {
	n := 0
	survey.ReadStore(store, func(survey.Row) error { n++; return nil })
	return n
}

// checkRows checks that every target has exactly one row and that every
// reading agrees with its server's configured window.
func checkRows(store string, truth map[string]surveylab.Server, want int) bool {
	ok := true
	seen := map[string]int{}
	verdicts := map[string]int{}
	passive := map[string]int{}
	retries := map[string]int{}
	wrong, wrongPassive := 0, 0
	var examples []string
	_, err := survey.ReadStore(store, func(r survey.Row) error {
		seen[fmt.Sprintf("%d %s", r.Index, r.URL)]++
		s, found := truth[r.URL]
		if !found {
			wrong++
			examples = append(examples, "unknown URL "+r.URL)
			return nil
		}
		verdicts[r.ExactVerdict]++
		passive[r.PassiveVerdict]++
		if r.ExactRetry != "" {
			retries[r.ExactRetry]++
		}
		switch {
		case r.ExactVerdict == exact.VerdictExact && (r.ExactIWSegments == nil || *r.ExactIWSegments != s.IW):
			wrong++
			examples = append(examples, fmt.Sprintf("%s: exact %v, configured %d", r.URL, deref(r.ExactIWSegments), s.IW))
		case (r.ExactVerdict == exact.VerdictLowerBound || r.ExactVerdict == exact.VerdictRwndLimited) &&
			(r.ExactIWSegments == nil || *r.ExactIWSegments > s.IW || r.ExactReason == ""):
			wrong++
			examples = append(examples, fmt.Sprintf("%s: bound %v above configured %d (or no reason)", r.URL, deref(r.ExactIWSegments), s.IW))
		}
		switch {
		case r.PassiveVerdict == report.VerdictExact && (r.PassiveIWSegments == nil || *r.PassiveIWSegments != s.IW):
			wrongPassive++
			examples = append(examples, fmt.Sprintf("%s: page load exact %v, configured %d", r.URL, deref(r.PassiveIWSegments), s.IW))
		case r.PassiveVerdict == report.VerdictRange && (r.PassiveIWSegments == nil || r.PassiveIWSegmentsMax == nil ||
			*r.PassiveIWSegments > s.IW || *r.PassiveIWSegmentsMax < s.IW):
			wrongPassive++
			examples = append(examples, fmt.Sprintf("%s: page load range %v-%v misses configured %d", r.URL, deref(r.PassiveIWSegments), deref(r.PassiveIWSegmentsMax), s.IW))
		case r.PassiveVerdict == report.VerdictLowerBound && (r.PassiveIWSegments == nil || *r.PassiveIWSegments > s.IW):
			wrongPassive++
			examples = append(examples, fmt.Sprintf("%s: page load bound %v above configured %d", r.URL, deref(r.PassiveIWSegments), s.IW))
		}
		return nil
	})
	if err != nil {
		fmt.Println("FAIL: reading", store, err)
		return false
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	fmt.Printf("%s: %d rows for %d targets, %d targets with more than one row\n", filepath.Base(store), len(seen), want, dups)
	if len(seen) != want || dups > 0 {
		fmt.Println("FAIL: not every target measured exactly once")
		ok = false
	}
	fmt.Printf("  exact verdicts: %v; retries: %v\n  page-load verdicts: %v\n", sortedCounts(verdicts), sortedCounts(retries), sortedCounts(passive))
	fmt.Printf("  readings that contradict the configured window: exact %d, page load %d\n", wrong, wrongPassive)
	for i, e := range examples {
		if i == 10 {
			break
		}
		fmt.Println("   ", e)
	}
	if wrong > 0 || wrongPassive > 0 {
		fmt.Println("FAIL: a reading contradicts its server's configured window")
		ok = false
	}
	return ok
}

// compareStores checks that two stores hold the same targets with the same
// exact readings.
func compareStores(a, b string) bool {
	read := func(path string) map[string]string {
		m := map[string]string{}
		survey.ReadStore(path, func(r survey.Row) error {
			m[fmt.Sprintf("%d %s", r.Index, r.URL)] = fmt.Sprintf("%s %v", r.ExactVerdict, deref(r.ExactIWSegments))
			return nil
		})
		return m
	}
	ma, mb := read(a), read(b)
	missing, extra, differ := 0, 0, 0
	for k, v := range ma {
		w, found := mb[k]
		switch {
		case !found:
			missing++
		case v != w:
			differ++
		}
	}
	for k := range mb {
		if _, found := ma[k]; !found {
			extra++
		}
	}
	fmt.Printf("merged shards vs unsharded: %d and %d rows; %d missing, %d extra; %d with another exact reading\n", len(mb), len(ma), missing, extra, differ)
	if missing > 0 || extra > 0 {
		fmt.Println("FAIL: the merged shards do not hold the unsharded survey's targets")
		return false
	}
	return true
}

// checkNoTable checks that no exact table is left in the vantage namespace.
func checkNoTable(vantage string) bool {
	h, err := netns.GetFromPath(vantage)
	if err != nil {
		fmt.Println("FAIL:", err)
		return false
	}
	defer h.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		fmt.Println("FAIL:", err)
		return false
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		fmt.Println("FAIL:", err)
		return false
	}
	left := 0
	for _, t := range tables {
		if strings.HasPrefix(t.Name, exact.TablePrefix) {
			left++
		}
	}
	fmt.Printf("nftables tables left in the vantage: %d\n", left)
	return left == 0
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func sortedCounts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}
