package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/watch"
)

// watchFlags are the flags of slowstart watch.
type watchFlags struct {
	probe      probeFlags
	list, json bool
	o          watch.FollowOptions
}

func newWatchCommand() *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch URL --store FILE [--every 5m] [--runs N]",
		Short: "Probe a URL on a schedule into a store, to compare before and after a change",
		Long: `Probe the URL every --every (a fresh connection each time, as a first visit), and
append one row per probe to an SQLite store: the time, the URL, the server's initial
window (IW) as the load showed it with its verdict, the handshake round-trip time,
the TLS handshake, the first and last byte, the round trips and the body bytes, or
the error. A failed probe is stored with its error and the watch goes on.

The initial window is what a server may send on a new connection before it waits a
round trip; raising it (ip route change ... initcwnd N) saves round trips on long
paths. Watch before and after such a change, then ask whether load times really
dropped:

  slowstart compare --store FILE --before T1..T2 --after T3..

--runs N stops after N probes; Ctrl-C stops cleanly (exit 130), never leaving a
half-written row. --metrics-listen serves Prometheus metrics (counters of probes
and errors, histograms of every probe's timings and round trips, the last
probe's IW and body as gauges, build info; docs/compare.md) at
http://ADDR/metrics, to GET requests only; :PORT listens on 127.0.0.1 alone.

The URL is written everywhere (the store, the metrics, the output) without its
credentials (user:password@) and with the values of its query replaced by
REDACTED, as is every URL in an error (a redirect's target too); --label NAME
names the watch instead. The store is readable by its
owner only (0600).
--list prints what a store holds.

Each probe captures its own packets, which needs CAP_NET_RAW (sudo, or setcap);
--netns needs root.`,
		Example: `  sudo slowstart watch https://example.com/ --every 5m --store example.db
  sudo slowstart watch https://example.com/ --every 1m --runs 60 --store example.db --metrics-listen 127.0.0.1:9464
  sudo slowstart watch https://www.example.com/ --store www.db --resolve www.example.com:443:192.0.2.7
  slowstart watch --store example.db --list
  slowstart watch --store example.db --list --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.list && f.o.StorePath != "" {
				return watch.List(cmd.Context(), cmd.OutOrStdout(), f.o.StorePath, strings.Join(args, ""), f.json)
			}
			o, err := f.options(args)
			if err != nil {
				return err
			}
			return probeError(watch.Follow(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.o.Every, "every", 5*time.Minute, "time between the starts of two probes")
	fl.IntVar(&f.o.Count, "runs", 0, "stop after N probes (0: until Ctrl-C)")
	fl.StringVar(&f.o.StorePath, "store", "", "the SQLite file to append to (made when missing)")
	fl.StringVar(&f.o.MetricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics: :PORT for 127.0.0.1 only, or HOST:PORT (0.0.0.0:9464 for every interface)")
	fl.StringVar(&f.o.Label, "label", "", "name the watch in the store and the metrics ({label=\"NAME\"}) instead of by its URL")
	fl.BoolVar(&f.list, "list", false, "print the probes stored in --store (of URL only, when given) and exit")
	fl.BoolVar(&f.json, "json", false, "with --list: print the rows as JSON")
	fl.StringArrayVar(&f.probe.resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	addNetnsFlag(fl, &f.probe.netns)
	fl.StringVar(&f.probe.o.Interface, "interface", "", "capture on this interface (default: the one the route to the server uses)")
	fl.BoolVarP(&f.probe.o.Insecure, "insecure", "k", false, "do not verify the server's certificate")
	fl.StringVar(&f.probe.o.TLSVersion, "tls", "", "allow only this TLS version: 1.2 or 1.3 (default: both)")
	fl.BoolVar(&f.probe.o.HTTP1Only, "http1.1", false, "do not offer HTTP/2")
	fl.BoolVar(&f.probe.o.NoCompress, "no-compress", false, "ask for an uncompressed body (Accept-Encoding: identity)")
	fl.StringVar(&f.probe.o.UserAgent, "user-agent", "", "User-Agent (default: a desktop browser's)")
	fl.StringVar(&f.probe.o.ServerName, "sni", "", "TLS server name to send (default: the URL's host)")
	fl.DurationVar(&f.probe.o.Timeout, "timeout", 30*time.Second, "give up on a probe after this long")
	renamed(fl, "count", "runs")
	return cmd
}

// options reads the flags of a watch of args[0] into watch.FollowOptions.
func (f *watchFlags) options(args []string) (watch.FollowOptions, error) {
	o := f.o
	switch {
	case o.StorePath == "":
		return o, withCode(exitUsage, errors.New("--store FILE is required (an SQLite file; made when missing)"))
	case len(args) != 1:
		return o, withCode(exitUsage, errors.New("give the URL to watch (or --list to print the store)"))
	case o.Every <= 0:
		return o, withCode(exitUsage, fmt.Errorf("--every %v: give a positive interval, e.g. 5m", o.Every))
	case o.Count < 0:
		return o, withCode(exitUsage, errors.New("--runs must be 0 (no limit) or more"))
	}
	var err error
	o.Probe, err = f.probe.options(args[0])
	o.Probe.Runs, o.Version, o.Commit = 1, version, buildCommit()
	return o, err
}
