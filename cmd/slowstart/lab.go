package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/survey"
	"github.com/slowstart/slowstart/units"
)

func newLabCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Emulated paths with real kernel TCP: run one point, sweep a grid, clean up",
		Long: `The lab runs real transfers between a client and a server in their own network
namespaces, joined by a userspace link emulator (delay, rate, queue, loss), with the
server's initial window set on its route (ip route ... initcwnd N). Trials run in
parallel without interfering, and everything they create is removed when they end,
even on Ctrl-C. It needs root (network namespaces).

The initial window (IW) is what a server may send on a new connection before it
waits a round trip; the lab shows what it costs on a given path.`,
	}
	cmd.AddCommand(newLabRunCommand(), newLabSweepCommand(), newLabCleanCommand())
	cmd.AddCommand(newLabReproduceCommand())
	cmd.AddCommand(newLabPageCommand())
	return cmd
}

// pathFlags are the flags that describe one point (lists for sweep).
type pathFlags struct {
	rtt, rate, iw, size, loss, queue string
	tls, server, client, cc, chain   string
	think, thinkAfter                string
	h2, ipv6, slowStartAfterIdle     bool
	http3                            bool
	initrwnd, trials, parallel       int
	seed                             uint64
	captureDir                       string
	changed                          func(name string) bool
}

