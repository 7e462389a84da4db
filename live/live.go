// Package live runs the streaming analysis (analysis.Stream) over a live capture
// and hands each connection's report over as soon as it is finished, as
// `slowstart analyze` would report the same packets. It adds only what a live
// source needs: a wall clock that finishes connections while no packet arrives
// (analysis.Stream.Advance), reports of connections that went idle while still
// open (analysis.Stream.Snapshot, reported again whole when they end), and
// endpoints whose traffic is left out (the live view's own page).
//
// It has no connection tracking of its own: connections split, number and
// finish exactly as analysis.Stream decides.
package live

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// Defaults of WatchOptions.
const (
	DefaultIdle      = 3 * time.Second
	DefaultEvict     = 5 * time.Minute
	DefaultTickEvery = 250 * time.Millisecond
)

// WatchOptions tune Watch.
type WatchOptions struct {
	// Analysis is the analysis of every connection (its Server names the
	// server's side when a SYN was not seen, and filters connections).
	Analysis analysis.Options
	// Idle: an open connection with no packet for this long is reported as it
	// stands (with a note), once per change; it is reported again, whole, under
	// the same Index when it ends.
	Idle time.Duration
	// Evict: an open connection idle this long is finished and reported for good
	// (analysis.StreamOptions.IdleNs); its later packets count as a new
	// connection seen mid-stream.
	Evict time.Duration
	// Ignore lists endpoints whose packets are skipped (e.g. the server of the
	// live view, when it listens on the captured interface: its own traffic
	// would feed itself). An unspecified address (0.0.0.0, ::) matches any
	// address on that port.
	Ignore []netip.AddrPort
	// TickEvery is how often the clock is read to finish connections.
	TickEvery time.Duration
	// Now is the clock (default time.Now); it must be the clock of the packets'
	// timestamps.
	Now func() time.Time
}

