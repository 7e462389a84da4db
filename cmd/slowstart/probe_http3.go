package main

import (
	"context"
	"io"

	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/quicprobe"
)

// quicOptions reads the flags of the HTTP/3 probe of url; its key log is
// opened for appending when the probe first writes to it.
func (f *probeVerbFlags) quicOptions(url string) (h3client.Options, *quicprobe.KeylogFile, error) {
	o := f.client.o
	resolve, err := parseResolves(f.client.resolves)
	if err != nil {
		return h3client.Options{}, nil, err
	}
	opts := h3client.Options{URL: url, Insecure: o.Insecure, ServerName: o.ServerName, Netns: f.client.netns, Timeout: o.Timeout,
		PacketLog: f.htmlOut != "", UserAgent: o.UserAgent, Tool: "slowstart " + version, Resolve: resolve}
	keys := &quicprobe.KeylogFile{Path: f.keylogPath}
	if f.keylogPath != "" {
		opts.Keylog = keys
	}
	return opts, keys, nil
}

// runHTTP3 runs probe --http3: the QUIC probe of package probe/quicprobe.
func (f *probeVerbFlags) runHTTP3(ctx context.Context, url string, out, errOut io.Writer) error {
	opts, keys, err := f.quicOptions(url)
	if err != nil {
		return err
	}
	defer keys.Close()
	if f.exactMode {
		return quicprobe.PrintExact(ctx, opts, f.exactRuns, f.asJSON, out, errOut)
	}
	return quicprobe.Print(ctx, opts, f.asJSON, out)
}

// runChoice probes as a browser speaking these protocols does (quicprobe.Choose).
func (f *probeVerbFlags) runChoice(ctx context.Context, protocols []string, tcp probe.Options, out, errOut io.Writer) error {
	h3, keys, err := f.quicOptions(tcp.URL)
	if err != nil {
		return err
	}
	defer keys.Close()
	return probeError(quicprobe.PrintChoice(ctx, quicprobe.ChooseOptions{Protocols: protocols, TCP: tcp, HTTP3: h3},
		f.asJSON, f.writeHTML(out, errOut), out, errOut))
}