func (f *pathFlags) register(cmd *cobra.Command, lists bool) {
	many := ""
	if lists {
		many = " (a comma-separated list)"
	}
	fl := cmd.Flags()
	f.changed = fl.Changed
	fl.StringVar(&f.rtt, "rtt", "70ms", "round-trip propagation delay"+many)
	fl.StringVar(&f.rate, "rate", "0", "bottleneck rate each way, e.g. 1.2mbit, 100Mbit/s; 0 for none"+many)
	fl.StringVar(&f.iw, "iw", "10", "the server's initial window in segments (route initcwnd)"+many)
	fl.StringVar(&f.size, "size", "42KB", "response body size, e.g. 42KB, 1.5MB, 29x1448 (as model's --size)"+many)
	fl.StringVar(&f.loss, "loss", "0", "random loss on the server→client path, e.g. 1%"+many)
	fl.StringVar(&f.queue, "queue", "", lab.QueueHelp)
	fl.StringVar(&f.tls, "tls", "none", "TLS version: none, 1.2 or 1.3")
	fl.BoolVar(&f.h2, "h2", false, "HTTP/2 (ALPN over TLS, prior knowledge in cleartext)")
	fl.StringVar(&f.chain, "chain", "4KB", "certificate chain size on the wire, with --tls")
	fl.StringVar(&f.server, "server", "builtin", "server: builtin, nginx or caddy (Debian's caddy; over TLS only)")
	fl.BoolVar(&f.http3, "http3", false, "also run every point over HTTP/3 (QUIC) on the same path and set round trips and FCT beside TCP's; --tls then defaults to 1.3 and --h2 to on, as a browser's TCP connection")
	fl.StringVar(&f.client, "client", "builtin", "client: builtin or curl")
	fl.StringVar(&f.cc, "cc", "cubic", "congestion control: cubic, bbr or reno")
	fl.StringVar(&f.think, "think", "0", "server think time before the rest of the body")
	fl.StringVar(&f.thinkAfter, "think-after", "0", "body bytes sent before the think time")
	fl.IntVar(&f.initrwnd, "initrwnd", 0, "the client's initial receive window in segments (route initrwnd); 0: kernel default")
	fl.BoolVar(&f.slowStartAfterIdle, "slow-start-after-idle", false, "keep net.ipv4.tcp_slow_start_after_idle on")
	fl.BoolVar(&f.ipv6, "ipv6", false, "use IPv6")
	fl.IntVar(&f.trials, "trials", 5, "trials per point")
	fl.IntVar(&f.parallel, "parallel", 1, "trials run at once")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the random loss (the same seed drops the same packets)")
	fl.StringVar(&f.captureDir, "capture", "", "write the client-side and server-side pcap of every trial to this directory")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// specs expands the flags into every point of the grid.
func (f *pathFlags) specs() ([]lab.Spec, error) {
	base := lab.Spec{Server: f.server, Client: f.client, CC: f.cc, HTTP2: f.h2, IPv6: f.ipv6, InitRwnd: f.initrwnd,
		SlowStartAfterIdle: f.slowStartAfterIdle, Seed: f.seed}
	if f.http3 {
		// The TCP side of the comparison as a browser's: HTTP/2 over TLS 1.3, unless asked otherwise.
		if !f.changed("tls") {
			f.tls = "1.3"
		}
		if !f.changed("h2") {
			base.HTTP2 = true
		}
		if f.tls == "none" || f.tls == "" {
			return nil, errors.New("--http3 compares HTTP/3 with HTTPS over TCP: give --tls 1.2 or 1.3 (the default with --http3 is 1.3)")
		}
	}
	if f.tls != "none" && f.tls != "" {
		base.TLS = f.tls
		chain, err := units.ParseSize(f.chain)
		if err != nil {
			return nil, fmt.Errorf("--chain: %w", err)
		}
		base.ChainBytes = int(chain)
	}
	if f.queue != "" {
		if n, ok := strings.CutSuffix(f.queue, "p"); ok {
			var packets int
			if _, err := fmt.Sscanf(n, "%d", &packets); err != nil || packets <= 0 {
				return nil, fmt.Errorf("--queue %q: use bytes (64KB) or packets (100p)", f.queue)
			}
			base.QueuePackets = packets
		} else {
			b, err := units.ParseSize(f.queue)
			if err != nil {
				return nil, fmt.Errorf("--queue: %w", err)
			}
			base.QueueBytes = b
		}
	}
	think, err := units.ParseDuration(f.think)
	if err != nil {
		return nil, fmt.Errorf("--think: %w", err)
	}
	base.ThinkNs = think
	if base.ThinkAfterBytes, err = units.ParseSize(f.thinkAfter); err != nil {
		return nil, fmt.Errorf("--think-after: %w", err)
	}
	specs := []lab.Spec{base}
	expand := func(flag, list string, set func(*lab.Spec, string) error) error {
		var out []lab.Spec
		items := splitList(list)
		if len(items) == 0 {
			return fmt.Errorf("--%s: give at least one value", flag)
		}
		for _, s := range specs {
			for _, it := range items {
				n := s
				if err := set(&n, it); err != nil {
					return fmt.Errorf("--%s: %w", flag, err)
				}
				out = append(out, n)
			}
		}
		specs = out
		return nil
	}
	steps := []struct {
		flag, list string
		set        func(*lab.Spec, string) error
	}{
		{"rtt", f.rtt, func(s *lab.Spec, v string) (err error) { s.RTTNs, err = units.ParseDuration(v); return }},
		{"rate", f.rate, func(s *lab.Spec, v string) (err error) {
			if v == "0" || v == "none" {
				return nil
			}
			s.RateBitsPerSecond, err = units.ParseRate(v)
			return
		}},
		{"iw", f.iw, func(s *lab.Spec, v string) error {
			_, err := fmt.Sscanf(v, "%d", &s.IW)
			if err != nil || s.IW < 1 {
				return fmt.Errorf("%q is not a number of segments", v)
			}
			return nil
		}},
		{"size", f.size, func(s *lab.Spec, v string) (err error) { s.SizeBytes, err = units.ParseSize(v); return }},
		{"loss", f.loss, func(s *lab.Spec, v string) (err error) { s.LossRate, err = units.ParsePercent(v); return }},
	}
	for _, st := range steps {
		if err := expand(st.flag, st.list, st.set); err != nil {
			return nil, err
		}
	}
	for i := range specs {
		if err := specs[i].Normalize(); err != nil {
			return nil, err
		}
	}
	if f.http3 {
		// Each point over TCP, then the same over HTTP/3.
		var both []lab.Spec
		for _, s := range specs {
			twin, err := s.HTTP3Twin()
			if err != nil {
				return nil, fmt.Errorf("--http3: %w", err)
			}
			both = append(both, s, twin)
		}
		specs = both
	}
	for _, s := range specs {
		if err := checkTools(s); err != nil {
			return nil, err
		}
	}
	if f.trials < 1 {
		return nil, errors.New("--trials must be 1 or more")
	}
	if f.parallel < 1 {
		return nil, errors.New("--parallel must be 1 or more")
	}
	return specs, nil
}

// checkTools says, before any work, when a point needs a program this machine
// lacks (nginx, curl).
func checkTools(s lab.Spec) error {
	for _, need := range []struct {
		used               bool
		program, flag, pkg string
	}{
		{s.Server == lab.ServerNginx, "nginx", "--server nginx", "nginx-light"},
		{s.Server == lab.ServerCaddy, "caddy", "--server caddy", "caddy"},
		{s.Client == lab.ClientCurl, "curl", "--client curl", "curl"},
	} {
		if _, err := exec.LookPath(need.program); need.used && err != nil {
			return fmt.Errorf("%s: %s is not installed (apt-get install %s), or use the built-in one", need.flag, need.program, need.pkg)
		}
	}
	return nil
}

func (f *pathFlags) jobs(specs []lab.Spec) []lab.Job {
	var jobs []lab.Job
	if f.http3 {
		// TCP and HTTP/3 trials alternate, so that what the host does to the
		// timing falls on both alike; their round trips are counted.
		for t := 1; t <= f.trials; t++ {
			for _, s := range specs {
				jobs = append(jobs, lab.Job{Spec: s, Trial: t, RoundTrips: true})
			}
		}
		return jobs
	}
	for _, s := range specs {
		for t := 1; t <= f.trials; t++ {
			jobs = append(jobs, lab.Job{Spec: s, Trial: t})
		}
	}
	return jobs
}

// describeSpecs says in words what the points of a run emulate: the TCP point, and
// its HTTP/3 twin with --http3.
func describeSpecs(specs []lab.Spec) string {
	out := lab.Describe(specs[0])
	if len(specs) == 2 && specs[1].HTTP3 {
		_, h3, _ := strings.Cut(lab.Describe(specs[1]), "\n")
		out += "\nand over HTTP/3: " + h3
	}
	return out
}

// needRoot fails with a clear message when the lab can't make namespaces.
func needRoot() error {
	if os.Geteuid() != 0 {
		return withCode(exitPermission, errors.New("the lab creates network namespaces, which needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run it with sudo"))
	}
	return nil
}

// labContext removes every live trial on Ctrl-C or SIGTERM, and what a killed run
// left behind before starting.
func labContext(parent context.Context) (context.Context, func(), error) {
	if err := needRoot(); err != nil {
		return nil, nil, err
	}
	ctx, stop := netlab.HandleSignals(parent)
	if _, err := netlab.Clean(ctx, false); err != nil {
		stop()
		return nil, nil, fmt.Errorf("removing a previous run's leftovers: %w", err)
	}
	return ctx, stop, nil
}

// progress shows how far a batch is: a bar on a terminal, otherwise a line per
// item done ("3 of 10 trials done"), so that logs and scripts see it too.
type progress struct {
	bar         *progressbar.ProgressBar
	w           io.Writer
	unit        string
	done, total int
}

func newProgress(total int, what, unit string) *progress {
	p := &progress{total: total, unit: unit, w: os.Stderr}
	if isTerminal(os.Stderr) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	}
	return p
}

