package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/demo"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/probe/quicprobe"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

// probeVerbFlags are the flags of slowstart probe beyond its HTTP client's.
type probeVerbFlags struct {
	client               probeFlags
	asJSON               bool
	pcapPath, keylogPath string
	htmlOut              string
	exactMode, afterHS   bool
	exactMSS, exactRuns  int
	http3                bool
	protocols            string
	browser              browserFlags
}

func newProbeCommand() *cobra.Command {
	var f probeVerbFlags
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
  sudo slowstart probe https://example.com/ --tls 1.2 --http1.1 --pcap page.pcap --keylog-save keys.txt
  sudo slowstart probe --exact http://example.com/a-long-path-that-gives-a-404
  sudo slowstart probe --exact https://example.com/       # the TLS flight, 3 runs
  sudo slowstart probe https://www.example.com/ --resolve www.example.com:443:192.0.2.7
  sudo slowstart probe https://example.com/ --protocols h3,h2,h1   # TCP, then HTTP/3 if advertised
  sudo slowstart probe --browser https://example.com/ --har-save page.har   # the whole page in Chromium`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			if len(args) == 0 {
				return f.demo(cmd)
			}
			return f.run(cmd, args[0])
		},
	}
	fl := cmd.Flags()
	o := &f.client.o
	fl.BoolVar(&f.asJSON, "json", false, "print the Report (schema slowstart.report/v1) with the client's timings and the diagnoses")
	fl.StringVar(&o.TLSVersion, "tls", "", "allow only this TLS version: 1.2 or 1.3 (default: both)")
	fl.BoolVar(&o.HTTP1Only, "http1.1", false, "do not offer HTTP/2")
	fl.BoolVar(&o.NoCompress, "no-compress", false, "ask for an uncompressed body (Accept-Encoding: identity)")
	fl.BoolVarP(&f.client.ipv4, "ipv4", "4", false, "connect over IPv4 only")
	fl.BoolVarP(&f.client.ipv6, "ipv6", "6", false, "connect over IPv6 only")
	fl.StringArrayVar(&f.client.resolves, "resolve", nil, "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS (repeatable)")
	fl.StringArrayVarP(&f.client.headers, "header", "H", nil, `extra request header "Name: value" (repeatable)`)
	fl.StringVar(&o.UserAgent, "user-agent", "", "User-Agent (default: a desktop browser's)")
	fl.StringVar(&o.ServerName, "sni", "", "TLS server name to send (default: the URL's host)")
	fl.BoolVarP(&o.Insecure, "insecure", "k", false, "do not verify the server's certificate")
	fl.DurationVar(&o.Timeout, "timeout", 30*time.Second, "give up on a request after this long")
	fl.IntVar(&o.Runs, "runs", 1, "fetch N times, each over fresh connections: min, median, mode and spread of the IW")
	addNetnsFlag(fl, &f.client.netns)
	fl.StringVar(&o.Interface, "interface", "", "capture on this interface (default: the one the route to the server uses)")
	fl.StringVar(&f.pcapPath, "pcap", "", "also write the captured packets to this pcap file (for Wireshark)")
	fl.StringVar(&f.htmlOut, "html", "", "also write a self-contained HTML page of the probe's connections (works offline) to this file")
	fl.BoolVar(&f.exactMode, "exact", false, "measure the initial window actively: a small announced MSS, no ACKs, count the distinct bytes until the first retransmission (the TLS flight over https://)")
	fl.IntVar(&f.exactMSS, "exact-mss", 64, "with --exact: the MSS announced in the SYN, in bytes (48 to 1460)")
	fl.IntVar(&f.exactRuns, "exact-runs", 3, "with --exact: fresh connections to measure; the IW is reported only when they agree")
	fl.BoolVar(&f.afterHS, "after-handshake", false, "with --exact over https://: complete the TLS handshake, then count the HTTP response (the window after the handshake, not the IW)")
	fl.BoolVar(&f.http3, "http3", false, "fetch over HTTP/3 (QUIC) instead: the handshake's round trips, the amplification limit, the server's first flight and initial window (docs/quic.md)")
	fl.StringVar(&f.protocols, "protocols", "", "the protocols the probe may use, in order of preference: h3, h2, h1 (default h2,h1). With h3 and h2 or h1 it goes as a browser does: over TCP first, then, if the response advertises HTTP/3 (Alt-Svc), the page again over QUIC as the next connection would; over QUIC first when h3 leads and the site's HTTPS DNS record lists h3 (docs/quic.md)")
	fl.StringVar(&f.keylogPath, "keylog-save", "", "append the TLS secrets to this file (SSLKEYLOGFILE format), so Wireshark can decrypt the pcap")
	f.browser.register(cmd)
	renamed(fl, "mss", "exact-mss")
	renamed(fl, "keylog", "keylog-save")
	renamed(fl, "har", "har-save")
	return cmd
}

