package main

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/quicprobe"
	"github.com/slowstart/slowstart/report"
)

type http3Options struct {
	asJSON, exact, insecure, packets  bool
	exactRuns                         int
	resolves                          []string
	sni, netns, keylogPath, userAgent string
	timeout                           time.Duration
}

// runHTTP3 runs probe --http3: a fetch with the HTTP/3 client of package h3client.
func runHTTP3(cmd *cobra.Command, rawURL string, o http3Options) error {
	opts, closeKeylog, err := o.quicOptions(rawURL)
	if err != nil {
		return err
	}
	defer closeKeylog()
	if o.exact {
		return runExactHTTP3(cmd, rawURL, opts, o)
	}
	res, err := h3client.Run(cmd.Context(), opts)
	if res != nil && res.Report != nil && len(res.Report.Connections) > 0 {
		var werr error
		if o.asJSON {
			werr = report.WriteJSON(cmd.OutOrStdout(), res.Report)
		} else {
			werr = report.WriteText(cmd.OutOrStdout(), res.Report)
		}
		if err == nil {
			err = werr
		}
	}
	if err != nil {
		return withCode(exitNetwork, err)
	}
	return nil
}

// quicOptions makes the HTTP/3 probe's options; the key log is opened for appending
// when the probe first writes to it, and closed by the function returned.
func (o http3Options) quicOptions(rawURL string) (h3client.Options, func(), error) {
	opts := h3client.Options{URL: rawURL, Insecure: o.insecure, ServerName: o.sni, Netns: o.netns, Timeout: o.timeout,
		PacketLog: o.packets, UserAgent: o.userAgent, Tool: "slowstart " + version, Resolve: map[string]netip.Addr{}}
	for _, r := range o.resolves {
		key, addr, err := probe.ParseResolve(r)
		if err != nil {
			return opts, nil, withCode(exitUsage, err)
		}
		opts.Resolve[key] = addr
	}
	var f *os.File
	closeKeylog := func() {
		if f != nil {
			f.Close()
		}
	}
	if o.keylogPath != "" {
		opts.Keylog = keylogAppender(func() (*os.File, error) {
			if f == nil {
				var err error
				if f, err = privatefile.Append(o.keylogPath); err != nil {
					return nil, err
				}
			}
			return f, nil
		})
	}
	return opts, closeKeylog, nil
}

// keylogAppender writes to the file its function opens on the first write.
type keylogAppender func() (*os.File, error)

func (k keylogAppender) Write(b []byte) (int, error) {
	f, err := k()
	if err != nil {
		return 0, err
	}
	return f.Write(b)
}

// runChoice probes as a browser speaking these protocols does (quicprobe.Choose):
// over TCP first, then over HTTP/3 when the response advertises it, or over QUIC
// first when the site's HTTPS record lists h3 before the rest.
func runChoice(cmd *cobra.Command, protocols []string, tcp probe.Options, o http3Options, htmlOut string) error {
	h3, closeKeylog, err := o.quicOptions(tcp.URL)
	if err != nil {
		return err
	}
	defer closeKeylog()
	ch, err := quicprobe.Choose(cmd.Context(), quicprobe.ChooseOptions{Protocols: protocols, TCP: tcp, HTTP3: h3})
	if cmd.Context().Err() != nil {
		return interrupted("interrupted; nothing left behind")
	}
	if ch != nil && ch.Report != nil {
		for _, w := range ch.Report.Warnings {
			if err != nil && w == err.Error() {
				continue
			}
			fmt.Fprintf(os.Stderr, "slowstart: warning: %s\n", textsafe.Escape(w))
		}
		var werr error
		if o.asJSON {
			werr = report.WriteJSON(cmd.OutOrStdout(), ch.Report)
		} else {
			werr = quicprobe.WriteChoiceText(cmd.OutOrStdout(), ch)
		}
		if err == nil {
			err = werr
		}
		if htmlOut != "" && err == nil {
			err = writeHTMLFile(cmd, htmlOut, ch.Report)
		}
	}
	return withCode(probeExitCode(err), err)
}

// runExactHTTP3 measures the initial window actively over HTTP/3 (quicprobe.Exact),
// o.exactRuns times over fresh connections.
func runExactHTTP3(cmd *cobra.Command, rawURL string, opts h3client.Options, o http3Options) error {
	runs := max(o.exactRuns, 1)
	if !o.asJSON {
		fmt.Fprintf(cmd.ErrOrStderr(), "Measuring the initial window of %s over HTTP/3, %d fresh connections (nothing acknowledged after the request)...\n", rawURL, runs)
	}
	var results []*quicprobe.ExactResult
	rep := &report.Report{Schema: report.Schema, Tool: "slowstart " + version, Source: report.Source{Kind: "live", LinkTypes: []string{"socket"}},
		Connections: []report.Connection{}, Warnings: []string{}}
	var lastErr error
	for range runs {
		r, err := quicprobe.Exact(cmd.Context(), opts)
		if cmd.Context().Err() != nil {
			return interrupted("interrupted; nothing left behind")
		}
		if err != nil {
			lastErr = err
		}
		if r == nil {
			continue
		}
		results = append(results, r)
		if r.Probe != nil && r.Probe.Report != nil {
			for _, c := range r.Probe.Report.Connections {
				c.Index = len(rep.Connections) + 1
				c.InitialWindow = r.InitialWindow()
				rep.Connections = append(rep.Connections, c)
			}
			if rep.Source.StartUnixNs == 0 {
				rep.Source.StartUnixNs = r.Probe.Report.Source.StartUnixNs
			}
		}
	}
	if len(results) == 0 {
		return withCode(exitNetwork, lastErr)
	}
	if o.asJSON {
		return report.WriteJSON(cmd.OutOrStdout(), rep)
	}
	return quicprobe.WriteExactText(cmd.OutOrStdout(), rawURL, results)
}
