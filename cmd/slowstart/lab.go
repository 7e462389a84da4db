package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/internal/progress"
	"github.com/slowstart/slowstart/lab"
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
	fl.StringVar(&f.rtt, "rtt", "130ms", "round-trip propagation delay"+many)
	fl.StringVar(&f.rate, "rate", "0", "bottleneck rate each way, e.g. 1.2mbit, 100Mbit/s; 0 for none"+many)
	fl.StringVar(&f.iw, "iw", "10", "the server's initial window in segments (route initcwnd)"+many)
	fl.StringVar(&f.size, "size", "42KB", "response body size, e.g. 42KB, 1.5MB, 29x1448 (as model's --size)"+many)
	fl.StringVar(&f.loss, "loss", "0", "random loss on the server→client path, e.g. 1%"+many)
	fl.StringVar(&f.queue, "queue", "", lab.QueueHelp)
	fl.StringVar(&f.tls, "tls", "none", "TLS version: none, 1.2 or 1.3")
	fl.BoolVar(&f.h2, "h2", false, "HTTP/2 (ALPN over TLS, prior knowledge in cleartext)")
	fl.StringVar(&f.chain, "chain", "4KB", "certificate chain size on the wire, with --tls")
	fl.StringVar(&f.server, "server-kind", "builtin", "the server: builtin, nginx, caddy (Debian's caddy; over TLS only) or netstack (the built-in server on gVisor's userspace TCP: IW fixed at 10, --cc cubic or reno)")
	fl.BoolVar(&f.http3, "http3", false, "also run every point over HTTP/3 (QUIC) on the same path and set round trips and FCT beside TCP's; --tls then defaults to 1.3 and --h2 to on, as a browser's TCP connection")
	fl.StringVar(&f.client, "client-kind", "builtin", "the client: builtin or curl")
	fl.StringVar(&f.cc, "cc", "cubic", "congestion control: cubic, bbr or reno")
	fl.StringVar(&f.think, "think", "0", "server think time before the rest of the body")
	fl.StringVar(&f.thinkAfter, "think-after", "0", "body bytes sent before the think time")
	fl.IntVar(&f.initrwnd, "initrwnd", 0, "the client's initial receive window in segments (route initrwnd); 0: kernel default")
	fl.BoolVar(&f.slowStartAfterIdle, "slow-start-after-idle", false, "keep net.ipv4.tcp_slow_start_after_idle on")
	fl.BoolVar(&f.ipv6, "ipv6", false, "use IPv6")
	fl.IntVar(&f.trials, "runs", 5, "trials per point: the times each point is run")
	fl.IntVar(&f.parallel, "parallel", 1, "trials run at once")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the random loss (the same seed drops the same packets)")
	fl.StringVar(&f.captureDir, "capture", "", "write the client-side and server-side pcap of every trial to this directory")
	renamed(fl, "server", "server-kind")
	renamed(fl, "client", "client-kind")
	renamed(fl, "trials", "runs")
}

// grid is the lab's points as the flags give them.
func (f *pathFlags) grid() lab.Grid {
	return lab.Grid{RTT: f.rtt, Rate: f.rate, IW: f.iw, Size: f.size, Loss: f.loss, Queue: f.queue,
		TLS: f.tls, Chain: f.chain, Server: f.server, Client: f.client, CC: f.cc, Think: f.think, ThinkAfter: f.thinkAfter,
		HTTP2: f.h2, IPv6: f.ipv6, SlowStartAfterIdle: f.slowStartAfterIdle, InitRwnd: f.initrwnd, Seed: f.seed, Trials: f.trials,
		HTTP3: f.http3, TLSGiven: f.changed("tls"), HTTP2Given: f.changed("h2")}
}

// specs expands the flags into every point of the grid.
func (f *pathFlags) specs() ([]lab.Spec, error) {
	specs, err := f.grid().Specs()
	if err != nil {
		return nil, err
	}
	if f.parallel < 1 {
		return nil, errors.New("--parallel must be 1 or more")
	}
	return specs, nil
}

// labContext is the lab's context for its trials (lab.Context).
func labContext(parent context.Context) (context.Context, func(), error) { return lab.Context(parent) }

// batch reads the flags into the trials of lab run or lab sweep.
func (f *pathFlags) batch() (lab.BatchOptions, error) {
	specs, err := f.specs()
	if err != nil {
		return lab.BatchOptions{}, withCode(exitUsage, err)
	}
	return lab.BatchOptions{Grid: f.grid(), Specs: specs, Parallel: f.parallel, CaptureDir: f.captureDir}, nil
}

// sweep reads the flags into the trials of a sweep into out, and its shard.
func (f *pathFlags) sweep(out, shard string) (lab.BatchOptions, survey.Shard, error) {
	var part survey.Shard
	if out == "" {
		return lab.BatchOptions{}, part, withCode(exitUsage, errors.New("--out DIR is required"))
	}
	o, err := f.batch()
	if err != nil {
		return o, part, err
	}
	if shard != "" {
		if part, err = survey.ParseShard(shard); err != nil {
			return o, part, withCode(exitUsage, fmt.Errorf("--shard: %w", err))
		}
	}
	return o, part, nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return progress.IsTerminal(f) }

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
		Example: `  slowstart lab run --rtt 70ms --rate 1.2mbit --iw 10 --size 42KB --runs 10
  slowstart lab run --rtt 150ms --iw 3 --size 100KB --tls 1.3 --h2 --server-kind nginx --capture out/
  slowstart lab run --rtt 70ms --rate 15mbit --iw 32 --size 160KB --loss 1% --json
  slowstart lab run --rtt 100ms --rate 10mbit --size 160KB --chain 9KB --http3   # TCP and QUIC side by side`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.batch()
			if err != nil {
				return err
			}
			return lab.RunPoint(cmd.Context(), o, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
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
		Long: `Run every combination of the listed values, each with --runs trials, --parallel
at once. Each trial's result is appended to OUT/results.jsonl as it ends, with every
parameter in the row; OUT/results.csv is written at the end. Run the same command
again to resume an interrupted sweep: trials already in results.jsonl are skipped.

` + units.Help,
		Example: `  slowstart lab sweep --rtt 20ms,70ms,150ms --rate 1.2mbit --iw 3,10 --size 10KB,50KB,100KB --runs 5 --parallel 8 -o sweep1
  slowstart lab sweep --rtt 70ms --iw 3,10,32 --size 160KB --loss 0,1%,3% --runs 10 --parallel 8 -o loss`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, part, err := f.sweep(out, shard)
			if err != nil {
				return err
			}
			return lab.Sweep(cmd.Context(), o, out, part.Index, part.Count, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVarP(&out, "out", "o", "", "directory for results.jsonl and results.csv (required)")
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
