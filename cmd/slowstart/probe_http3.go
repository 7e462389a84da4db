package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/quicprobe"
	"github.com/slowstart/slowstart/report"
)

type http3Options struct {
	asJSON, exact, insecure, packets  bool
	resolves                          []string
	sni, netns, keylogPath, userAgent string
	timeout                           time.Duration
}

// runHTTP3 runs probe --http3: the QUIC probe of package probe/quicprobe.
func runHTTP3(cmd *cobra.Command, rawURL string, o http3Options) error {
	if o.exact {
		return withCode(exitUsage, errors.New("--exact --http3 is not available: see docs/quic.md for why the exact measurement is not done over QUIC"))
	}
	opts := quicprobe.Options{URL: rawURL, Insecure: o.insecure, ServerName: o.sni, Netns: o.netns, Timeout: o.timeout,
		PacketLog: o.packets, UserAgent: o.userAgent, Tool: "slowstart " + version, Resolve: map[string]netip.Addr{}}
	for _, r := range o.resolves {
		key, addr, err := probe.ParseResolve(r)
		if err != nil {
			return withCode(exitUsage, err)
		}
		opts.Resolve[key] = addr
	}
	if o.keylogPath != "" {
		f, err := os.OpenFile(o.keylogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return withCode(exitUsage, fmt.Errorf("--keylog %s: %w", o.keylogPath, err))
		}
		defer f.Close()
		opts.Keylog = f
	}
	res, err := quicprobe.Run(cmd.Context(), opts)
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
