package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/internal/jsonout"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/probe"
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
	fl.StringVar(&f.harPath, "har", "", "with --browser: also write the load as a HAR 1.2 file, each entry with its connection and rounds (_connection, _rounds)")
	fl.StringVar(&f.chromium, "chromium", browser.DefaultChromium, "with --browser: the Chromium binary")
}

// check refuses the --browser flags without --browser.
func (f *browserFlags) check(cmd *cobra.Command) error {
	if f.browser {
		return nil
	}
	for _, flag := range []string{"wait", "har", "chromium"} {
		if cmd.Flags().Changed(flag) {
			return withCode(exitUsage, fmt.Errorf("--%s goes with --browser", flag))
		}
	}
	return nil
}

// browserRun is what runBrowser needs of probe's flags.
type browserRun struct {
	flags                                                  browserFlags
	asJSON, insecure, http1, http3                         bool
	htmlOut, netns, iface, userAgent, pcapPath, keylogPath string
	resolves                                               []string
	timeout                                                time.Duration
}

// runBrowser runs probe --browser: package browser's page load.
func runBrowser(cmd *cobra.Command, rawURL string, o browserRun) error {
	for _, flag := range []string{"exact", "runs", "tls", "no-compress", "header", "sni", "ipv4", "ipv6", "mss", "exact-runs", "after-handshake"} {
		if cmd.Flags().Changed(flag) {
			return withCode(exitUsage, fmt.Errorf("--%s can't be used with --browser: Chromium negotiates the load itself (see docs/browser.md)", flag))
		}
	}
	if err := outpath.CheckFile("har", o.flags.harPath); err != nil {
		return err
	}
	if o.flags.wait < 0 {
		return withCode(exitUsage, errors.New("--wait can't be negative"))
	}
	opts := browser.Options{URL: rawURL, Chromium: o.flags.chromium, Netns: o.netns, Interface: o.iface, Insecure: o.insecure,
		HTTP1Only: o.http1, HTTP3: o.http3, UserAgent: o.userAgent, Wait: o.flags.wait, Timeout: o.timeout,
		PcapPath: o.pcapPath, KeylogPath: o.keylogPath, Tool: "slowstart " + version, Packets: o.htmlOut != "",
		Resolve: map[string]netip.Addr{}}
	for _, r := range o.resolves {
		key, addr, err := probe.ParseResolve(r)
		if err != nil {
			return withCode(exitUsage, err)
		}
		opts.Resolve[key] = addr
	}
	if !o.asJSON {
		fmt.Fprintf(cmd.ErrOrStderr(), "Loading %s in headless Chromium as a first visit, capturing its connections...\n", rawURL)
	}
	res, err := browser.Load(cmd.Context(), opts)
	if cmd.Context().Err() != nil {
		return interrupted("interrupted; Chromium stopped and its profile removed")
	}
	if err != nil {
		return withCode(browserExitCode(err), err)
	}
	return writePageLoad(cmd, res.Page, o.asJSON, o.htmlOut, o.flags.harPath)
}

// writePageLoad prints a page load (text or JSON) and writes its page and HAR.
func writePageLoad(cmd *cobra.Command, page *pageload.Page, asJSON bool, htmlOut, harPath string) error {
	if harPath != "" {
		if err := writeHARFile(cmd, harPath, page); err != nil {
			return err
		}
	}
	if htmlOut != "" {
		if err := writePageHTMLFile(cmd, htmlOut, page); err != nil {
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

// writeHARFile writes the page load as a HAR file.
func writeHARFile(cmd *cobra.Command, path string, page *pageload.Page) error {
	f, err := os.Create(path)
	if err != nil {
		return fileError(fmt.Errorf("--har: %w", err))
	}
	if err := har.Write(f, har.FromPage(page, "slowstart", version)); err != nil {
		f.Close()
		return fileError(fmt.Errorf("--har: %w", err))
	}
	if err := f.Close(); err != nil {
		return fileError(fmt.Errorf("--har: %w", err))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: wrote %s (HAR 1.2, %d entries)\n", path, len(page.Requests))
	return nil
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

// writePageHTMLFile writes the self-contained page of a page load ('-': standard
// output).
func writePageHTMLFile(cmd *cobra.Command, path string, page *pageload.Page) error {
	if path == "-" {
		return web.WritePageHTML(cmd.OutOrStdout(), page.Report, page)
	}
	var b bytes.Buffer
	if err := web.WritePageHTML(&b, page.Report, page); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fileError(fmt.Errorf("writing the page: %w", err))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: wrote %s (%s); open it in a browser\n", path, sizeText(b.Len()))
	return nil
}