func (o *WatchOptions) defaults() {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Evict <= 0 {
		o.Evict = DefaultEvict
	}
	if o.TickEvery <= 0 {
		o.TickEvery = DefaultTickEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// StillOpenNote is the note of a connection reported while still open.
const StillOpenNote = "the connection is still open: it is shown as it was when it went idle"

// Watch reads src (a capture.Live) until it ends and calls emit, from Watch's
// goroutine, with each connection's report when it is finished, and before
// that, as it stands, when it has been idle for opts.Idle (same Index). At the
// end of the input every connection still open is reported. It returns nil at
// io.EOF, else src's error. Watch does not stop src: stop it (a capture.Live
// opened with a context stops when the context ends, then hands over what it
// holds and io.EOF).
func Watch(ctx context.Context, src analysis.PacketSource, opts WatchOptions, emit func(report.Connection)) error {
	opts.defaults()
	// The packets come from src's goroutine in chunks, as many as src has at
	// hand (a capture.Live's batch from the kernel), their payloads copied
	// into the chunk's arena (src reuses its buffer): one channel send and no
	// allocation a packet.
	chunks := make(chan *packetChunk, chunksInFlight)
	free := make(chan *packetChunk, chunksInFlight+2)
	abandon := make(chan struct{})
	defer close(abandon)
	go readChunks(src, chunks, free, abandon)

	// The stream's merger hands finished connections over on its goroutine;
	// they wait here for Watch's, without ever blocking the merger.
	var (
		mu       sync.Mutex
		finished []report.Connection
	)
	ready := make(chan struct{}, 1)
	// Analysis is not cancelled with ctx: what was captured is analyzed whole.
	st := analysis.NewStream(context.WithoutCancel(ctx), analysis.StreamOptions{
		Options: opts.Analysis,
		Shards:  1,
		IdleNs:  int64(opts.Evict),
		Emit: func(c *report.Connection) error {
			mu.Lock()
			finished = append(finished, *c)
			mu.Unlock()
			select {
			case ready <- struct{}{}:
			default:
			}
			return nil
		},
	})
	deliver := func() {
		mu.Lock()
		out := finished
		finished = nil
		mu.Unlock()
		for _, c := range out {
			emit(c)
		}
	}
	var firstNs, lastSnapshotNs, quietFromNs int64
	snapshot := func(nowNs int64) error {
		lastSnapshotNs = nowNs
		// Only the connections that went quiet since the last snapshot are
		// built: a busy link has thousands open, most of them still sending
		// (building them all held the packets up for 300 ms, and the kernel
		// dropped some, at 1 Gbit/s: bench/live.sh). The windows follow one
		// another (a clock stepped back makes an empty one), so a connection is
		// shown once a pause: again only once packets moved its last time on.
		quiet := analysis.Quiet{FromNs: quietFromNs, BeforeNs: nowNs - int64(opts.Idle)}
		quietFromNs = max(quietFromNs, quiet.BeforeNs)
		open, err := st.Snapshot(quiet)
		if err != nil {
			return err
		}
		deliver() // what finished before the snapshot comes first
		for _, c := range open {
			c.Notes = append(c.Notes, StillOpenNote)
			emit(c)
		}
		return nil
	}
	ticker := time.NewTicker(opts.TickEvery)
	defer ticker.Stop()
	for {
		select {
		case c := <-chunks:
			for i := range c.packets {
				p := &c.packets[i]
				if ignored(opts.Ignore, p) {
					continue
				}
				if firstNs == 0 {
					firstNs = p.TimestampNs
				}
				if err := st.Add(p); err != nil {
					return err
				}
			}
			if err := c.err; err != nil {
				_, closeErr := st.Close()
				deliver()
				if errors.Is(err, io.EOF) {
					return closeErr
				}
				return err
			}
			c.reset()
			select {
			case free <- c:
			default:
			}
		case <-ready:
			deliver()
		case <-ticker.C:
			nowNs := opts.Now().UnixNano()
			if err := st.Advance(nowNs); err != nil {
				return err
			}
			if firstNs != 0 && nowNs-lastSnapshotNs >= int64(opts.Idle)/2 {
				if err := snapshot(nowNs); err != nil {
					return err
				}
			}
		}
	}
}

func ignored(list []netip.AddrPort, p *capture.Packet) bool {
	for _, ig := range list {
		for _, ap := range [2]netip.AddrPort{netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort)} {
			if ig.Port() == ap.Port() && (ig.Addr().IsUnspecified() || ig.Addr().Unmap() == ap.Addr().Unmap()) {
				return true
			}
		}
	}
	return false
}

// chunksInFlight bounds the chunks read ahead of the analysis.
const chunksInFlight = 64

// maxChunkPackets bounds the packets of a chunk.
const maxChunkPackets = 256

// packetChunk is packets read one after the other, their payloads in one
// arena, and the error that ended the reading (nil: it goes on).
type packetChunk struct {
	packets []capture.Packet
	payload []byte
	err     error
}

func (c *packetChunk) reset() {
	clear(c.packets)
	c.packets, c.payload, c.err = c.packets[:0], c.payload[:0], nil
}

// buffered is a source that can tell how many packets it holds that Next
// would hand over without waiting (capture.Live: what is left of its batch).
type buffered interface{ Buffered() int }

// readChunks reads src into chunks until an error (io.EOF at the end), sent
// with the chunk it ends, or until abandon is closed. A chunk goes as soon as
// src holds no more packets at hand (or it is full): a packet never waits for
// the next one.
func readChunks(src analysis.PacketSource, chunks chan<- *packetChunk, free <-chan *packetChunk, abandon <-chan struct{}) {
	at, _ := src.(buffered)
	for {
		var c *packetChunk
		select {
		case c = <-free:
		default:
			c = &packetChunk{}
		}
		for {
			c.packets = append(c.packets, capture.Packet{})
			p := &c.packets[len(c.packets)-1]
			if err := src.Next(p); err != nil {
				c.packets = c.packets[:len(c.packets)-1]
				c.err = err
				break
			}
			c.payload = append(c.payload, p.Payload...)
			if len(c.packets) == maxChunkPackets || at == nil || at.Buffered() == 0 {
				break
			}
		}
		// The payloads were appended to the arena in order: point each packet
		// at its bytes there.
		offset := 0
		for i := range c.packets {
			p := &c.packets[i]
			n := len(p.Payload)
			p.Payload = c.payload[offset : offset+n : offset+n]
			offset += n
		}
		// The chunk is the receiver's once sent (it resets it for reuse):
		// whether the reading ended is read before.
		ended := c.err != nil
		select {
		case chunks <- c:
		case <-abandon:
			return
		}
		if ended {
			return
		}
	}
}
