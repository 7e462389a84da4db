package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/ktcp"
	"github.com/slowstart/slowstart/tune"
)

// fieldFlags are the flags of `slowstart field`, read into field.Options.
type fieldFlags struct {
	ports, iws, netns             []string
	prefix, asnFile, ring, retain string
	allNetns, asJSON, asJSONL     bool
	opts                          field.Options
}

func newFieldCommand() *cobra.Command {
	var f fieldFlags
	cmd := &cobra.Command{
		Use:   "field --port PORT [--store FILE] [--duration D] [--json | --jsonl]",
		Short: "What real users' first loads cost this server: every new connection's round trips, from the kernel",
		Long: `field follows every new TCP connection to the server's ports on this Linux
machine, from the kernel itself (eBPF on the tcp:tcp_probe and
sock:inet_sock_set_state tracepoints: nothing is captured and nothing on the
server changes), and reads for each one:

  - the handshake round-trip time, as the kernel measured it;
  - the client's network: a prefix (--prefix 24,48), or an autonomous system
    with a pfx2as file (--asn, the same file survey --asn takes);
  - the first response's rounds: the bytes of each and the kernel's congestion
    window when it ended. A round is what the server sent between two ACKs:
    round 1 is what went out before the first ACK of the response came back;
  - what limited round 1: the congestion window (cwnd: the initial window, IW,
    cut it), the client's receive window (rwnd), the application (app: it had
    written nothing more yet), or nothing (end: the response fit);
  - the round trips the response took and its time, from the request's arrival
    to the ACK of its last byte;
  - what another initial window would have saved on it (--iw 10,16,32), by the
    model (slow start on the connection's own bytes, MSS and RTT).

It aggregates them by client network: histograms of the RTT, of the round
trips per first response and of round 1's bytes, the share of window-limited
first responses, and the round trips and milliseconds each IW would save, with
95% bootstrap confidence intervals. It prints a line per --interval and a table
when it stops (Ctrl-C, or --duration); --json prints the table as JSON,
--jsonl one line per connection instead. --store writes every interval to a
rolling SQLite store (--retain), --metrics-listen serves Prometheus histograms.

A "first response" is the server's answer to the client's first flight of
data: an HTTP/1.x response, or over TLS the handshake flight. --exchange 2 takes
the answer to the second flight (TLS 1.3's first HTTP response), 3 the third
(TLS 1.2's).

Before and after: slowstart tune apply and revert record each change in a
journal (--marks, /var/lib/slowstart/tune/marks.jsonl) that field reads, so the
store carries a mark at the change. Then:
  slowstart field report --store FILE --at-mark     # per network, before vs after, with CIs
  slowstart compare --store FILE --before T --after T [--network NET]
  slowstart view FILE                               # the distribution over time, per network

field needs Linux, and root or the capabilities CAP_BPF and CAP_PERFMON. Where
BPF is unavailable it says why in one line and falls back to a packet capture
on --interface (the default route's), filtered in the kernel on the ports,
which needs CAP_NET_RAW. It holds bounded memory however many connections
there are (--max-conns, --max-networks), and counts and says what it could not
see: kernel events lost, connections not followed, packets dropped.
Ctrl-C stops it (exit 130) after writing the last interval and the summary.`,
		Example: `  sudo slowstart field --port 443 --exchange 2 --duration 10m
  sudo slowstart field --port 80,443 --store /var/lib/slowstart/field.db --metrics-listen :9465
  sudo slowstart field --port 443 --asn routeviews-rv2-pfx2as.txt --iw 16,32 --json
  sudo slowstart field --port 8080 --netns web1 --jsonl > conns.jsonl
  slowstart field report --store /var/lib/slowstart/field.db --at-mark`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			opts.Out, opts.Status = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return fieldCode(field.Follow(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.ports, "port", "p", nil, "the server's local `PORT`s to follow (80,443)")
	fl.StringSliceVar(&f.netns, "netns", nil, "follow the connections of this network namespace (NAME or path; repeat for several; default: field's own)")
	fl.BoolVar(&f.allNetns, "all-netns", false, "follow every network namespace of the machine (containers included)")
	fl.StringVar(&f.opts.Source, "source", field.SourceAuto, "auto (the kernel, or packets where BPF is unavailable), kernel, or packets")
	fl.StringVar(&f.opts.Interface, "interface", "", "the interface the packet source captures on (default: the default route's)")
	fl.StringVar(&f.opts.StorePath, "store", "", "write every interval to this SQLite `FILE` (made when missing)")
	fl.StringVar(&f.retain, "retain", "14d", "keep the store's rows this long (e.g. 36h, 14d)")
	fl.DurationVar(&f.opts.Interval, "interval", field.DefaultInterval, "write the store and print a line this often")
	fl.DurationVar(&f.opts.Duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	fl.StringSliceVar(&f.iws, "iw", nil, "initial windows to price on every response, segments (default 10,16,32)")
	fl.StringVar(&f.prefix, "prefix", "24,48", "client networks: prefix lengths for IPv4 and IPv6")
	fl.StringVar(&f.asnFile, "asn", "", "group clients by AS with this pfx2as `FILE` (PREFIX/LEN ASN, or CAIDA's ADDRESS LEN ASN)")
	fl.IntVar(&f.opts.Exchange, "exchange", field.DefaultExchange, "the client flight whose answer is the first response (2: TLS 1.3's HTTP response)")
	fl.StringVar(&f.opts.MetricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (:PORT listens on 127.0.0.1)")
	fl.IntVar(&f.opts.MetricsNetworks, "metrics-networks", field.DefaultMetricsNetworks, "networks with series of their own in the metrics (the rest: network=\"other\")")
	fl.StringVar(&f.opts.MarksFile, "marks", tune.DefaultMarksFile, "tune's journal of changes to mark in the store (- for none)")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary as JSON when done")
	fl.BoolVar(&f.asJSONL, "jsonl", false, "print one JSON line per connection as each first response is over")
	fl.IntVar(&f.opts.Top, "top", field.DefaultTop, "networks listed in the summary")
	fl.IntVar(&f.opts.MaxConns, "max-conns", field.DefaultMaxConns, "connections followed at once (new ones past it are counted, not followed)")
	fl.IntVar(&f.opts.MaxNetworks, "max-networks", field.DefaultMaxNetworks, "networks with statistics of their own (the rest are pooled)")
	fl.IntVar(&f.opts.SampleSize, "sample-size", field.DefaultSampleSize, "connections per network the summary's quantiles and intervals rest on")
	fl.IntVar(&f.opts.SamplesPerNetwork, "samples-per-network", field.DefaultSamplesPerNetwork, "connections per network and interval the store keeps")
	fl.IntVar(&f.opts.SamplesPerInterval, "samples-per-interval", field.DefaultSamplesPerInterval, "connections per interval the store keeps in all")
	fl.StringVar(&f.ring, "ring", "16MiB", "the kernel's ring buffer of events (a power of two)")
	fl.Uint64Var(&f.opts.Seed, "seed", 1, "seed of the sampling and the bootstrap")
	cmd.AddCommand(newFieldReportCommand())
	return cmd
}

func (f *fieldFlags) options() (field.Options, error) {
	o := f.opts
	var err error
	if o.Ports, err = field.ParsePorts(f.ports); err != nil {
		return o, err
	}
	if o.IWs, err = field.ParseWindows(f.iws); err != nil {
		return o, err
	}
	if o.Prefix4, o.Prefix6, err = field.ParsePrefixes(f.prefix); err != nil {
		return o, err
	}
	if o.Retain, err = field.ParseRetain(f.retain); err != nil {
		return o, err
	}
	if o.RingBytes, err = field.ParseRing(f.ring); err != nil {
		return o, err
	}
	for _, ns := range f.netns {
		path, err := netnsPath(ns)
		if err != nil {
			return o, err
		}
		o.Netns = append(o.Netns, path)
	}
	o.AllNetns = f.allNetns
	switch {
	case f.asJSON && f.asJSONL:
		return o, withCode(exitUsage, errors.New("--json and --jsonl: choose one"))
	case f.asJSON:
		o.Format = field.FormatJSON
	case f.asJSONL:
		o.Format = field.FormatJSONL
	}
	if f.asnFile != "" {
		if o.ASN, err = field.ReadASNFile(f.asnFile); err != nil {
			return o, withCode(exitFile, fmt.Errorf("--asn: %w", err))
		}
	}
	return o, outpath.CheckFile("store", o.StorePath)
}

// fieldCode maps field's errors to exit codes.
func fieldCode(err error) error {
	var usage *field.UsageError
	var file *field.FileError
	var perm *field.PermissionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &usage):
		return withCode(exitUsage, err)
	case errors.As(err, &file):
		return withCode(exitFile, err)
	case errors.As(err, &perm):
		return withCode(exitPermission, err)
	case errors.Is(err, ktcp.ErrUnavailable):
		return withCode(exitFailure, err)
	}
	return err
}

func newFieldReportCommand() *cobra.Command {
	var (
		storePath, network, from, to, before, after string
		iws                                         []string
		atMark, asJSON                              bool
		top                                         int
		seed                                        uint64
	)
	cmd := &cobra.Command{
		Use:   "report --store FILE [--from T] [--to T] [--network NET] | --at-mark | --before W --after W",
		Short: "What a field store holds: a period's summary, or before and after a change, per network",
		Long: `report reads a store field wrote (--store) and prints what its connections cost
over a period (--from and --to: RFC3339, "2026-11-08 14:00" or a date; default:
everything), per client network: the same table field prints when it stops,
with confidence intervals from the connections the store kept (each weighted
by the connections of its minute and network it stands for).

--before W --after W compares two periods (each a time or a range A..B, as
compare takes them) network by network: the round trips per first response
and the response time, medians before and after, their difference with a 95%
bootstrap interval and the Mann-Whitney test (see slowstart compare).
--at-mark does it around the newest mark in the store (a tune apply or revert
recorded in its journal): the same length of time on either side.`,
		Example: `  slowstart field report --store field.db
  slowstart field report --store field.db --from "2026-11-08 00:00" --network AS64500 --json
  slowstart field report --store field.db --at-mark
  slowstart field report --store field.db --before 2026-11-01..2026-11-07 --after 2026-11-09..`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return field.ReportStore(cmd.Context(), field.ReportStoreOptions{StorePath: storePath, From: from, To: to, Network: network,
				Before: before, After: after, AtMark: atMark, JSON: asJSON, IWs: iws, Top: top, Seed: seed}, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&storePath, "store", "", "the field store to read")
	fl.StringVar(&from, "from", "", "the period's start (default: the store's first interval)")
	fl.StringVar(&to, "to", "", "the period's end (default: its last)")
	fl.StringVar(&network, "network", "", "only this client network (as the table names it)")
	fl.StringVar(&before, "before", "", "compare: the BEFORE period, a range A..B or a time T (everything before T)")
	fl.StringVar(&after, "after", "", "compare: the AFTER period, a range A..B or a time T (everything from T on)")
	fl.BoolVar(&atMark, "at-mark", false, "compare around the store's newest mark (tune apply or revert)")
	fl.StringSliceVar(&iws, "iw", nil, "initial windows to price, segments (default 10,16,32)")
	fl.IntVar(&top, "top", field.DefaultTop, "networks listed")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	fl.Uint64Var(&seed, "seed", 1, "seed of the bootstrap")
	return cmd
}
