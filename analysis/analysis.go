// Package analysis runs the pipeline from packets to a Report: flow tracking, TLS
// record and HTTP message boundaries, rounds and the initial-window verdict. It is
// the one place that knows how those packages fit together; verbs (analyze, probe,
// view, lab) call it and read the Report it returns.
package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

// Options tune the analysis.
type Options struct {
	// Server tells which endpoint is the server where the capture lacks the SYN, and
	// (when set) limits the report to connections with that server.
	Server flow.ServerHint
	// Tool is the version string written into the Report.
	Tool string
	// Packets asks for every packet of every connection in the Report (for timelines).
	Packets bool
	// KeyLog holds TLS secrets (an NSS key log, SSLKEYLOGFILE) to decrypt with: QUIC
	// Handshake and 1-RTT packets. Nil: only what is in the clear.
	KeyLog *keylog.Log
}

// ParseServer parses "HOST", "HOST:PORT", ":PORT" or "[V6]:PORT" into a hint.
func ParseServer(s string) (flow.ServerHint, error) {
	var h flow.ServerHint
	if s == "" {
		return h, nil
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		i := strings.Index(s, "]")
		if i < 0 {
			return h, fmt.Errorf("server %q: missing ']'", s)
		}
		host, port = s[1:i], strings.TrimPrefix(s[i+1:], ":")
	} else if strings.Count(s, ":") == 1 {
		host, port, _ = strings.Cut(s, ":")
	}
	if host != "" {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return h, fmt.Errorf("server %q: %q is not an IP address", s, host)
		}
		h.Addr = a
	}
	if port != "" {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return h, fmt.Errorf("server %q: %q is not a port number", s, port)
		}
		h.Port = uint16(p)
	}
	return h, nil
}

// PacketSource is what the pipeline reads: capture.Reader, or a live source.
type PacketSource interface {
	Next(p *capture.Packet) error
}

// Result is a Report plus what the reader could say of the input.
type Result struct {
	Report *report.Report
}

// File analyzes a capture file.
func File(ctx context.Context, path string, opts Options) (*report.Report, error) {
	r, err := capture.Open(path, capture.WithUDP())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ahead := newReadAhead(ctx, r)
	rep, err := Run(ctx, ahead, opts)
	ahead.Close() // the reader's Stats are final once its goroutine is done
	st := r.Stats()
	if rep != nil {
		rep.Source = report.Source{
			Kind:        "file",
			Path:        path,
			Format:      st.Format,
			LinkTypes:   st.LinkTypes,
			Packets:     st.Records,
			TCPPackets:  st.TCP,
			Snaplen:     st.Snaplen,
			Truncated:   st.Truncated,
			StartUnixNs: st.FirstNs,
			DurationMs:  nsToMs(st.LastNs - st.FirstNs),
		}
		if st.Truncated {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the file ends in the middle of a packet record: analyzed the %d whole records before it", st.Records))
		}
		if st.Fragments > 0 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d IP fragments were not reassembled: TCP segments that travelled in fragments are missing from the analysis", st.Fragments))
		}
		if st.Undecodable > 0 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d TCP packets were cut before the end of their TCP header and were skipped", st.Undecodable))
		}
		if len(st.Skipped) == 1 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d packets in an unsupported encapsulation (%s) were skipped", st.Skipped[0].Records, st.Skipped[0].Name))
		} else if len(st.Skipped) > 1 {
			var skipped int64
			var each []string
			for _, s := range st.Skipped {
				skipped += s.Records
				each = append(each, fmt.Sprintf("%d %s", s.Records, s.Name))
			}
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d packets in unsupported encapsulations were skipped: %s", skipped, strings.Join(each, ", ")))
		}
		if st.TCP == 0 && len(rep.Connections) == 0 {
			rep.Warnings = append(rep.Warnings, "the capture holds no TCP packets and no QUIC connection")
		}
	}
	return rep, err
}

// Run analyzes every packet of src until io.EOF or ctx is done.
func Run(ctx context.Context, src PacketSource, opts Options) (*report.Report, error) {
	a := newAnalyzer(opts)
	var p capture.Packet
	var n int
	for {
		err := src.Next(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.tracker.Flush()
			return a.finish(), err
		}
		if a.firstNs == 0 {
			a.firstNs = p.TimestampNs
		}
		if p.Protocol == capture.ProtocolUDP {
			a.addDatagram(&p)
			continue
		}
		a.tracker.Add(&p)
		n++
		if n&0xffff == 0 && ctx.Err() != nil {
			a.tracker.Flush()
			return a.finish(), ctx.Err()
		}
	}
	a.tracker.Flush()
	return a.finish(), nil
}

type analyzer struct {
	opts    Options
	tracker *flow.Tracker
	quic    *quicanalysis.Analyzer // made at the first UDP datagram
	conns   []report.Connection
	firstNs int64
}

// addDatagram hands a UDP datagram to the QUIC analysis, which keeps those of
// connections that begin with a client's Initial packet.
func (a *analyzer) addDatagram(p *capture.Packet) {
	if a.quic == nil {
		a.quic = quicanalysis.New(quicanalysis.Options{Keys: a.opts.KeyLog, PacketLog: a.opts.Packets})
	}
	a.quic.Add(quicanalysis.Datagram{TimeNs: p.TimestampNs,
		Src: netip.AddrPortFrom(p.Src, p.SrcPort), Dst: netip.AddrPortFrom(p.Dst, p.DstPort), Payload: p.Payload})
}

func newAnalyzer(opts Options) *analyzer {
	a := &analyzer{opts: opts}
	a.tracker = flow.NewTracker(func(c *flow.Conn) flow.Handler {
		return newConnAnalyzer(a, c)
	}, opts.Server)
	return a
}

func (a *analyzer) add(c report.Connection) {
	if a.opts.Server.IsSet() {
		ap, err := netip.ParseAddrPort(c.Server)
		if err == nil && !a.opts.Server.Matches(ap) {
			return
		}
	}
	a.conns = append(a.conns, c)
}

func (a *analyzer) finish() *report.Report {
	if a.conns == nil {
		a.conns = []report.Connection{}
	}
	sort.Slice(a.conns, func(i, j int) bool { return a.conns[i].Index < a.conns[j].Index })
	if a.quic != nil {
		for _, c := range a.quic.ConnectionsFrom(a.firstNs) {
			a.add(c)
		}
		// TCP and QUIC connections on one axis, in order of their first packet.
		sort.SliceStable(a.conns, func(i, j int) bool { return a.conns[i].StartMs < a.conns[j].StartMs })
	}
	for i := range a.conns {
		a.conns[i].Index = i + 1
	}
	tool := a.opts.Tool
	if tool == "" {
		tool = "slowstart"
	}
	return &report.Report{
		Schema:      report.Schema,
		Tool:        tool,
		Connections: a.conns,
		Warnings:    []string{},
	}
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }
