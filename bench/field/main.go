// Command field measures `slowstart field` (package field): how many new
// connections and kernel events a second it follows on one core, how much
// memory it holds over ten million connections, and what it costs a server's
// throughput. It runs itself again in a network namespace of its own (nothing
// outside it is traced, nothing is left behind). Four phases:
//
//   - live: short connections (connect, a request, a 1 KB answer, close) from
//     many clients to a server on the loopback, without field and then with
//     field.Run following the server's port: connections/s side by side, and
//     what field measured and lost;
//   - drain: the same connections while a tracer's ring fills unread, then one
//     thread reads every event into field's tracker and aggregation
//     (field.Follower, what Run feeds): events/s and connections/s of one core,
//     which two cores busy making the traffic cannot otherwise show;
//   - synthetic: ten million made-up connections (field.SyntheticConn, a
//     thousand open at a time, clients spread over a million /24 networks)
//     through the same tracker and aggregation: the process's RSS every million
//     connections, and the processing rate;
//   - nginx: nginx (one worker, no access log) serving 1 KB under h2load
//     (HTTP/1.1), a new connection per request and kept-alive connections, in turns without and with the
//     slowstart binary's field following its port: requests/s side by side.
//
// It prints each figure beside its peer from the same run, and the targets:
// 20,000 connections/s and 1 M events/s on one core, RSS ≤ 200 MB and flat
// over 10 M connections, nginx within 3% with field running. It needs root,
// nginx and h2load (Debian: nginx-light, nghttp2-client); it is a benchmarking
// aid, not part of the slowstart binary.
//
//	go run ./bench/field [-seconds 5] [-clients 64] [-connections 10000000] [-turns 3]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/bench/internal/loopload"
	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/ktcp"
)

// insideEnv marks the copy of the command that runs in the new namespace.
const insideEnv = "SLOWSTART_FIELD_BENCH_INSIDE"

type config struct {
	phase       time.Duration
	clients     int
	connections int
	turns       int
	turn        time.Duration
	drainBytes  int
	phases      map[string]bool
}

func main() {
	seconds := flag.Float64("seconds", 5, "length of the live and drain phases")
	clients := flag.Int("clients", 64, "concurrent clients making short connections")
	connections := flag.Int("connections", 10_000_000, "connections of the synthetic phase")
	turns := flag.Int("turns", 3, "nginx: turns without and with field")
	turn := flag.Duration("turn", 8*time.Second, "nginx: the length of each h2load turn")
	drainMB := flag.Int("drain-ring-mb", 512, "the drain phase's ring buffer, MiB (a power of two)")
	phases := flag.String("phases", "live,drain,synthetic,nginx", "the phases to run")
	flag.Parse()
	loopload.Isolate("bench/field", insideEnv)
	cfg := config{phase: time.Duration(*seconds * float64(time.Second)), clients: *clients, connections: *connections,
		turns: *turns, turn: *turn, drainBytes: *drainMB << 20, phases: map[string]bool{}}
	for _, p := range strings.Split(*phases, ",") {
		cfg.phases[strings.TrimSpace(p)] = true
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench/field:", err)
		os.Exit(1)
	}
}

// targets collects the PASS/FAIL lines printed at the end.
var targets []string

func target(ok bool, format string, args ...any) {
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	targets = append(targets, fmt.Sprintf("%s  %s", verdict, fmt.Sprintf(format, args...)))
}

