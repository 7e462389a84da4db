package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/units"
)

// labPageFlags are the flags of slowstart lab page.
type labPageFlags struct {
	rtt, rate, iw, tlsVersion, chain, pageSpec, serverName string
	h2, asJSON                                             bool
	htmlOut, harPath, pcapPath, keylogPath                 string
	browser                                                browserFlags
}

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
  sudo slowstart lab page --iw 3 --rtt 150ms --h2 --server-kind nginx
  sudo slowstart lab page --page html=30KB,css@2=40KB,js=10KB,font@2=20KB,img=100KB --har-save page.har`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := labPageFlags{rtt: rtt, rate: rate, iw: iw, tlsVersion: tlsVersion, chain: chain, pageSpec: pageSpec, serverName: serverName,
				h2: h2, asJSON: asJSON, htmlOut: htmlOut, harPath: harPath, pcapPath: pcapPath, keylogPath: keylogPath, browser: bf}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return f.load(cmd, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rtt, "rtt", "130ms", "round-trip propagation delay")
	fl.StringVar(&rate, "rate", "0", "bottleneck rate each way, e.g. 15mbit; 0 for none")
	fl.StringVar(&iw, "iw", "10", "the server's initial window in segments (route initcwnd)")
	fl.StringVar(&tlsVersion, "tls", "1.3", "TLS version: none, 1.2 or 1.3")
	fl.StringVar(&chain, "chain", "4KB", "certificate chain size on the wire, with --tls")
	fl.BoolVar(&h2, "h2", false, "serve HTTP/2 (one connection a host) instead of HTTP/1.1 (up to six)")
	fl.StringVar(&serverName, "server-kind", "builtin", "the server: builtin or nginx")
	fl.StringVar(&pageSpec, "page", server.DefaultPageSpec, "the test page: KIND=SIZE items (html, css, js, async, font, img; KIND@2 on the second host)")
	fl.BoolVar(&asJSON, "json", false, "print the page load (schema slowstart.pageload/v1) with its Report")
	fl.StringVar(&htmlOut, "html", "", "also write a self-contained HTML page of the load to this file")
	fl.StringVar(&harPath, "har-save", "", "also write the load as a HAR 1.2 file with each entry's connection and rounds")
	fl.StringVar(&pcapPath, "pcap", "", "also write the capture (at the client) to this pcap file")
	fl.StringVar(&keylogPath, "keylog-save", "", "also write Chromium's TLS secrets to this file (SSLKEYLOGFILE format)")
	fl.DurationVar(&bf.wait, "wait", 500*time.Millisecond, "how long to wait after the load event for late requests")
	fl.StringVar(&bf.chromium, "chromium", browser.DefaultChromium, "the Chromium binary")
	renamed(fl, "server", "server-kind")
	renamed(fl, "har", "har-save")
	renamed(fl, "keylog", "keylog-save")
	return cmd
}

// config reads the flags into the lab server's configuration.
func (f *labPageFlags) config() (labserver.Config, error) {
	page, err := server.ParsePage(f.pageSpec)
	if err != nil {
		return labserver.Config{}, withCode(exitUsage, fmt.Errorf("--page: %w", err))
	}
	cfg := labserver.Config{Page: &page, HTTP2: f.h2}
	rttNs, err := units.ParseDuration(f.rtt)
	if err != nil {
		return cfg, withCode(exitUsage, fmt.Errorf("--rtt: %w", err))
	}
	cfg.RTT = time.Duration(rttNs)
	if cfg.RateBitsPerSecond, err = units.ParseRate(f.rate); err != nil {
		return cfg, withCode(exitUsage, fmt.Errorf("--rate: %w", err))
	}
	if _, err := fmt.Sscanf(f.iw, "%d", &cfg.IW); err != nil || cfg.IW < 1 || cfg.IW > 1000 {
		return cfg, withCode(exitUsage, fmt.Errorf("--iw %q: give a number of segments from 1 to 1000", f.iw))
	}
	if cfg.TLSVersion, cfg.ChainBytes, err = model.ParseTLS(f.tlsVersion, f.chain); err != nil {
		return cfg, withCode(exitUsage, err)
	}
	switch f.serverName {
	case "builtin":
	case "nginx":
		cfg.Nginx = true
	default:
		return cfg, withCode(exitUsage, fmt.Errorf("--server-kind %q: use builtin or nginx", f.serverName))
	}
	return cfg, nil
}

// load serves the page over its emulated path and loads it in Chromium.
func (f *labPageFlags) load(cmd *cobra.Command, cfg labserver.Config) error {
	for flag, path := range map[string]string{"html": f.htmlOut, "har-save": f.harPath, "pcap": f.pcapPath, "keylog-save": f.keylogPath} {
		if err := outpath.CheckFile(flag, path); err != nil {
			return err
		}
	}
	ctx, stop, err := labContext(cmd.Context())
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(cmd.ErrOrStderr(), "Serving %s (%s) over an emulated path (RTT %s, IW %d) and loading it in headless Chromium...\n",
		*cfg.Page, map[bool]string{true: "HTTP/2", false: "HTTP/1.1"}[f.h2], f.rtt, cfg.IW)
	res, err := labserver.LoadPage(ctx, cfg, browser.Options{Chromium: f.browser.chromium, Wait: f.browser.wait, PcapPath: f.pcapPath,
		KeylogPath: f.keylogPath, Tool: "slowstart " + version, Packets: f.htmlOut != ""})
	if ctx.Err() != nil {
		return interrupted("interrupted; the lab's namespaces were removed")
	}
	if err != nil {
		if k := browser.KindOf(err); k != "" {
			return withCode(browserExitCode(err), err)
		}
		return withCode(probeExitCode(err), err)
	}
	return writePageLoad(cmd, res.Page, f.asJSON, f.htmlOut, f.harPath)
}
