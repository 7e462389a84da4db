package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/watch"
)

func newWatchCommand() *cobra.Command {
	var (
		every                 time.Duration
		count                 int
		storePath, listen     string
		label                 string
		list, asJSON          bool
		resolves              []string
		netns, iface          string
		insecure, http1       bool
		tlsVersion            string
		timeout               time.Duration
		noCompress            bool
		userAgent, serverName string
	)
	cmd := &cobra.Command{
		Use:   "watch URL --store FILE [--every 5m] [--count N]",
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

--count N stops after N probes; Ctrl-C stops cleanly (exit 130), never leaving a
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
  sudo slowstart watch https://example.com/ --every 1m --count 60 --store example.db --metrics-listen 127.0.0.1:9464
  sudo slowstart watch https://www.example.com/ --store www.db --resolve www.example.com:443:192.0.2.7
  slowstart watch --store example.db --list
  slowstart watch --store example.db --list --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if storePath == "" {
				return withCode(exitUsage, errors.New("--store FILE is required (an SQLite file; made when missing)"))
			}
			if list {
				url := ""
				if len(args) == 1 {
					url = args[0]
				}
				return listStore(cmd.Context(), cmd.OutOrStdout(), storePath, url, asJSON)
			}
			if len(args) != 1 {
				return withCode(exitUsage, errors.New("give the URL to watch (or --list to print the store)"))
			}
			if every <= 0 {
				return withCode(exitUsage, fmt.Errorf("--every %v: give a positive interval, e.g. 5m", every))
			}
			if count < 0 {
				return withCode(exitUsage, errors.New("--count must be 0 (no limit) or more"))
			}
			netns, err := netnsPath(netns)
			if err != nil {
				return err
			}
			opts := probe.Options{URL: args[0], TLSVersion: tlsVersion, HTTP1Only: http1, NoCompress: noCompress,
				UserAgent: userAgent, ServerName: serverName, Insecure: insecure, Timeout: timeout, Runs: 1,
				Netns: netns, Interface: iface, Tool: "slowstart " + version, Resolve: map[string]netip.Addr{}}
			if opts.TLSVersion == "none" || opts.TLSVersion == "any" {
				opts.TLSVersion = ""
			}
			for _, r := range resolves {
				key, addr, err := probe.ParseResolve(r)
				if err != nil {
					return withCode(exitUsage, err)
				}
				opts.Resolve[key] = addr
			}
			cleanStaleExact(cmd, netns)
			store, err := watch.OpenStore(storePath, false)
			if err != nil {
				return withCode(exitFile, err)
			}
			defer store.Close()
			metrics := watch.NewMetrics(version, buildCommit())
			if listen != "" {
				stopServer, addr, err := watch.ServeMetrics(listen, metrics)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--metrics-listen %s: %w", listen, err))
				}
				defer stopServer()
				fmt.Fprintf(cmd.ErrOrStderr(), "metrics: http://%s/metrics\n", addr)
			}
			out := cmd.OutOrStdout()
			stored := 0
			err = watch.Run(cmd.Context(), watch.Config{Probe: opts, Every: every, Count: count, Store: store, Metrics: metrics, Label: label,
				Fatal: func(err error) bool {
					switch probe.KindOf(err) {
					case probe.KindURL, probe.KindPermission, probe.KindInterface:
						return true
					}
					return false
				},
				OnProbe: func(r watch.Row) {
					stored++
					fmt.Fprintln(out, formatWatchRow(r))
				}})
			switch {
			case err == nil:
			case errors.Is(err, context.Canceled) && cmd.Context().Err() != nil:
				return interrupted("interrupted; %s stored in %s", report.Count(stored, "probe", "probes"), storePath)
			default:
				return withCode(probeExitCode(err), err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s stored in %s\n", report.Count(stored, "probe", "probes"), storePath)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&every, "every", 5*time.Minute, "time between the starts of two probes")
	fl.IntVar(&count, "count", 0, "stop after N probes (0: until Ctrl-C)")
	fl.StringVar(&storePath, "store", "", "the SQLite file to append to (made when missing)")
	fl.StringVar(&listen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics: :PORT for 127.0.0.1 only, or HOST:PORT (0.0.0.0:9464 for every interface)")
	fl.StringVar(&label, "label", "", "name the watch in the store and the metrics ({label=\"NAME\"}) instead of by its URL")
	fl.BoolVar(&list, "list", false, "print the probes stored in --store (of URL only, when given) and exit")
	fl.BoolVar(&asJSON, "json", false, "with --list: print the rows as JSON")
	fl.StringArrayVar(&resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	addNetnsFlag(fl, &netns)
	fl.StringVar(&iface, "interface", "", "capture on this interface (default: the one the route to the server uses)")
	fl.BoolVarP(&insecure, "insecure", "k", false, "do not verify the server's certificate")
	fl.StringVar(&tlsVersion, "tls", "", "allow only this TLS version: 1.2 or 1.3 (default: both)")
	fl.BoolVar(&http1, "http1.1", false, "do not offer HTTP/2")
	fl.BoolVar(&noCompress, "no-compress", false, "ask for an uncompressed body (Accept-Encoding: identity)")
	fl.StringVar(&userAgent, "user-agent", "", "User-Agent (default: a desktop browser's)")
	fl.StringVar(&serverName, "sni", "", "TLS server name to send (default: the URL's host)")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up on a probe after this long")
	return cmd
}

// formatWatchRow prints a stored probe on one line.
func formatWatchRow(r watch.Row) string {
	name := textsafe.Escape(r.URL)
	if r.Label != "" {
		name = textsafe.Escape(r.Label)
	}
	s := r.Time.Local().Format("2006-01-02 15:04:05") + "  " + name
	if r.Error != "" && r.Status == nil {
		return s + "  error: " + textsafe.Escape(r.Error)
	}
	if r.Status != nil {
		s += fmt.Sprintf("  HTTP %d", *r.Status)
	}
	if text := r.IWReading().Text(); text != "" {
		s += fmt.Sprintf("  IW %s (%s)", text, r.IWVerdict)
	} else if r.IWVerdict != "" {
		s += fmt.Sprintf("  IW ? (%s)", r.IWVerdict)
	} else {
		s += "  IW ?"
	}
	ms := func(label string, v *float64) {
		if v != nil {
			s += fmt.Sprintf("  %s %s ms", label, strconv.FormatFloat(*v, 'f', decimals(*v), 64))
		}
	}
	ms("rtt", r.HandshakeRTTMs)
	ms("tls", r.TLSMs)
	ms("first byte", r.FirstByteMs)
	ms("last byte", r.LastByteMs)
	if r.RoundTrips != nil {
		s += "  " + report.Count(*r.RoundTrips, "round trip", "round trips")
	}
	if r.BodyBytes != nil {
		s += fmt.Sprintf("  %d bytes", *r.BodyBytes)
	}
	if r.Error != "" {
		s += "  error: " + textsafe.Escape(r.Error)
	}
	return s
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listStore prints the rows of a store (of url only, when given).
func listStore(ctx context.Context, w io.Writer, path, url string, asJSON bool) error {
	store, err := watch.OpenStore(path, true)
	if err != nil {
		return withCode(exitFile, err)
	}
	defer store.Close()
	rows, err := store.Rows(ctx, watch.Query{URL: url})
	if err != nil {
		return withCode(exitFile, err)
	}
	if asJSON {
		if rows == nil {
			rows = []watch.Row{}
		}
		return jsonout.Write(w, watch.ListOutput{Schema: watch.Schema, Rows: rows})
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "%s holds no probes\n", path)
		return nil
	}
	tb := texttable.New("", texttable.R("id"), texttable.L("time (UTC)"), texttable.L("url"), texttable.R("status"), texttable.R("IW"),
		texttable.L("verdict"), texttable.R("RTT ms"), texttable.R("TLS ms"), texttable.R("first byte ms"), texttable.R("last byte ms"),
		texttable.R("round trips"), texttable.R("bytes"), texttable.L("error"))
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	n := func(v *int) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	}
	for _, r := range rows {
		body := "-"
		if r.BodyBytes != nil {
			body = fmt.Sprint(*r.BodyBytes)
		}
		verdict := r.IWVerdict
		if verdict == "" {
			verdict = "-"
		}
		tb.Row(strconv.FormatInt(r.ID, 10), r.Time.UTC().Format("2006-01-02 15:04:05"), textsafe.Escape(r.URL),
			n(r.Status), dashIfEmpty(r.IWReading().Text()), verdict, f(r.HandshakeRTTMs), f(r.TLSMs), f(r.FirstByteMs), f(r.LastByteMs), n(r.RoundTrips), body, textsafe.Escape(r.Error))
	}
	if err := tb.Write(w); err != nil {
		return err
	}
	urls, err := store.URLs(ctx)
	if err == nil && url == "" && len(urls) > 0 {
		fmt.Fprintf(w, "%s of %s\n", report.Count(len(rows), "probe", "probes"), report.Count(len(urls), "URL", "URLs"))
	}
	return nil
}

// decimals gives milliseconds three significant digits, at least one decimal.
func decimals(ms float64) int {
	switch {
	case ms < 1:
		return 3
	case ms < 10:
		return 2
	}
	return 1
}
