package analysis

import (
	"context"
	"math"
	"net/netip"
	"sync/atomic"

	"github.com/slowstart/slowstart/analysis/stream"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

// Defaults of StreamOptions.
const (
	// DefaultIdleNs: a connection with no packet for an hour of capture time is
	// reported as it stands; its later packets are counted, not analyzed. Real
	// captures hold connections quiet for minutes (keep-alive) that then go on.
	DefaultIdleNs = 3600e9
	// DefaultAttemptIdleNs: a connection that is only SYNs is reported after 130 s
	// (Linux gives up retrying a SYN after about 127 s).
	DefaultAttemptIdleNs = 130e9
)

// StreamOptions tune a Stream.
type StreamOptions struct {
	Options
	// Shards is how many goroutines analyze connections (each a share of the
	// four-tuples); 0: stream.DefaultShards of GOMAXPROCS. The output does not
	// depend on it.
	Shards int
	// IdleNs and AttemptIdleNs: see DefaultIdleNs and DefaultAttemptIdleNs (0 takes
	// them; negative: never).
	IdleNs, AttemptIdleNs int64
	// CompactAttempts keeps a connection that is only SYNs so far in a few bytes
	// even with Packets (without Packets it always is), so that a SYN flood
	// takes the memory it takes without packet lists (a full connection is some
	// 5 KB, a compact one about 100 bytes). A SYN sent several times before its
	// answer is then in the packet list once, at its first sending; the
	// handshake's note still counts them. The page of a capture file sets it.
	CompactAttempts bool
	// Emit receives each connection's report once it is finished (both sides
	// closed and quiet, idle, or the input ended), from one goroutine, in an order
	// that depends only on the input: by the batch it finished in, then the time
	// it finished, then the order of its first packet. Connections are numbered
	// (Index) in the order of their first packet. An error from Emit stops the
	// stream (Close returns it).
	Emit func(*report.Connection) error
	// PacketsAfter, with Packets, is asked after each report Emit took (from
	// Emit's goroutine) whether connections numbered after it still need their
	// packet lists. Once it says no, the connections that begin after that one
	// keep no packet list and report none: a page that holds the first
	// connections (report.Collector) then does not hold every open
	// connection's packets meanwhile (50,000 open connections: a gigabyte).
	// Once no for a number, it must stay no for that number and every higher.
	PacketsAfter func(index int) bool
}

// StreamStats is what a Stream counted: the packets handed to it, the
// connections reported, those still open, the idle time it applied (0: never),
// and the packets set aside (flow.Stats).
type StreamStats = stream.Stats

// Stream analyzes packets as they come and hands each connection's report over as
// soon as the connection is finished: memory holds open connections only. It is
// the engine of package analysis/stream (sharding, numbering, emission order)
// running this package's per-connection analysis. Add, Advance, Snapshot and
// Close are called from one goroutine.
type Stream = stream.Stream

// Quiet says which open connections Stream.Snapshot reports (stream.Quiet).
type Quiet = stream.Quiet

// AllOpen is every open connection (stream.AllOpen).
var AllOpen = stream.AllOpen

// NewStream starts a Stream. Close it to end the input and wait for the reports.
func NewStream(ctx context.Context, opts StreamOptions) *Stream {
	idleNs, attemptIdleNs := opts.IdleNs, opts.AttemptIdleNs
	switch {
	case idleNs == 0:
		idleNs = DefaultIdleNs
	case idleNs < 0:
		idleNs = 0
	}
	switch {
	case attemptIdleNs == 0:
		attemptIdleNs = DefaultAttemptIdleNs
	case attemptIdleNs < 0:
		attemptIdleNs = 0
	}
	if opts.Tool == "" {
		opts.Tool = "slowstart"
	}
	analysisOpts := opts.Options
	// packetsFrom: connections whose first packet comes after this ordinal
	// keep no packet list (PacketsAfter said no).
	packetsFrom := new(atomic.Int64)
	packetsFrom.Store(math.MaxInt64)
	var emitted func(index int, firstOrdinal int64)
	if opts.Packets && opts.PacketsAfter != nil {
		emitted = func(index int, firstOrdinal int64) {
			if firstOrdinal < packetsFrom.Load() && !opts.PacketsAfter(index) {
				packetsFrom.Store(firstOrdinal) // connections are numbered in ordinal order
			}
		}
	}
	return stream.New(ctx, stream.Options{
		Shards:        opts.Shards,
		IdleNs:        idleNs,
		AttemptIdleNs: attemptIdleNs,
		Server:        opts.Server,
		// Per-packet lists need every packet from the first: no compact SYNs
		// then, unless asked for (a page bounded in memory).
		Compact: !opts.Packets || opts.CompactAttempts,
		NewShard: func(finish stream.FinishFunc) stream.NewConnFunc {
			env := &connEnv{opts: analysisOpts, packetsFrom: packetsFrom, finish: func(c *flow.Conn, ca *connAnalyzer) { finish(c, ca) }}
			return func(c *flow.Conn, captureNs int64) stream.Conn {
				env.captureNs = captureNs
				return newConnAnalyzer(env, c)
			}
		},
		NewDatagrams: func() stream.Datagrams {
			return &quicDatagrams{quicanalysis.New(quicanalysis.Options{Keys: opts.KeyLog, PacketLog: opts.Packets})}
		},
		Emit:    opts.Emit,
		Emitted: emitted,
	})
}

// connEnv is what a shard's connection analyzers share.
type connEnv struct {
	opts      Options
	captureNs int64 // the input's first packet time: connections' start_ms count from it
	// packetsFrom is the first packet's ordinal after which a connection keeps
	// no packet list (StreamOptions.PacketsAfter).
	packetsFrom *atomic.Int64
	// finish takes a finished connection, whose report the stream builds.
	finish func(c *flow.Conn, ca *connAnalyzer)
}

// Report builds the connection's report (stream.Conn): final, or as it stands.
func (ca *connAnalyzer) Report(c *flow.Conn, final bool) report.Connection {
	rc := ca.build(c, final)
	if final {
		ca.releaseData()
	}
	return rc
}

// quicDatagrams runs the QUIC analysis on the stream's UDP datagrams.
type quicDatagrams struct{ *quicanalysis.Analyzer }

func (q *quicDatagrams) Add(p *capture.Packet) int {
	before := q.Count()
	q.Analyzer.Add(quicanalysis.Datagram{TimeNs: p.TimestampNs,
		Src: netip.AddrPortFrom(p.Src, p.SrcPort), Dst: netip.AddrPortFrom(p.Dst, p.DstPort), Payload: p.Payload})
	if q.Count() > before {
		return before + 1
	}
	return 0
}

func (q *quicDatagrams) Finish(firstNs int64) []report.Connection { return q.ConnectionsFrom(firstNs) }
