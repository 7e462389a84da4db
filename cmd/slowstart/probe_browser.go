package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/web"
)

// browserFlags are probe's flags for a page load in Chromium.
type browserFlags struct {
	browser  bool
	wait     time.Duration
	harPath  string
	chromium string
}

func (f *browserFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.browser, "browser", false, "load the whole page in headless Chromium as a first visit: every connection, every request with its rounds, the critical path to the first render (docs/browser.md)")
	fl.DurationVar(&f.wait, "wait", time.Second, "with --browser: how long to wait after the load event for late requests")
	fl.StringVar(&f.harPath, "har-save", "", "with --browser: also write the load as a HAR 1.2 file, each entry with its connection and rounds (_connection, _rounds)")
	fl.StringVar(&f.chromium, "chromium", browser.DefaultChromium, "with --browser: the Chromium binary")
}

// check refuses the --browser flags without --browser.
func (f *browserFlags) check(cmd *cobra.Command) error {
	if f.browser {
		return nil
	}
	for _, flag := range []string{"wait", "har-save", "chromium"} {
		if cmd.Flags().Changed(flag) {
			return withCode(exitUsage, fmt.Errorf("--%s goes with --browser", flag))
		}
	}
	return nil
}

// runBrowser runs probe --browser: package browser's page load.
func (f *probeVerbFlags) runBrowser(cmd *cobra.Command, rawURL string) error {
	if f.protocols != "" {
		return withCode(exitUsage, errors.New("--protocols chooses for the probe's own client: with --browser, Chromium chooses (add --http3 to let it use QUIC)"))
	}
	for _, flag := range []string{"exact", "runs", "tls", "no-compress", "header", "sni", "ipv4", "ipv6", "exact-mss", "exact-runs", "after-handshake"} {
		if cmd.Flags().Changed(flag) {
			return withCode(exitUsage, fmt.Errorf("--%s can't be used with --browser: Chromium negotiates the load itself (see docs/browser.md)", flag))
		}
	}
	if err := outpath.CheckFile("har-save", f.browser.harPath); err != nil {
		return err
	}
	if f.browser.wait < 0 {
		return withCode(exitUsage, errors.New("--wait can't be negative"))
	}
	c := f.client.o
	resolve, err := parseResolves(f.client.resolves)
	if err != nil {
		return err
	}
	opts := browser.Options{URL: rawURL, Chromium: f.browser.chromium, Netns: f.client.netns, Interface: c.Interface, Insecure: c.Insecure,
		HTTP1Only: c.HTTP1Only, HTTP3: f.http3, UserAgent: c.UserAgent, Wait: f.browser.wait, Timeout: c.Timeout,
		PcapPath: f.pcapPath, KeylogPath: f.keylogPath, Tool: "slowstart " + version, Packets: f.htmlOut != "", Resolve: resolve}
	if !f.asJSON {
		fmt.Fprintf(cmd.ErrOrStderr(), "Loading %s in headless Chromium as a first visit, capturing its connections...\n", rawURL)
	}
	res, err := browser.Load(cmd.Context(), opts)
	if cmd.Context().Err() != nil {
		return interrupted("interrupted; Chromium stopped and its profile removed")
	}
	if err != nil {
		return withCode(browserExitCode(err), err)
	}
	return writePageLoad(cmd, res.Page, f.asJSON, f.htmlOut, f.browser.harPath)
}

// writePageLoad prints a page load (text or JSON) and writes its page and HAR.
func writePageLoad(cmd *cobra.Command, page *pageload.Page, asJSON bool, htmlOut, harPath string) error {
	if harPath != "" {
		if err := har.WriteFile(harPath, page, "slowstart", version, cmd.ErrOrStderr()); err != nil {
			return err
		}
	}
	if htmlOut != "" {
		if err := web.WritePageHTMLFile(htmlOut, page.Report, page, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
			return err
		}
		for i := range page.Report.Connections {
			page.Report.Connections[i].Packets = nil
		}
	}
	if asJSON {
		return jsonout.Write(cmd.OutOrStdout(), page)
	}
	for _, w := range page.Report.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	return pageload.WriteText(cmd.OutOrStdout(), page)
}

// browserExitCode maps a page-load error to the documented exit codes.
func browserExitCode(err error) int {
	switch browser.KindOf(err) {
	case browser.KindURL, browser.KindInterface:
		return exitUsage
	case browser.KindPermission:
		return exitPermission
	case browser.KindNavigate:
		return exitNetwork
	}
	return exitFailure
}
