// Package probe measures a live site as a browser's first visit sees it: it fetches
// a URL over fresh connections with Go's HTTP stack (HTTP/1.1 or HTTP/2, TLS 1.2 or
// 1.3, compression, redirects), captures the probe's own packets on the interface
// the route uses, runs them through the shared analysis, and adds what the client
// knows (DNS, connect, TLS, first and last byte from tracing hooks; the certificate
// chain; where redirects lead) and diagnoses with their cost in round trips.
//
// It is the live prober only: the built-in demo (package demo) builds on it and
// on the lab's emulated servers (package lab/labserver). It is not the active
// (exact) measurement of the initial window (see probe/exact), and it does not
// analyze packets itself (package analysis does).
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"sort"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/failure"
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/report"
)

// Result is what a probe found.
type Result struct {
	// Report holds every connection of every run and hop, in order, each with the
	// client's timing and the diagnoses; Report.Runs sums up repeated runs.
	Report *report.Report
	// Runs lists, per run, the indexes into Report.Connections of its hops, in order
	// (the last one is the page itself, the others redirects).
	Runs [][]int
	// Interface is the capture interface of the first hop.
	Interface string
	// KernelDrops counts packets the kernel dropped before the capture read them
	// (should be 0; otherwise the rounds may be wrong).
	KernelDrops uint64
}

// Final returns the connection that fetched the page itself in run (0-based), or
// nil when the run got no answer.
func (r *Result) Final(run int) *report.Connection {
	if run >= len(r.Runs) || len(r.Runs[run]) == 0 {
		return nil
	}
	hops := r.Runs[run]
	return &r.Report.Connections[hops[len(hops)-1]]
}

// packetCapture is the capture of one hop's packets, stopped after the fetch.
type packetCapture interface {
	analysis.PacketSource
	// Stop ends the capture: Next drains what was captured, then returns io.EOF.
	Stop()
	Close() error
	info() captureInfo
}

// captureInfo is what a capture says of itself.
type captureInfo struct {
	Interface   string
	LinkType    string
	Packets     uint64
	KernelDrops uint64
}

// captureOpener starts a capture of the packets to and from remote.
type captureOpener func(ctx context.Context, remote netip.AddrPort) (packetCapture, error)

// Run probes opts.URL opts.Runs times, each over fresh connections, following
// redirects. It needs the privileges of a live capture (CAP_NET_RAW, and
// CAP_SYS_ADMIN with Netns). On failure the Result holds what was done before.
func Run(ctx context.Context, opts Options) (*Result, error) {
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	if _, err := parseTarget(o.URL); err != nil {
		return nil, err
	}
	files, err := openOutputs(&o)
	if err != nil {
		return nil, err
	}
	res, runErr := run(ctx, &o, files.opener(ctx, &o), files.keylog)
	if err := files.close(); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

// run is Run with the capture and the key log given, so that tests can replace them.
func run(ctx context.Context, o *Options, open captureOpener, keylog io.Writer) (*Result, error) {
	first, err := parseTarget(o.URL)
	if err != nil {
		return nil, err
	}
	res := &Result{Report: &report.Report{Schema: report.Schema, Tool: o.Tool,
		Source: report.Source{Kind: "live"}, Connections: []report.Connection{}, Warnings: []string{}}}
	var startNs, endNs int64
	linkTypes := map[string]bool{}
	var runErr error
	for runIndex := 1; runIndex <= o.Runs && runErr == nil; runIndex++ {
		var hops []int
		t := first
		for hopIndex := 1; ; hopIndex++ {
			if hopIndex > MaxRedirects+1 {
				runErr = failure.New(KindRedirect, "%s: stopped after %d redirects (a redirect loop?); the last one pointed to %s", o.URL, MaxRedirects, t.url)
				break
			}
			conn, next, info, err := probeHop(ctx, o, open, keylog, t)
			if conn != nil {
				conn.ClientTiming.Run, conn.ClientTiming.Hop = runIndex, hopIndex
				if startNs == 0 || conn.ClientTiming.StartUnixNs < startNs {
					startNs = conn.ClientTiming.StartUnixNs
				}
				endNs = max(endNs, conn.ClientTiming.StartUnixNs+int64(conn.ClientTiming.LastByteAtMs*1e6))
				hops = append(hops, len(res.Report.Connections))
				res.Report.Connections = append(res.Report.Connections, *conn)
			}
			if info.Interface != "" && res.Interface == "" {
				res.Interface = info.Interface
			}
			if info.LinkType != "" {
				linkTypes[info.LinkType] = true
			}
			res.KernelDrops += info.KernelDrops
			res.Report.Source.Packets += int64(info.Packets)
			if err != nil {
				runErr = err
				break
			}
			if next == nil {
				break
			}
			if t, err = parseTarget(next.String()); err != nil {
				runErr = failure.New(KindHTTP, "%s redirects to %s, which can't be probed: %v", o.URL, next, err)
				break
			}
		}
		if len(hops) > 0 {
			res.Runs = append(res.Runs, hops)
		}
	}
	rep := res.Report
	for i := range rep.Connections {
		c := &rep.Connections[i]
		c.Index = i + 1
		// The requests the capture shows are the probe's own: their paths
		// carry the URL's query, printed and stored redacted like the URL.
		for j := range c.HTTP {
			c.HTTP[j].Path = redact.URL(c.HTTP[j].Path)
		}
		// Hop captures each start at their own first packet: put every connection on
		// one time axis, from the probe's first request.
		c.StartMs += float64(c.ClientTiming.StartUnixNs-startNs)/1e6 + (c.ClientTiming.ConnectAtMs - c.ClientTiming.ConnectMs)
	}
	rep.Source.StartUnixNs = startNs
	rep.Source.DurationMs = float64(endNs-startNs) / 1e6
	for lt := range linkTypes {
		rep.Source.LinkTypes = append(rep.Source.LinkTypes, lt)
	}
	sort.Strings(rep.Source.LinkTypes)
	if res.KernelDrops > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the kernel dropped %d packets before the capture read them: rounds may be wrong; probe again", res.KernelDrops))
	}
	if statusErr := errorStatus(res); statusErr != nil {
		rep.Warnings = append(rep.Warnings, statusErr.Error())
		if runErr == nil {
			runErr = statusErr
		}
	}
	addDiagnoses(res, o)
	if o.Runs > 1 {
		rep.Runs = summarizeRuns(res)
	}
	return res, runErr
}

