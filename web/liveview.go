package web

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/live"
	"github.com/slowstart/slowstart/report"
)

// LiveSource is a live capture as the live view uses it: its packets, and its
// counts for the page's status line (capture.Live).
type LiveSource interface {
	analysis.PacketSource
	Stats() capture.LiveStats
}

// LiveView is the page of a live capture: each connection analyzed as it is
// finished (package live) and pushed to the page (a Feed), the capture's counts on
// its status line.
type LiveView struct {
	Source    LiveSource
	Listener  net.Listener // the page is served here
	Interface string       // what the status line says was captured
	Filter    string
	Keep      int // connections the page keeps (0: DefaultFeedKeep)
	// Analysis is the analysis of each connection (its Server filters them).
	Analysis analysis.Options
	// AnyHost serves requests for any Host (a non-loopback Listener).
	AnyHost bool
	// OnConnection is called, from one goroutine, with each connection put on the
	// page, or with the error that kept it off.
	OnConnection func(report.Connection, error)
}

// LiveSummary is what a live view showed.
type LiveSummary struct {
	Connections int
	Packets     int64 // TCP packets captured
	KernelDrops int64
}

// Run serves the page and feeds it until the capture ends (stopCapture, or the
// context of the capture, ends it) or the page server fails; then it says on the
// page that the capture stopped and stops serving. It returns the capture's error
// ("capturing on IFACE: ...") or else the page server's. stopCapture is called when the page
// server fails first.
func (v *LiveView) Run(ctx context.Context, stopCapture func()) (LiveSummary, error) {
	feed := NewFeed(v.Keep)
	status := FeedStatus{Capturing: true, Interface: v.Interface, Filter: v.Filter}
	feed.SetStatus(status)
	rep := &report.Report{
		Schema: report.Schema, Tool: v.Analysis.Tool, Connections: []report.Connection{}, Warnings: []string{},
		Source: report.Source{Kind: "live", Path: v.Interface, LinkTypes: []string{capture.LinkTypeNameRaw}, StartUnixNs: time.Now().UnixNano()},
	}
	h, err := NewLiveHandler(rep, feed, HandlerOptions{AnyHost: v.AnyHost})
	if err != nil {
		v.Listener.Close()
		return LiveSummary{}, err
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- Serve(serveCtx, v.Listener, h, nil) }()

	var ignore []netip.AddrPort
	if addr, ok := v.Listener.Addr().(*net.TCPAddr); ok {
		// The page's own traffic, when served on the captured interface, is not shown.
		ignore = append(ignore, addr.AddrPort())
	}
	watched := make(chan error, 1)
	go func() {
		watched <- live.Watch(ctx, v.Source, live.WatchOptions{Ignore: ignore, Analysis: v.Analysis}, func(c report.Connection) {
			err := feed.Put(c)
			if v.OnConnection != nil {
				v.OnConnection(c, err)
			}
		})
	}()

	summary := func() LiveSummary {
		st := v.Source.Stats()
		return LiveSummary{Connections: feed.Status().Connections, Packets: st.TCP, KernelDrops: st.KernelDrops}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var watchErr error
loop:
	for {
		select {
		case watchErr = <-watched:
			break loop
		case err := <-served:
			stopCapture()
			<-watched
			return summary(), err
		case <-tick.C:
			st := v.Source.Stats()
			status.Packets, status.KernelDrops = st.TCP, st.KernelDrops
			feed.SetStatus(status)
		}
	}
	// The capture ended (Ctrl-C, or an error): say so on the page, then stop serving.
	st := v.Source.Stats()
	status.Capturing, status.Packets, status.KernelDrops = false, st.TCP, st.KernelDrops
	status.Message = "the capture stopped"
	feed.SetStatus(status)
	stopServing()
	serveErr := <-served
	if watchErr != nil {
		return summary(), fmt.Errorf("capturing on %s: %w", v.Interface, watchErr)
	}
	return summary(), serveErr
}
