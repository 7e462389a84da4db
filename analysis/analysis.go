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
	"time"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
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
	// KeyLog holds TLS secrets (an NSS key log, SSLKEYLOGFILE) to decrypt with: TLS
	// records (HTTP requests inside, with their rounds) and QUIC Handshake and 1-RTT
	// packets. Nil: only what is in the clear.
	KeyLog *keylog.Log
	// PacketCap bounds each connection's packet list (with Packets): past it the
	// list keeps one packet in two, then four..., spread over the connection
	// (Connection.PacketStride says which). 0: DefaultPacketCap.
	PacketCap int
}

// DefaultPacketCap is the per-connection packet list's default bound: enough for
// a time-sequence graph of a 30 MB transfer packet by packet.
const DefaultPacketCap = 20000

func (o *Options) packetCap() int {
	if o.PacketCap > 0 {
		return o.PacketCap
	}
	return DefaultPacketCap
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

// File analyzes a capture file into one Report (connections in order of their first
// packet). For a capture too large to hold all reports, use a Stream.
func File(ctx context.Context, path string, opts Options) (*report.Report, error) {
	r, err := capture.Open(path, capture.WithUDP())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rep, err := Run(ctx, r, opts)
	st := r.Stats()
	if rep != nil {
		rep.Source = FileSource(path, st)
		rep.Warnings = append(rep.Warnings, CaptureWarnings(st, len(rep.Connections))...)
	}
	return rep, err
}

// FileSource describes a capture file for a Report, from what its reader read.
func FileSource(path string, st capture.Stats) report.Source {
	return report.Source{
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
}

// CaptureWarnings says what of a capture was not analyzed, from its reader's
// Stats and the number of connections found.
func CaptureWarnings(st capture.Stats, connections int) []string {
	var out []string
	if st.Truncated {
		out = append(out, fmt.Sprintf("the file ends in the middle of a packet record: analyzed the %d whole records before it", st.Records))
	}
	if st.Fragments > 0 {
		out = append(out, fmt.Sprintf("%d IP fragments were not reassembled: TCP segments that travelled in fragments are missing from the analysis", st.Fragments))
	}
	if st.Undecodable > 0 {
		out = append(out, fmt.Sprintf("%s cut before the end of their TCP header were skipped", report.Count(int(st.Undecodable), "TCP packet", "TCP packets")))
	}
	if len(st.Skipped) == 1 {
		out = append(out, fmt.Sprintf("%s in an unsupported encapsulation (%s) skipped", report.Count(int(st.Skipped[0].Records), "packet was", "packets were"), st.Skipped[0].Name))
	} else if len(st.Skipped) > 1 {
		var skipped int64
		var each []string
		for _, s := range st.Skipped {
			skipped += s.Records
			each = append(each, fmt.Sprintf("%d %s", s.Records, s.Name))
		}
		out = append(out, fmt.Sprintf("%d packets in unsupported encapsulations were skipped: %s", skipped, strings.Join(each, ", ")))
	}
	if st.TCP == 0 && connections == 0 {
		out = append(out, "the capture holds no TCP packets and no QUIC connection")
	}
	return out
}

// StreamWarnings says what the stream set aside: packets of finished
// connections, frames captured twice.
func StreamWarnings(st StreamStats) []string {
	var out []string
	if st.TimeOutliers > 0 {
		what := fmt.Sprintf("%d packets had timestamps", st.TimeOutliers)
		if st.TimeOutliers == 1 {
			what = "1 packet had a timestamp"
		}
		out = append(out, fmt.Sprintf("%s far from those around it (up to %s away): read as coming at the time of the packet before", what, longDuration(st.TimeOutlierNs)))
	}
	if st.Trailing > 0 {
		idle := ""
		if st.IdleNs > 0 {
			idle = fmt.Sprintf(", or a connection idle for %s and reported", time.Duration(st.IdleNs))
		}
		out = append(out, fmt.Sprintf("%s after their connection was over (a retransmitted FIN, a last RST or ACK%s): counted, not analyzed",
			report.Count(int(st.Trailing), "packet came", "packets came"), idle))
	}
	return out
}

// Run analyzes every packet of src until io.EOF or ctx is done, into one Report
// with the connections in order of their first packet.
func Run(ctx context.Context, src PacketSource, opts Options) (*report.Report, error) {
	var conns []report.Connection
	so := StreamOptions{Options: opts, Emit: func(c *report.Connection) error {
		conns = append(conns, *c)
		return nil
	}}
	stats, err := Drain(ctx, src, so)
	rep := NewReport(opts.Tool, conns)
	rep.Warnings = append(rep.Warnings, StreamWarnings(stats)...)
	return rep, err
}

// NewReport makes a Report of conns (put in order of their first packet) by tool
// ("slowstart" when empty), without a source or warnings yet.
func NewReport(tool string, conns []report.Connection) *report.Report {
	sort.Slice(conns, func(i, j int) bool { return conns[i].Index < conns[j].Index })
	if conns == nil {
		conns = []report.Connection{}
	}
	if tool == "" {
		tool = "slowstart"
	}
	return &report.Report{Schema: report.Schema, Tool: tool, Connections: conns, Warnings: []string{}}
}

// Drain feeds every packet of src to a stream made with opts, then closes it: the
// stream's counts, and the first error (the input's or the context's, else the
// stream's own).
func Drain(ctx context.Context, src PacketSource, opts StreamOptions) (StreamStats, error) {
	st := NewStream(ctx, opts)
	err := Feed(ctx, src, st)
	stats, closeErr := st.Close()
	if err == nil {
		err = closeErr
	}
	return stats, err
}

// Feed hands every packet of src to the stream until io.EOF (nil) or another error,
// or until ctx is done. It does not close the stream.
func Feed(ctx context.Context, src PacketSource, st *Stream) error {
	for n := 1; ; n++ {
		// Decoded where the stream keeps it: Add need not copy it.
		p := st.NextPacket()
		if err := src.Next(p); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := st.Add(p); err != nil {
			return err
		}
		if n&0xffff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }

// longDuration says a long time in the unit that reads best: "46 years", "3 days".
func longDuration(ns int64) string {
	const day = 24 * float64(time.Hour)
	switch d := float64(ns); {
	case d >= 365*day:
		return fmt.Sprintf("%.0f years", d/(365.25*day))
	case d >= 2*day:
		return fmt.Sprintf("%.0f days", d/day)
	}
	return time.Duration(ns).Round(time.Second).String()
}