// check reads what every form of probe checks first: the namespace, the
// files to write, the namespace's stale firewall tables, the --browser flags.
func (f *probeVerbFlags) check(cmd *cobra.Command) error {
	var err error
	if f.client.netns, err = netnsPath(f.client.netns); err != nil {
		return err
	}
	for flag, path := range map[string]string{"pcap": f.pcapPath, "html": f.htmlOut, "keylog-save": f.keylogPath} {
		if err := outpath.CheckFile(flag, path); err != nil {
			return err
		}
	}
	exact.CleanStale(cmd.Context(), f.client.netns, cmd.ErrOrStderr())
	return f.browser.check(cmd)
}

// demo runs the demo (no URL), which --browser does not take.
func (f *probeVerbFlags) demo(cmd *cobra.Command) error {
	if f.browser.browser {
		return withCode(exitUsage, errors.New("--browser needs a URL (with no URL, probe runs the demo, which loads its page in Chromium by itself)"))
	}
	return runDemo(cmd, f.asJSON, f.htmlOut)
}

// run probes url in the form the flags choose: in Chromium, over HTTP/3,
// exactly, over a choice of protocols, or over TCP.
func (f *probeVerbFlags) run(cmd *cobra.Command, url string) error {
	if f.browser.browser {
		return f.runBrowser(cmd, url)
	}
	choose, err := f.chooseProtocols()
	if err != nil {
		return err
	}
	ctx, out, errOut := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case f.http3:
		return f.runHTTP3(ctx, url, out, errOut)
	case f.exactMode:
		return f.runExact(ctx, url, out, errOut)
	}
	opts, err := f.client.options(url)
	if err != nil {
		return err
	}
	opts.Netns, opts.PcapPath, opts.KeylogPath, opts.Packets = f.client.netns, f.pcapPath, f.keylogPath, f.htmlOut != ""
	if choose != nil {
		return f.runChoice(ctx, choose, opts, out, errOut)
	}
	return probeError(probe.Print(ctx, opts, f.asJSON, f.writeHTML(out, errOut), out, errOut))
}

// chooseProtocols reads --protocols: the protocols to choose among (nil for
// one protocol, which sets --http3 or --http1.1).
func (f *probeVerbFlags) chooseProtocols() ([]string, error) {
	if f.protocols == "" {
		return nil, nil
	}
	list, err := quicprobe.ParseProtocols(f.protocols)
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("--protocols: %w", err))
	}
	if f.http3 || f.client.o.HTTP1Only {
		return nil, withCode(exitUsage, errors.New("--protocols replaces --http3 and --http1.1: give only --protocols"))
	}
	hasH3, hasH2 := slices.Contains(list, quicprobe.ProtocolH3), slices.Contains(list, quicprobe.ProtocolH2)
	hasTCP := hasH2 || slices.Contains(list, quicprobe.ProtocolH1)
	switch {
	case hasH3 && hasTCP && f.exactMode:
		return nil, withCode(exitUsage, errors.New("--exact measures over one protocol: give --protocols h3 (or --http3) for QUIC, h2,h1 for TCP"))
	case hasH3 && !hasTCP:
		f.http3 = true
	case hasH3:
		return list, nil
	default:
		f.client.o.HTTP1Only = !hasH2
	}
	return nil, nil
}

// writeHTML writes the page of a Report to --html; nil without it.
func (f *probeVerbFlags) writeHTML(out, errOut io.Writer) func(*report.Report) error {
	if f.htmlOut == "" {
		return nil
	}
	return func(rep *report.Report) error { return web.WriteHTMLFile(f.htmlOut, rep, out, errOut) }
}

// runExact runs the active measurement of probe/exact.
func (f *probeVerbFlags) runExact(ctx context.Context, url string, out, errOut io.Writer) error {
	o := f.client.o
	resolve, err := parseResolves(f.client.resolves)
	if err != nil {
		return err
	}
	return exact.Print(ctx, exact.Options{URL: url, MSS: f.exactMSS, Runs: f.exactRuns, AfterHandshake: f.afterHS,
		TLSVersion: o.TLSVersion, ServerName: o.ServerName, Netns: f.client.netns, Interface: o.Interface, Timeout: o.Timeout,
		UserAgent: o.UserAgent, Resolve: resolve}, f.asJSON, out, errOut)
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

// runDemo runs the built-in demo (probe with no URL).
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
		if err := web.WriteHTMLFile(htmlOut, d.Output().Merged(), cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
			return err
		}
	}
	if asJSON {
		return jsonout.Write(cmd.OutOrStdout(), d.Output())
	}
	return demo.WriteText(cmd.OutOrStdout(), d)
}