// errorStatus returns a KindStatus error when a run's page (its final hop)
// answered with an HTTP status of 400 or more.
func errorStatus(res *Result) error {
	for run := range res.Runs {
		c := res.Final(run)
		if c == nil || c.ClientTiming == nil || c.ClientTiming.Status < 400 {
			continue
		}
		t := c.ClientTiming
		return failure.New(KindStatus, "%s answered with HTTP status %d: it was measured, but the rounds are those of this error answer, not of the page (check the URL)", t.URL, t.Status)
	}
	return nil
}

// probeHop resolves, captures and fetches one URL, and returns its connection as
// the analysis saw it with the client's timing, and where it redirects to.
func probeHop(ctx context.Context, o *Options, open captureOpener, keylog io.Writer, t target) (*report.Connection, *url.URL, captureInfo, error) {
	h, err := resolve(ctx, o, t)
	if err != nil {
		return nil, nil, captureInfo{}, err
	}
	if o.IPVersion == IPv4 && !h.addr.Is4() || o.IPVersion == IPv6 && !h.addr.Is6() {
		return nil, nil, captureInfo{}, failure.New(KindURL, "%s: the address %s is not IPv%d", t.url, h.addr, o.IPVersion)
	}
	capt, err := open(ctx, netip.AddrPortFrom(h.addr, t.port))
	if err != nil {
		return nil, nil, captureInfo{}, err
	}
	type analyzed struct {
		rep *report.Report
		err error
	}
	done := make(chan analyzed, 1)
	go func() {
		rep, err := analysis.Run(ctx, capt, analysis.Options{Tool: o.Tool, Packets: o.Packets})
		done <- analyzed{rep, err}
	}()
	got, fetchErr := fetch(ctx, o, h, keylog)
	capt.Stop()
	a := <-done
	info := capt.info()
	if err := capt.Close(); err != nil {
		o.Logger.Debug("closing the capture", "error", err)
	}
	if got.timing.Local == "" {
		// No connection was made: nothing of it to report.
		return nil, nil, info, fetchErr
	}
	if a.err != nil && !errors.Is(a.err, io.EOF) && fetchErr == nil {
		fetchErr = &Error{Kind: KindCapture, Err: fmt.Errorf("reading the capture on %s: %w", info.Interface, a.err)}
	}
	conn := matchConnection(a.rep, got.timing.Local)
	if conn == nil {
		conn = &report.Connection{Client: got.timing.Local, Server: got.timing.Remote, Vantage: report.VantageClient,
			Closed: "open", Rounds: []report.Round{}, HTTP: []report.HTTPMessage{},
			Notes: []string{fmt.Sprintf("the capture on %s holds no packet of this connection: its rounds are unknown", info.Interface)}}
	}
	timing := got.timing
	conn.ClientTiming = &timing
	if timing.Incomplete != "" {
		analysis.MarkIncomplete(conn, timing.Incomplete)
	}
	var next *url.URL
	if got.location != nil {
		next = got.location
	}
	return conn, next, info, fetchErr
}

// matchConnection finds the connection whose client is local (ip:port).
func matchConnection(rep *report.Report, local string) *report.Connection {
	if rep == nil {
		return nil
	}
	want, err := netip.ParseAddrPort(local)
	if err != nil {
		return nil
	}
	want = netip.AddrPortFrom(want.Addr().Unmap(), want.Port())
	for i := range rep.Connections {
		c := rep.Connections[i]
		got, err := netip.ParseAddrPort(c.Client)
		if err == nil && netip.AddrPortFrom(got.Addr().Unmap(), got.Port()) == want {
			return &c
		}
	}
	return nil
}

// outputs are the files a probe writes besides its report.
type outputs struct {
	keylogFile *os.File
	keylog     io.Writer
	pcap       *pcapSink
}

func openOutputs(o *Options) (*outputs, error) {
	out := &outputs{}
	if o.KeylogPath != "" {
		f, err := privatefile.Append(o.KeylogPath) // made 0600, or tightened to it
		if err != nil {
			return nil, failure.New(KindURL, "--keylog-save %s: %v", o.KeylogPath, err)
		}
		out.keylogFile, out.keylog = f, f
	}
	if o.PcapPath != "" {
		p, err := newPcapSink(o.PcapPath)
		if err != nil {
			out.close()
			return nil, failure.New(KindURL, "--pcap %s: %v", o.PcapPath, err)
		}
		out.pcap = p
	}
	return out, nil
}

func (out *outputs) close() error {
	var errs []error
	if out.keylogFile != nil {
		errs = append(errs, out.keylogFile.Close())
	}
	if out.pcap != nil {
		errs = append(errs, out.pcap.close())
	}
	return errors.Join(errs...)
}
