package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/units"
)

func newLabPageCommand() *cobra.Command {
	var (
		rtt, rate, iw, tlsVersion, chain, pageSpec, serverName string
		h2, asJSON                                             bool
		htmlOut, harPath, pcapPath, keylogPath                 string
		bf                                                     browserFlags
	)
	cmd := &cobra.Command{
		Use:   "page",
		Short: "Serve a test page over an emulated path and load it in headless Chromium",
		Long: `Emulate a far-away server on this machine (the lab's namespaces and link
emulator, the route's initcwnd set to --iw), serve a test page from it with the
built-in server or nginx, over HTTP/1.1 (a browser opens up to six connections a
host) or HTTP/2, and load it in headless Chromium from the client namespace as
probe --browser does: every connection, every request on its connection with its
rounds, the critical path to the first render.

The page (--page) is a list of KIND=SIZE: html (the document), css and js (named
in its head: render-blocking), async (a script with async), font (named by the
first stylesheet, used by the text), img (in the body); KIND@2=SIZE serves it from
a second host name (another origin, with connections of its own), as a CDN would.

` + units.Help,
		Example: `  sudo slowstart lab page
  sudo slowstart lab page --iw 3 --rtt 150ms --h2 --server nginx
  sudo slowstart lab page --page html=30KB,css@2=40KB,js=10KB,font@2=20KB,img=100KB --har page.har`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			page, err := server.ParsePage(pageSpec)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--page: %w", err))
			}
			cfg := labserver.Config{Page: &page, HTTP2: h2}
			rttNs, err := units.ParseDuration(rtt)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--rtt: %w", err))
			}
			cfg.RTT = time.Duration(rttNs)
			if cfg.RateBitsPerSecond, err = units.ParseRate(rate); err != nil {
				return withCode(exitUsage, fmt.Errorf("--rate: %w", err))
			}
			if _, err := fmt.Sscanf(iw, "%d", &cfg.IW); err != nil || cfg.IW < 1 || cfg.IW > 1000 {
				return withCode(exitUsage, fmt.Errorf("--iw %q: give a number of segments from 1 to 1000", iw))
			}
			switch tlsVersion {
			case "none", "":
			case "1.2", "1.3":
				cfg.TLSVersion = tlsVersion
				chainBytes, err := units.ParseSize(chain)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--chain: %w", err))
				}
				cfg.ChainBytes = int(chainBytes)
			default:
				return withCode(exitUsage, fmt.Errorf("--tls %q: use none, 1.2 or 1.3", tlsVersion))
			}
			switch serverName {
			case "builtin":
			case "nginx":
				cfg.Nginx = true
			default:
				return withCode(exitUsage, fmt.Errorf("--server %q: use builtin or nginx", serverName))
			}
			for flag, path := range map[string]string{"html": htmlOut, "har": harPath, "pcap": pcapPath, "keylog": keylogPath} {
				if err := checkOutputFile(flag, path); err != nil {
					return err
				}
			}
			ctx, stop, err := labContext(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "Serving %s (%s) over an emulated path (RTT %s, IW %d) and loading it in headless Chromium...\n",
				page, map[bool]string{true: "HTTP/2", false: "HTTP/1.1"}[h2], rtt, cfg.IW)
			res, err := labserver.LoadPage(ctx, cfg, browser.Options{Chromium: bf.chromium, Wait: bf.wait, PcapPath: pcapPath,
				KeylogPath: keylogPath, Tool: "slowstart " + version, Packets: htmlOut != ""})
			if ctx.Err() != nil {
				return interrupted("interrupted; the lab's namespaces were removed")
			}
			if err != nil {
				if k := browser.KindOf(err); k != "" {
					return withCode(browserExitCode(err), err)
				}
				return withCode(probeExitCode(err), err)
			}
			return writePageLoad(cmd, res.Page, asJSON, htmlOut, harPath)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rtt, "rtt", "100ms", "round-trip propagation delay")
	fl.StringVar(&rate, "rate", "0", "bottleneck rate each way, e.g. 15mbit; 0 for none")
	fl.StringVar(&iw, "iw", "10", "the server's initial window in segments (route initcwnd)")
	fl.StringVar(&tlsVersion, "tls", "1.3", "TLS version: none, 1.2 or 1.3")
	fl.StringVar(&chain, "chain", "4KB", "certificate chain size on the wire, with --tls")
	fl.BoolVar(&h2, "h2", false, "serve HTTP/2 (one connection a host) instead of HTTP/1.1 (up to six)")
	fl.StringVar(&serverName, "server", "builtin", "server: builtin or nginx")
	fl.StringVar(&pageSpec, "page", server.DefaultPageSpec, "the test page: KIND=SIZE items (html, css, js, async, font, img; KIND@2 on the second host)")
	fl.BoolVar(&asJSON, "json", false, "print the page load (schema slowstart.pageload/v1) with its Report")
	fl.StringVar(&htmlOut, "html", "", "also write a self-contained HTML page of the load to this file")
	fl.StringVar(&harPath, "har", "", "also write the load as a HAR 1.2 file with each entry's connection and rounds")
	fl.StringVar(&pcapPath, "pcap", "", "also write the capture (at the client) to this pcap file")
	fl.StringVar(&keylogPath, "keylog", "", "also write Chromium's TLS secrets to this file (SSLKEYLOGFILE format)")
	fl.DurationVar(&bf.wait, "wait", 500*time.Millisecond, "how long to wait after the load event for late requests")
	fl.StringVar(&bf.chromium, "chromium", browser.DefaultChromium, "the Chromium binary")
	return cmd
}
