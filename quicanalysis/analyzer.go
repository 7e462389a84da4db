// Package quicanalysis turns the UDP datagrams of QUIC connections into the same
// report.Connection the TCP pipeline produces: the server's rounds by the ACK clock
// (from packet numbers and the client's ACK frames), the limit that ended each round
// (including the anti-amplification limit of RFC 9000 §8.1), the QUIC handshake's
// round trips, the server's initial window with a verdict, the HTTP/3 exchanges and
// the diagnoses that follow from them. It works from either end of the path.
//
// It is fed datagrams (time, addresses, UDP payload) through Analyzer.Add or a
// DatagramSource; where they come from (a capture file, a live capture, a probe's
// socket) is the caller's business. Packet decoding and decryption are package quic's.
package quicanalysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"

	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/report"
)

// Datagram is one UDP datagram as captured.
type Datagram struct {
	TimeNs   int64 // capture time, ns since the Unix epoch
	Src, Dst netip.AddrPort
	Payload  []byte // the UDP payload; Add copies what it keeps
}

// DatagramSource hands over datagrams in capture order; Next returns io.EOF at the end.
type DatagramSource interface {
	NextDatagram(*Datagram) error
}

// Options control the analysis.
type Options struct {
	// Keys holds the TLS secrets (SSLKEYLOGFILE) for Handshake and 1-RTT packets; nil:
	// only Initial packets are read.
	Keys *keylog.Log
	// PacketLog fills each connection's QUIC.PacketLog.
	PacketLog bool
	// Vantage is where the datagrams were recorded, when the caller knows
	// (report.VantageClient: a client's own socket); empty: read from the
	// handshake's gaps, which a path of a fraction of a millisecond (loopback)
	// cannot tell apart.
	Vantage string
}

// Analyzer collects datagrams by connection.
type Analyzer struct {
	opts    Options
	conns   map[[2]netip.AddrPort]*conn
	order   []*conn
	firstNs int64
	lastNs  int64
	// Datagrams counts what Add was given; QUICDatagrams those taken as QUIC.
	Datagrams, QUICDatagrams int64
}

// conn is one connection's datagrams, decoded.
type conn struct {
	client, server netip.AddrPort
	dec            *quic.Conn
	packets        []quic.Packet
	clientDgrams   []datagramInfo
	serverDgrams   []datagramInfo
}

// datagramInfo is one datagram of a connection: when, how large, its packets.
type datagramInfo struct {
	timeNs  int64
	bytes   int
	packets []int // indexes into conn.packets
}

// New makes an Analyzer.
func New(opts Options) *Analyzer {
	return &Analyzer{opts: opts, conns: map[[2]netip.AddrPort]*conn{}}
}

func pairKey(a, b netip.AddrPort) [2]netip.AddrPort {
	if a.Compare(b) > 0 {
		a, b = b, a
	}
	return [2]netip.AddrPort{a, b}
}

// Add takes one datagram and reports whether it belongs to a QUIC connection: one
// that began, in this capture, with a version 1 Initial packet from its client.
func (a *Analyzer) Add(d Datagram) bool {
	a.Datagrams++
	if a.firstNs == 0 || d.TimeNs < a.firstNs {
		a.firstNs = d.TimeNs
	}
	a.lastNs = max(a.lastNs, d.TimeNs)
	key := pairKey(d.Src, d.Dst)
	c := a.conns[key]
	if c == nil {
		h, err := quic.ParseHeader(d.Payload, 0)
		if err != nil || h.Type != quic.PacketInitial || len(d.Payload) < 1200 {
			return false // not the start of a QUIC connection (clients pad Initials to 1,200)
		}
		c = &conn{client: d.Src, server: d.Dst, dec: quic.NewConn(a.opts.Keys)}
		a.conns[key] = c
		a.order = append(a.order, c)
	}
	a.QUICDatagrams++
	fromClient := d.Src == c.client
	info := datagramInfo{timeNs: d.TimeNs, bytes: len(d.Payload)}
	for _, p := range c.dec.Datagram(d.TimeNs, fromClient, d.Payload) {
		info.packets = append(info.packets, len(c.packets))
		c.packets = append(c.packets, p)
	}
	if fromClient {
		c.clientDgrams = append(c.clientDgrams, info)
	} else {
		c.serverDgrams = append(c.serverDgrams, info)
	}
	return true
}

// Count is the number of QUIC connections seen so far.
func (a *Analyzer) Count() int { return len(a.order) }

// Connections analyzes every connection seen, in order of first datagram.
func (a *Analyzer) Connections() []report.Connection {
	return a.ConnectionsFrom(a.firstNs)
}

// ConnectionsFrom is Connections with start times counted from startNs (the
// capture's first packet, when the capture holds more than these datagrams).
func (a *Analyzer) ConnectionsFrom(startNs int64) []report.Connection {
	out := make([]report.Connection, 0, len(a.order))
	for i, c := range a.order {
		rc := analyze(c, startNs, a.opts)
		rc.Index = i + 1
		out = append(out, rc)
	}
	return out
}

// Report makes a Report of every QUIC connection, with source describing the input.
func (a *Analyzer) Report(tool string, source report.Source) *report.Report {
	rep := &report.Report{Schema: report.Schema, Tool: tool, Source: source, Connections: a.Connections(), Warnings: []string{}}
	if rep.Source.StartUnixNs == 0 {
		rep.Source.StartUnixNs = a.firstNs
		rep.Source.DurationMs = float64(a.lastNs-a.firstNs) / 1e6
	}
	if len(rep.Connections) == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("no QUIC connection in %d UDP datagrams (a connection is recognized by its client's first Initial packet)", a.Datagrams))
	}
	return rep
}

// Run reads src to its end and returns the Report.
func Run(ctx context.Context, src DatagramSource, tool string, source report.Source, opts Options) (*report.Report, error) {
	a := New(opts)
	var d Datagram
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := src.NextDatagram(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return a.Report(tool, source), err
		}
		a.Add(d)
	}
	return a.Report(tool, source), nil
}

// sortedInts returns the keys of m in order.
func sortedInts(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// Packets returns the decoded packets of every connection, in the order they were added
// per connection.
func (a *Analyzer) Packets() []quic.Packet {
	var out []quic.Packet
	for _, c := range a.order {
		out = append(out, c.packets...)
	}
	return out
}
