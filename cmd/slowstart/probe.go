package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/demo"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/probe/quicprobe"
	"github.com/slowstart/slowstart/report"
)

func newProbeCommand() *cobra.Command {
	var (
		asJSON                bool
		tlsVersion            string
		http1, noCompress     bool
		insecure, ipv4, ipv6  bool
		resolves, headers     []string
		userAgent, serverName string
		timeout               time.Duration
		runs                  int
		netns, iface          string
		pcapPath, keylogPath  string
		exactMode, afterHS    bool
		htmlOut               string
		exactMSS, exactRuns   int
		http3                 bool
		protocols             string
		browserFlags          browserFlags
	)
	cmd := &cobra.Command{
		Use:   "probe [URL]",
		Short: "Fetch a URL as a browser's first visit would and explain its round trips",
		Long: `Fetch the URL over a fresh connection, as a browser's first visit would (HTTP/2 or
HTTP/1.1 by ALPN, TLS 1.2 or 1.3, compression offered, a browser's user agent,
redirects followed), capture the probe's own packets on the interface the route
to the server uses, and print a timeline: DNS, TCP, the TLS round trips, time to
first byte, each data round with its window and what limited it, the total; the
server's initial window (IW) with a verdict (exact, lower_bound, ...); and what
each thing cost in round trips and milliseconds.

The initial window is what a server may send on a new connection before it waits
a round trip; it decides how many round trips a page costs.

With no URL it runs the built-in demo: a far-away server (RTT 130 ms, 15 Mbit/s)
emulated on this machine with IW 3, 10 and 32, each serving a 160 KB page over
TLS 1.2 with a 6.9 KB certificate chain, probed side by side.

--browser loads the whole page in headless Chromium instead (Debian's
chromium) as a first visit, with its TLS secrets and a capture of all its
connections: every connection, every request on its connection with its rounds,
and the critical path to the first render in round trips, with what would save
them (docs/browser.md).

A live capture needs CAP_NET_RAW (run with sudo, or once:
sudo setcap cap_net_raw,cap_net_admin+ep $(which slowstart)); the demo and
--netns need root.`,
		Example: `  sudo slowstart probe                                  # the built-in demo
  sudo slowstart probe https://example.com/
  sudo slowstart probe https://example.com/ --runs 10 --json
  sudo slowstart probe https://example.com/ --html page.html   # the page to share
  sudo slowstart probe https://example.com/ --tls 1.2 --http1.1 --pcap page.pcap --keylog keys.txt
  sudo slowstart probe --exact http://example.com/a-long-path-that-gives-a-404
  sudo slowstart probe --exact https://example.com/       # the TLS flight, 3 runs
  sudo slowstart probe https://www.example.com/ --resolve www.example.com:443:192.0.2.7
  sudo slowstart probe https://example.com/ --protocols h3,h2,h1   # TCP, then HTTP/3 if advertised
  sudo slowstart probe --browser https://example.com/ --har page.har   # the whole page in Chromium`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if netns, err = netnsPath(netns); err != nil {
				return err
			}
			for flag, path := range map[string]string{"pcap": pcapPath, "html": htmlOut, "keylog": keylogPath} {
				if err := checkOutputFile(flag, path); err != nil {
					return err
				}
			}
			cleanStaleExact(cmd, netns)
			if err := browserFlags.check(cmd); err != nil {
				return err
			}
			if len(args) == 0 {
				if browserFlags.browser {
					return withCode(exitUsage, errors.New("--browser needs a URL (with no URL, probe runs the demo, which loads its page in Chromium by itself)"))
				}
				return runDemo(cmd, asJSON, htmlOut)
			}
			if browserFlags.browser {
				if protocols != "" {
					return withCode(exitUsage, errors.New("--protocols chooses for the probe's own client: with --browser, Chromium chooses (add --http3 to let it use QUIC)"))
				}
				return runBrowser(cmd, args[0], browserRun{flags: browserFlags, asJSON: asJSON, htmlOut: htmlOut, netns: netns, iface: iface,
					resolves: resolves, insecure: insecure, http1: http1, http3: http3, userAgent: userAgent, timeout: timeout,
					pcapPath: pcapPath, keylogPath: keylogPath})
			}
			var choose []string
			if protocols != "" {
				list, err := quicprobe.ParseProtocols(protocols)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--protocols: %w", err))
				}
				if http3 || http1 {
					return withCode(exitUsage, errors.New("--protocols replaces --http3 and --http1.1: give only --protocols"))
				}
				hasH3, hasH2 := slices.Contains(list, quicprobe.ProtocolH3), slices.Contains(list, quicprobe.ProtocolH2)
				hasTCP := hasH2 || slices.Contains(list, quicprobe.ProtocolH1)
				switch {
				case hasH3 && hasTCP && exactMode:
					return withCode(exitUsage, errors.New("--exact measures over one protocol: give --protocols h3 (or --http3) for QUIC, h2,h1 for TCP"))
				case hasH3 && !hasTCP:
					http3 = true
				case hasH3:
					choose = list
				default:
					http1 = !hasH2
				}
			}
			if http3 {
				return runHTTP3(cmd, args[0], http3Options{asJSON: asJSON, exact: exactMode, exactRuns: exactRuns, resolves: resolves, insecure: insecure,
					sni: serverName, netns: netns, timeout: timeout, keylogPath: keylogPath, packets: htmlOut != "", userAgent: userAgent})
			}
			if exactMode {
				return runExact(cmd, args[0], exactOptions{asJSON: asJSON, mss: exactMSS, runs: exactRuns,
					afterHandshake: afterHS, tls: tlsVersion, sni: serverName, netns: netns, iface: iface,
					timeout: timeout, userAgent: userAgent, resolves: resolves})
			}
			opts := probe.Options{URL: args[0], TLSVersion: tlsVersion, HTTP1Only: http1, NoCompress: noCompress,
				UserAgent: userAgent, ServerName: serverName, Insecure: insecure, Timeout: timeout, Runs: runs,
				Netns: netns, Interface: iface, PcapPath: pcapPath, KeylogPath: keylogPath, Tool: "slowstart " + version,
				Packets: htmlOut != "",
				Resolve: map[string]netip.Addr{}, Headers: http.Header{}}
			if tlsVersion == "none" || tlsVersion == "any" {
				opts.TLSVersion = ""
			}
			switch {
			case ipv4 && ipv6:
				return withCode(exitUsage, errors.New("--ipv4 and --ipv6 exclude each other"))
			case ipv4:
				opts.IPVersion = probe.IPv4
			case ipv6:
				opts.IPVersion = probe.IPv6
			}
			for _, r := range resolves {
				key, addr, err := probe.ParseResolve(r)
				if err != nil {
					return withCode(exitUsage, err)
				}
				opts.Resolve[key] = addr
			}
			for _, h := range headers {
				name, value, err := probe.ParseHeader(h)
				if err != nil {
					return withCode(exitUsage, err)
				}
				opts.Headers.Add(name, value)
			}
			if choose != nil {
				return runChoice(cmd, choose, opts, http3Options{asJSON: asJSON, insecure: insecure, sni: serverName, netns: netns,
					timeout: timeout, keylogPath: keylogPath, packets: htmlOut != "", userAgent: userAgent, resolves: resolves}, htmlOut)
			}
			res, err := probe.Run(cmd.Context(), opts)
			if cmd.Context().Err() != nil {
				return interrupted("interrupted; nothing left behind")
			}
			if res != nil && (err == nil || len(res.Report.Connections) > 0) {
				for _, w := range res.Report.Warnings {
					if err != nil && w == err.Error() {
						continue // the last line says it
					}
					fmt.Fprintf(os.Stderr, "slowstart: warning: %s\n", textsafe.Escape(w))
				}
				var werr error
				if asJSON {
					werr = report.WriteJSON(cmd.OutOrStdout(), res.Report)
				} else {
					werr = probe.WriteText(cmd.OutOrStdout(), res)
				}
				if err == nil {
					err = werr
				}
				if htmlOut != "" && err == nil {
					err = writeHTMLFile(cmd, htmlOut, res.Report)
				}
			}
			return withCode(probeExitCode(err), err)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print the Report (schema slowstart.report/v1) with the client's timings and the diagnoses")
	fl.StringVar(&tlsVersion, "tls", "", "allow only this TLS version: 1.2 or 1.3 (default: both)")
	fl.BoolVar(&http1, "http1.1", false, "do not offer HTTP/2")
	fl.BoolVar(&noCompress, "no-compress", false, "ask for an uncompressed body (Accept-Encoding: identity)")
	fl.BoolVarP(&ipv4, "ipv4", "4", false, "connect over IPv4 only")
	fl.BoolVarP(&ipv6, "ipv6", "6", false, "connect over IPv6 only")
	fl.StringArrayVar(&resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	fl.StringArrayVarP(&headers, "header", "H", nil, `extra request header "Name: value" (repeatable)`)
	fl.StringVar(&userAgent, "user-agent", "", "User-Agent (default: a desktop browser's)")
	fl.StringVar(&serverName, "sni", "", "TLS server name to send (default: the URL's host)")
	fl.BoolVarP(&insecure, "insecure", "k", false, "do not verify the server's certificate")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up on a request after this long")
	fl.IntVar(&runs, "runs", 1, "fetch N times, each over fresh connections: min, median, mode and spread of the IW")
	addNetnsFlag(fl, &netns)
	fl.StringVar(&iface, "interface", "", "capture on this interface (default: the one the route to the server uses)")
	fl.StringVar(&pcapPath, "pcap", "", "also write the captured packets to this pcap file (for Wireshark)")
	fl.StringVar(&htmlOut, "html", "", "also write a self-contained HTML page of the probe's connections (works offline) to this file")
	fl.BoolVar(&exactMode, "exact", false, "measure the initial window actively: a small announced MSS, no ACKs, count the distinct bytes until the first retransmission (the TLS flight over https://)")
	fl.IntVar(&exactMSS, "mss", 64, "with --exact: the MSS announced in the SYN, in bytes (48 to 1460)")
	fl.IntVar(&exactRuns, "exact-runs", 3, "with --exact: fresh connections to measure; the IW is reported only when they agree")
	fl.BoolVar(&afterHS, "after-handshake", false, "with --exact over https://: complete the TLS handshake, then count the HTTP response (the window after the handshake, not the IW)")
	fl.BoolVar(&http3, "http3", false, "fetch over HTTP/3 (QUIC) instead: the handshake's round trips, the amplification limit, the server's first flight and initial window (docs/quic.md)")
	fl.StringVar(&protocols, "protocols", "", "the protocols the probe may use, in order of preference: h3, h2, h1 (default h2,h1). With h3 and h2 or h1 it goes as a browser does: over TCP first, then, if the response advertises HTTP/3 (Alt-Svc), the page again over QUIC as the next connection would; over QUIC first when h3 leads and the site's HTTPS DNS record lists h3 (docs/quic.md)")
	fl.StringVar(&keylogPath, "keylog", "", "append the TLS secrets to this file (SSLKEYLOGFILE format), so Wireshark can decrypt the pcap")
	browserFlags.register(cmd)
	return cmd
}

// probeExitCode maps a probe error to the documented exit codes.
func probeExitCode(err error) int {
	switch probe.KindOf(err) {
	case "":
		return exitFailure
	case probe.KindURL, probe.KindInterface:
		return exitUsage
	case probe.KindPermission:
		return exitPermission
	case probe.KindCapture, probe.KindStatus:
		return exitFailure
	}
	return exitNetwork
}

type exactOptions struct {
	asJSON, afterHandshake            bool
	mss, runs                         int
	tls, sni, netns, iface, userAgent string
	timeout                           time.Duration
	resolves                          []string
}

// runExact runs the active measurement of probe/exact. Bad values are refused
// before anything is said or done (exit 2); a measurement that reported no
// window (no run gave a reading, or the runs disagree) prints what each run
// saw and exits 1.
func runExact(cmd *cobra.Command, rawURL string, o exactOptions) error {
	opts := exact.Options{URL: rawURL, MSS: o.mss, Runs: o.runs, AfterHandshake: o.afterHandshake,
		TLSVersion: o.tls, ServerName: o.sni, Netns: o.netns, Interface: o.iface, Timeout: o.timeout,
		UserAgent: o.userAgent, Resolve: map[string]netip.Addr{}}
	if opts.TLSVersion == "none" || opts.TLSVersion == "any" {
		opts.TLSVersion = ""
	}
	for _, r := range o.resolves {
		key, addr, err := probe.ParseResolve(r)
		if err != nil {
			return withCode(exitUsage, err)
		}
		opts.Resolve[key] = addr
	}
	if err := opts.Check(); err != nil {
		return withCode(exitUsage, fmt.Errorf("--exact: %w", err))
	}
	if os.Geteuid() != 0 {
		return withCode(exitPermission, errors.New("--exact installs a firewall rule (nftables) and captures packets, which needs CAP_NET_ADMIN and CAP_NET_RAW: run sudo slowstart probe --exact"))
	}
	ctx := cmd.Context()
	if !o.asJSON {
		fmt.Fprintf(cmd.ErrOrStderr(), "Measuring the initial window of %s over %d fresh connections (no ACKs until the server retransmits)...\n", redact.URL(rawURL), max(o.runs, 1))
	}
	res, err := exact.Measure(ctx, opts)
	if err != nil {
		var oe *exact.OptionsError
		switch {
		case errors.As(err, &oe):
			return withCode(exitUsage, err)
		case ctx.Err() != nil:
			return interrupted("interrupted; nothing left behind (the firewall rules were removed)")
		case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM):
			return withCode(exitPermission, err)
		}
		return withCode(exitNetwork, err)
	}
	var werr error
	if o.asJSON {
		werr = writeJSON(cmd.OutOrStdout(), res)
	} else {
		werr = exact.WriteText(cmd.OutOrStdout(), res)
	}
	if werr == nil && !res.Answered() {
		return withCode(exitFailure, fmt.Errorf("the exact measurement reported no initial window (%s): %s", res.Verdict, res.Reason))
	}
	return werr
}

func runDemo(cmd *cobra.Command, asJSON bool, htmlOut string) error {
	if os.Geteuid() != 0 {
		return withCode(exitPermission, errors.New("the demo emulates a far-away server in network namespaces on this machine, which needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW): run sudo slowstart probe"))
	}
	ctx, stop, err := labContext(cmd.Context())
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintln(cmd.ErrOrStderr(), "Emulating a far-away server with IW 3, 10 and 32, then loading a page from each in Chromium (about 15 seconds)...")
	cfg := demo.Default()
	cfg.Tool = "slowstart " + version
	cfg.Packets = htmlOut != ""
	d, err := demo.Run(ctx, cfg)
	if err != nil {
		return withCode(probeExitCode(err), err)
	}
	if htmlOut != "" {
		// One page of the three connections, as if captured together.
		if err := writeHTMLFile(cmd, htmlOut, d.Output().Merged()); err != nil {
			return err
		}
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), d.Output())
	}
	return demo.WriteText(cmd.OutOrStdout(), d)
}