// Add counts n more items done.
func (p *progress) Add(n int) {
	p.done += n
	if p.bar != nil {
		_ = p.bar.Add(n)
		return
	}
	fmt.Fprintf(p.w, "%d of %d %s done\n", p.done, p.total, p.unit)
}

// Finish clears the bar.
func (p *progress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writeLabWarnings prints the warnings of a batch of trials after its tables.
func writeLabWarnings(w io.Writer, warnings []string) {
	for _, warning := range warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

// labWarnings are the drops nobody asked for and a host too busy to trust.
func labWarnings(sums []lab.PointSummary, steal lab.HostSteal) []string {
	warnings := lab.DropWarnings(sums)
	if w := lab.StealWarning(steal); w != "" {
		warnings = append(warnings, w)
	}
	return warnings
}

func newLabRunCommand() *cobra.Command {
	var f pathFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Time transfers over one emulated path",
		Long: `Run trials of one transfer over one emulated path and print the flow completion
time (FCT) both as Dukkipati et al. measure it (first response byte to last byte)
and as a user feels it (from the connect to the last byte): median and spread, and
the packets the emulated path dropped in each trial, by the full bottleneck queue
and by the random loss. When the queue dropped packets nobody asked to lose, or
the host was too busy for the timing to be trusted, a warning says so and what to
change. Ctrl-C prints the trials finished.

With --http3 every trial also runs over HTTP/3 (QUIC, the built-in server or
Caddy, the same chain and page, the same emulated path: UDP goes through the
emulator like TCP), and a table sets the two side by side: the round trips
(handshakes + data rounds, read from each trial's packets) and the FCTs. The
IW and the congestion control are TCP's: the QUIC server's window is its
library's (quic-go: 32 packets of 1,280 bytes).

` + units.Help,
		Example: `  slowstart lab run --rtt 70ms --rate 1.2mbit --iw 10 --size 42KB --trials 10
  slowstart lab run --rtt 150ms --iw 3 --size 100KB --tls 1.3 --h2 --server nginx --capture out/
  slowstart lab run --rtt 70ms --rate 15mbit --iw 32 --size 160KB --loss 1% --json
  slowstart lab run --rtt 100ms --rate 10mbit --size 160KB --chain 9KB --http3   # TCP and QUIC side by side`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, err := f.specs()
			if err != nil {
				return withCode(exitUsage, err)
			}
			if len(specs) != 1 && !(f.http3 && len(specs) == 2) {
				return withCode(exitUsage, errors.New("lab run takes one value per flag; use lab sweep for lists"))
			}
			if err := checkOutputDir("capture", f.captureDir); err != nil {
				return err
			}
			ctx, stop, err := labContext(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			env := lab.NewEnv()
			trials := "trials"
			if f.trials == 1 {
				trials = "trial"
			}
			what := specs[0].Label()
			if f.http3 {
				what += ", over TCP and over HTTP/3 (each)"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Running %d %s of %s...\n", f.trials, trials, what)
			meter := hoststeal.Start()
			total := f.trials * len(specs)
			bar := newProgress(total, "trials", "trials")
			var finished []lab.Row
			rows, err := env.RunJobs(ctx, f.jobs(specs), lab.RunOptions{Parallel: f.parallel, CaptureDir: f.captureDir,
				OnResult: func(_ lab.Job, r lab.Row, _ error) {
					finished = append(finished, r)
					bar.Add(1)
				}})
			bar.Finish()
			if err != nil {
				// Interrupted: the trials that ended are the result so far.
				if !asJSON && len(finished) > 0 {
					out := cmd.OutOrStdout()
					fmt.Fprintf(out, "%s\n", describeSpecs(specs))
					sums := lab.SummarizePoints(specs, finished)
					if werr := errors.Join(lab.WriteTrials(out, finished), lab.WriteSummaries(out, sums),
						lab.WriteComparisons(out, lab.Comparisons(specs, sums))); werr != nil {
						return werr
					}
					writeLabWarnings(out, labWarnings(sums, lab.NewHostSteal(meter.Read())))
				}
				return interrupted("interrupted; %d of %d trials finished (above); the lab's namespaces were removed", len(finished), total)
			}
			sums := lab.SummarizePoints(specs, rows)
			steal := lab.NewHostSteal(meter.Read())
			warnings := labWarnings(sums, steal)
			comparisons := lab.Comparisons(specs, sums)
			if asJSON {
				output := lab.RunOutput{Schema: lab.Schema, Summary: sums[0], Trials: rows,
					Warnings: append([]string{}, warnings...), HostSteal: steal}
				if f.http3 {
					output.HTTP3 = &sums[1]
					if len(comparisons) == 1 {
						output.Comparison = &comparisons[0]
					}
				}
				return writeJSON(cmd.OutOrStdout(), output)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s\n", describeSpecs(specs))
			if err := errors.Join(lab.WriteTrials(out, rows), lab.WriteSummaries(out, sums), lab.WriteComparisons(out, comparisons)); err != nil {
				return err
			}
			writeLabWarnings(out, warnings)
			if f.captureDir != "" {
				fmt.Fprintf(out, "captures: %s (analyze them with: slowstart analyze FILE; an HTTP/3 trial's with --keylog FILE.keys)\n", f.captureDir)
			}
			failed := 0
			for _, s := range sums {
				if s.Failed == s.Trials {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("every trial of %d of the %d points failed", failed, len(sums))
			}
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary and every trial as JSON")
	return cmd
}

func newLabSweepCommand() *cobra.Command {
	var f pathFlags
	var out, shard string
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run a grid of points (lists of RTT, rate, IW, size, loss), resumable",
		Long: `Run every combination of the listed values, each with --trials trials, --parallel
at once. Each trial's result is appended to OUT/results.jsonl as it ends, with every
parameter in the row; OUT/results.csv is written at the end. Run the same command
again to resume an interrupted sweep: trials already in results.jsonl are skipped.

` + units.Help,
		Example: `  slowstart lab sweep --rtt 20ms,70ms,150ms --rate 1.2mbit --iw 3,10 --size 10KB,50KB,100KB --trials 5 --parallel 8 --out sweep1
  slowstart lab sweep --rtt 70ms --iw 3,10,32 --size 160KB --loss 0,1%,3% --trials 10 --parallel 8 --out loss`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return withCode(exitUsage, errors.New("--out DIR is required"))
			}
			specs, err := f.specs()
			if err != nil {
				return withCode(exitUsage, err)
			}
			var part survey.Shard
			if shard != "" {
				if part, err = survey.ParseShard(shard); err != nil {
					return withCode(exitUsage, fmt.Errorf("--shard: %w", err))
				}
			}
			if err := checkOutputDir("out", out); err != nil {
				return err
			}
			if err := checkOutputDir("capture", f.captureDir); err != nil {
				return err
			}
			ctx, stop, err := labContext(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			jsonl := filepath.Join(out, "results.jsonl")
			previous, err := lab.ReadRows(jsonl)
			if err != nil {
				return fileError(fmt.Errorf("reading %s to resume: %w", jsonl, err))
			}
			done := lab.DoneKeys(previous)
			var todo []lab.Job
			jobs := shardJobs(f.jobs(specs), part)
			for _, j := range jobs {
				if !done[j.Key()] {
					todo = append(todo, j)
				}
			}
			if skipped := len(jobs) - len(todo); skipped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "resuming: %d of %d trials already done in %s\n", skipped, skipped+len(todo), jsonl)
			}
			w, err := lab.OpenJSONL(jsonl)
			if err != nil {
				return fileError(err)
			}
			defer w.Close()
			capture := ""
			if f.captureDir != "" {
				capture = f.captureDir
			}
			bar := newProgress(len(todo), fmt.Sprintf("%d points", len(specs)), "trials")
			meter := hoststeal.Start()
			var writeErr error
			_, runErr := lab.NewEnv().RunJobs(ctx, todo, lab.RunOptions{Parallel: f.parallel, CaptureDir: capture,
				OnResult: func(_ lab.Job, r lab.Row, _ error) {
					if err := w.Write(r); err != nil && writeErr == nil {
						writeErr = err
					}
					bar.Add(1)
				}})
			bar.Finish()
			if writeErr != nil {
				return fileError(fmt.Errorf("writing %s: %w", jsonl, writeErr))
			}
			all, err := lab.ReadRows(jsonl)
			if err != nil {
				return fileError(err)
			}
			csvPath := filepath.Join(out, "results.csv")
			cf, err := os.Create(csvPath)
			if err != nil {
				return fileError(err)
			}
			if err := lab.WriteCSV(cf, lab.LatestRows(all)); err != nil {
				cf.Close()
				return fileError(err)
			}
			if err := cf.Close(); err != nil {
				return fileError(err)
			}
			if runErr != nil {
				return interrupted("interrupted; %d trials are in %s: run the same command again to resume", len(lab.LatestRows(all)), jsonl)
			}
			sums := lab.SummarizePoints(specs, lab.LatestRows(all))
			if err := errors.Join(lab.WriteSummaries(cmd.OutOrStdout(), sums), lab.WriteComparisons(cmd.OutOrStdout(), lab.Comparisons(specs, sums))); err != nil {
				return err
			}
			writeLabWarnings(cmd.OutOrStdout(), labWarnings(sums, lab.NewHostSteal(meter.Read())))
			fmt.Fprintf(cmd.OutOrStdout(), "results: %s, %s\n", jsonl, csvPath)
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&out, "out", "", "directory for results.jsonl and results.csv (required)")
	cmd.Flags().StringVar(&shard, "shard", "", "run one of N disjoint parts of the grid: I/N, I from 0 to N-1")
	cmd.AddCommand(newLabSweepMergeCommand())
	return cmd
}

func newLabCleanCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what a killed run left behind (the same as slowstart clean)",
		Long: `Remove the network namespaces, processes and temporary directories of lab runs
whose process is gone (a run killed with SIGKILL can't clean up after itself),
and the firewall tables of killed exact probes: the same as slowstart clean.
Only what carries slowstart's marker is removed. With --all, also remove the lab
namespaces of runs still going.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClean(cmd, all)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also remove the namespaces of lab runs that are still going")
	return cmd
}