func run(cfg config) error {
	if _, err := loopload.Loopback(); err != nil {
		return err
	}
	fmt.Printf("bench/field: %d cores, GOMAXPROCS %d\n\n", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	srv, err := loopload.StartServer("127.0.0.1:8080", 1024)
	if err != nil {
		return err
	}
	defer srv.Close()
	if cfg.phases["live"] {
		if err := live(cfg, srv.Addr().String()); err != nil {
			return err
		}
	}
	if cfg.phases["drain"] {
		if err := drain(cfg, srv.Addr().String()); err != nil {
			return err
		}
	}
	if cfg.phases["synthetic"] {
		synthetic(cfg)
	}
	if cfg.phases["nginx"] {
		if err := nginx(cfg); err != nil {
			return err
		}
	}
	fmt.Println("targets:")
	for _, t := range targets {
		fmt.Println("  " + t)
	}
	for _, t := range targets {
		if strings.HasPrefix(t, "FAIL") {
			return errors.New("a target was missed")
		}
	}
	return nil
}

// live: short connections without and with field.Run following them.
func live(cfg config, addr string) error {
	start := time.Now()
	base := float64(loopload.ShortConnections(addr, cfg.clients, cfg.phase, false)) / time.Since(start).Seconds()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		sum *field.Summary
		err error
	}
	done := make(chan result, 1)
	ready := make(chan struct{})
	var once sync.Once
	status := writerFunc(func(b []byte) (int, error) {
		if strings.Contains(string(b), "following new connections") {
			once.Do(func() { close(ready) })
		}
		return len(b), nil
	})
	cpu0 := processCPU()
	go func() {
		sum, err := field.Run(ctx, field.Options{Ports: []uint16{8080}, MarksFile: "-", Interval: time.Second, Out: io.Discard, Status: status})
		done <- result{sum, err}
	}()
	select {
	case <-ready:
	case r := <-done:
		cancel()
		return fmt.Errorf("field: %v", r.err)
	}
	start = time.Now()
	made := loopload.ShortConnections(addr, cfg.clients, cfg.phase, false)
	seconds := time.Since(start).Seconds()
	cancel()
	r := <-done
	if r.err != nil {
		return r.err
	}
	cpu := processCPU() - cpu0
	s := r.sum
	fmt.Println("live: short connections (connect, request, 1 KB answer, close) to a server on the loopback")
	fmt.Printf("  without field  %10.0f connections/s\n", base)
	fmt.Printf("  with field     %10.0f connections/s  (%.3f× the peer)\n", float64(made)/seconds, float64(made)/seconds/base)
	fmt.Printf("  field measured %10d first responses of %d connections made (%d followed, %d without a response)\n",
		s.Counts.Measured, made, s.Counts.Followed, s.Counts.NoResponse)
	fmt.Printf("  events         %10d read, %d lost; the whole process (clients, server, field) used %.1f s of CPU in %.1f s\n",
		s.Drops.EventsRead, s.Drops.EventsLost, cpu.Seconds(), seconds)
	fmt.Println()
	target(s.Drops.EventsLost == 0 && s.Counts.Measured >= uint64(made), "live: every connection measured, no event lost (%d of %d, %d lost)",
		s.Counts.Measured, made, s.Drops.EventsLost)
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// drain: connections while a big ring fills unread, then one thread reads
// every event into field's tracker and aggregation.
func drain(cfg config, addr string) error {
	netns, err := ktcp.NetnsInode("/proc/self/ns/net")
	if err != nil {
		return err
	}
	tracer, err := ktcp.Open(ktcp.Options{Filter: ktcp.Filter{Netns: []uint32{netns}, LocalPorts: []uint16{8080}},
		Kinds: []ktcp.Kind{ktcp.KindProbe, ktcp.KindState, ktcp.KindRetransmit}, RingBytes: cfg.drainBytes})
	if err != nil {
		return err
	}
	defer tracer.Close()
	start := time.Now()
	made := loopload.ShortConnections(addr, cfg.clients, cfg.phase, false)
	rate := float64(made) / time.Since(start).Seconds()
	stats, err := tracer.Stats()
	if err != nil {
		return err
	}
	f, err := field.NewFollower(field.Options{})
	if err != nil {
		return err
	}
	wall, cpu, err := loopload.Drain(tracer, stats.Submitted, f.Feed)
	if err != nil {
		return err
	}
	sum := f.Summary()
	measured := sum.Counts.Measured
	eventsPerCPU := float64(stats.Submitted) / cpu.Seconds()
	connsPerCPU := float64(measured) / cpu.Seconds()
	fmt.Printf("drain: %.0f connections/s wrote %d events into a %d MiB ring (%d lost) while nobody read it; then one thread\n",
		rate, stats.Submitted, cfg.drainBytes>>20, stats.Lost)
	fmt.Printf("  read them into field's tracker and aggregation: %.2f M events/s and %.0f connections/s of the thread's CPU\n",
		eventsPerCPU/1e6, connsPerCPU)
	fmt.Printf("  (%v wall, %v CPU; %d first responses measured of %d connections made)\n",
		wall.Round(time.Millisecond), cpu.Round(time.Millisecond), measured, made)
	fmt.Println()
	target(eventsPerCPU >= 1e6, "drain: ≥ 1 M kernel events/s on one core (%.2f M)", eventsPerCPU/1e6)
	target(connsPerCPU >= 20000, "drain: ≥ 20,000 new connections/s on one core (%.0f)", connsPerCPU)
	target(stats.Lost == 0, "drain: no event lost in the ring (%d)", stats.Lost)
	return nil
}

// synthetic: ten million made-up connections through field's tracker and
// aggregation, a thousand open at a time, the RSS every million.
func synthetic(cfg config) {
	f, err := field.NewFollower(field.Options{})
	if err != nil {
		fmt.Println("synthetic:", err)
		return
	}
	const open = 1000
	sizes := []int{800, 5000, 14000, 30000, 60000, 150000}
	type slot struct {
		events []ktcp.Event
		next   int
	}
	slots := make([]slot, open)
	var made int
	var clock int64 = 1e9
	newConn := func(s *slot) {
		made++
		n := uint32(made)
		// Clients spread over a million /24 networks of 10.0.0.0/8 and 100.64.0.0/10.
		client := netip.AddrFrom4([4]byte{10 + byte(n%4)*30, byte(n >> 12), byte(n >> 4), byte(n)})
		sc := field.SyntheticConn{Cookie: uint64(made), Client: netip.AddrPortFrom(client, uint16(n)), Server: netip.MustParseAddrPort("192.0.2.1:443"),
			StartNs: clock, RTTNs: int64(10+n%190) * 1e6, IW: 10, MSS: 1448, ResponseBytes: sizes[n%uint32(len(sizes))], ISN: n * 2654435761}
		s.events, s.next = sc.Events(s.events[:0]), 0
	}
	for i := range slots {
		newConn(&slots[i])
	}
	fmt.Printf("synthetic: %d connections through field's tracker and aggregation, %d open at a time, clients in a million /24s\n",
		cfg.connections, open)
	fmt.Println("  connections   RSS MB   heap MB   open   events/s of CPU")
	var rss []float64
	var events int64
	cpu0 := loopload.ThreadCPU()
	runtime.LockOSThread()
	step := max(cfg.connections/10, 1)
	nextReport := step
	for done := 0; done < cfg.connections; {
		for i := range slots {
			s := &slots[i]
			if s.next >= len(s.events) {
				continue // a slot with no connection left to make
			}
			ev := &s.events[s.next]
			clock = max(clock, ev.MonoNs)
			f.Feed(ev)
			events++
			s.next++
			if s.next == len(s.events) {
				done++
				if made < cfg.connections {
					newConn(s)
				} else {
					s.events = s.events[:0]
				}
				if done%100_000 == 0 {
					f.Sweep(clock)
				}
				if done%1_000_000 == 0 {
					f.NextInterval() // as Run does every interval
				}
				if done == nextReport {
					nextReport += step
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					r := float64(loopload.CurrentRSS()) / 1e6
					rss = append(rss, r)
					fmt.Printf("  %11d   %6.1f   %7.1f   %4d   %.2f M\n", done, r, float64(ms.HeapInuse)/1e6, f.Open(),
						float64(events)/(loopload.ThreadCPU()-cpu0).Seconds()/1e6)
				}
			}
		}
	}
	cpu := loopload.ThreadCPU() - cpu0
	runtime.UnlockOSThread()
	sum := f.Summary()
	fmt.Printf("  %.2f M events/s and %.0f connections/s of one core; %d networks kept apart, %d connections pooled past the bound\n",
		float64(events)/cpu.Seconds()/1e6, float64(cfg.connections)/cpu.Seconds(), len(sum.Networks)+sum.NetworksOmitted, sum.Drops.ConnectionsPooled)
	fmt.Println()
	peak, first := 0.0, 0.0
	for i, r := range rss {
		peak = max(peak, r)
		if i == 0 {
			first = r
		}
	}
	target(peak <= 200, "synthetic: RSS ≤ 200 MB over %d connections (peak %.1f MB)", cfg.connections, peak)
	if len(rss) > 1 {
		last := rss[len(rss)-1]
		target(last <= first*1.2+10, "synthetic: RSS flat (%.1f MB after the first tenth, %.1f MB at the end)", first, last)
	}
}

// nginx: requests/s under h2load without and with field, in turns.
func nginx(cfg config) error {
	h2load, err := exec.LookPath("h2load")
	if err != nil {
		return errors.New("nginx phase: h2load is missing (apt-get install nghttp2-client)")
	}
	dir, err := os.MkdirTemp("", "slowstart-bench-field-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "slowstart")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/slowstart").CombinedOutput(); err != nil {
		return fmt.Errorf("building slowstart (run from the module's root): %v: %s", err, out)
	}
	for _, keepAlive := range []bool{false, true} {
		ng, err := startNginx(dir, keepAlive)
		if err != nil {
			return fmt.Errorf("nginx: %w", err)
		}
		mode := "a new connection per request"
		if keepAlive {
			mode = "kept-alive connections"
		}
		fmt.Printf("nginx serving 1 KB, %s (h2load --h1 -c 32 -t 1, turns of about %v), without and with field following its port:\n", mode, cfg.turn)
		// A turn is a number of requests (h2load's -D hangs when the server
		// closes each connection): as many as a turn's time allows, measured once.
		probe, err := runH2load(h2load, 5000)
		if err != nil {
			stopNginx(ng)
			return err
		}
		requests := max(int(probe*cfg.turn.Seconds()), 5000)
		fmt.Printf("  turns of %d requests\n", requests)
		fmt.Println("  turn   without field   with field   nginx CPU/request   field CPU/request   field's events read/lost")
		var without, with, nginxCPU, fieldCPU []float64
		for i := range cfg.turns {
			// Turns alternate which goes first (ABBA), so that a drift of the
			// machine falls on both alike.
			var a, b float64
			var events string
			var fcpu time.Duration
			plain := func() error {
				var err error
				a, err = runH2load(h2load, requests)
				return err
			}
			traced := func() error {
				var err error
				c0 := processTreeCPU(ng.Process.Pid)
				b, events, fcpu, err = withField(bin, func() (float64, error) { return runH2load(h2load, requests) })
				nginxCPU = append(nginxCPU, (processTreeCPU(ng.Process.Pid)-c0).Seconds()/float64(requests)*1e6)
				return err
			}
			first, second := plain, traced
			if i%2 == 1 {
				first, second = traced, plain
			}
			if err := first(); err != nil {
				stopNginx(ng)
				return err
			}
			if err := second(); err != nil {
				stopNginx(ng)
				return err
			}
			fieldCPU = append(fieldCPU, fcpu.Seconds()/float64(requests)*1e6)
			without, with = append(without, a), append(with, b)
			fmt.Printf("  %4d   %9.0f/s   %9.0f/s   %12.1f µs   %12.1f µs   %s\n", i+1, a, b, nginxCPU[i], fieldCPU[i], events)
		}
		stopNginx(ng)
		ma, mb := median(without), median(with)
		fmt.Printf("  median %9.0f/s   %9.0f/s   %12.1f µs   %12.1f µs   ratio %.3f\n\n", ma, mb, median(nginxCPU), median(fieldCPU), mb/ma)
		target(mb >= 0.97*ma, "nginx, %s: throughput with field within 3%% (%.3f×)", mode, mb/ma)
	}
	return nil
}

// startNginx runs Debian's nginx in the foreground with one worker serving
// /bytes/1000 on 127.0.0.1:8090, without an access log, keeping connections
// alive or closing each after its response.
func startNginx(dir string, keepAlive bool) (*exec.Cmd, error) {
	root := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(root, "docroot", "bytes"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "docroot", "bytes", "1000"), make([]byte, 1000), 0o644); err != nil {
		return nil, err
	}
	timeout := "0"
	if keepAlive {
		timeout = "65"
	}
	conf := fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_timeout %[2]s;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:8090; root %[1]s/docroot; }
}
`, root, timeout)
	path := filepath.Join(root, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("nginx", "-p", root, "-c", path, "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx (apt-get install nginx-light): %w", err)
	}
	for range 100 {
		if c, err := net.Dial("tcp", "127.0.0.1:8090"); err == nil {
			c.Close()
			return cmd, nil
		}
		time.Sleep(50 * time.Millisecond) // nginx says nothing when it listens: try to connect
	}
	stopNginx(cmd)
	return nil, errors.New("nginx did not listen on 127.0.0.1:8090 within 5 s")
}

func stopNginx(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGQUIT)
	cmd.Wait()
}

var h2loadRate = regexp.MustCompile(`finished in [^,]+, ([0-9.]+) req/s`)

func runH2load(h2load string, requests int) (float64, error) {
	out, err := exec.Command(h2load, "--h1", "-c", "32", "-t", "1", "-n", strconv.Itoa(requests), "http://127.0.0.1:8090/bytes/1000").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("h2load: %v: %s", err, out)
	}
	m := h2loadRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("h2load printed no rate: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// withField runs work while the slowstart binary's field follows nginx's
// port, and says what field read and lost, and the CPU it used.
func withField(bin string, work func() (float64, error)) (float64, string, time.Duration, error) {
	cmd := exec.Command(bin, "field", "--port", "8090", "--marks", "-", "--json", "--interval", "1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, "", 0, err
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return 0, "", 0, err
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "following new connections") {
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	c0 := processTreeCPU(cmd.Process.Pid)
	rate, err := work()
	cpu := processTreeCPU(cmd.Process.Pid) - c0
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if err != nil {
		return 0, "", 0, err
	}
	read := regexp.MustCompile(`"events_read": ([0-9]+)`).FindStringSubmatch(stdout.String())
	lost := regexp.MustCompile(`"events_lost": ([0-9]+)`).FindStringSubmatch(stdout.String())
	events := "?"
	if read != nil && lost != nil {
		events = read[1] + "/" + lost[1]
	}
	return rate, events, cpu, nil
}

// processTreeCPU is the CPU time (user and system) of a process and its
// children, from /proc.
func processTreeCPU(pid int) time.Duration {
	var ticks int64
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// The fields after the command's closing parenthesis: utime and stime are
		// the 12th and 13th.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				ticks += u + s
			}
		}
	}
	total := time.Duration(ticks) * time.Second / 100 // USER_HZ
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		if n, err := strconv.Atoi(c); err == nil {
			total += processTreeCPU(n)
		}
	}
	return total
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// processCPU is the process's CPU time, user and system.
func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
