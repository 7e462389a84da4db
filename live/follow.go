package live

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
)

// Defaults of FollowOptions.
const (
	// DefaultMaxSkew: packets whose latest time is within this of the host's
	// clock carry the host's clock (a capture being written now), so the time
	// that passes without packets is capture time too.
	DefaultMaxSkew = time.Minute
	// followChunkPackets is how many packets the reader hands over at once when
	// they come faster than the clock ticks; followMaxPending is how many it
	// holds before it waits for them to be taken.
	followChunkPackets = 1024
	followMaxPending   = 16 * followChunkPackets
)

// FollowOptions tune Follow.
type FollowOptions struct {
	// TickEvery is how often the stream is advanced while the input is quiet
	// (default DefaultTickEvery).
	TickEvery time.Duration
	// MaxSkew: see DefaultMaxSkew (0 takes it).
	MaxSkew time.Duration
	// Now is the host's clock (default time.Now).
	Now func() time.Time
	// Stop, when set, is called once ctx is done: it makes src end (with any
	// error) once it has handed out what the input held at that moment, and
	// cuts a read that waits for more. Follow hands those packets to the
	// stream and waits for the reading goroutine, so src may be used again
	// (its statistics read) when Follow returns. Without Stop, Follow returns
	// at once with the packets read so far, and src must not be touched again.
	Stop func()
}

// Follow feeds st with a capture read as it is being written (tcpdump -U -w -
// into a pipe, a FIFO), so that each connection is reported as soon as it is
// finished rather than when the input ends; analysis.Drain is the same for a
// file, which has no quiet moments.
//
// Packets are read on a goroutine of their own and handed to st from Follow's
// in chunks: at once when a chunk fills, and at every tick otherwise. At every
// tick st is advanced to the latest packet's time, which changes nothing in
// what it reports, only when (the stream otherwise waits for a batch of
// thousands of packets). When the packets carry the host's clock (the latest
// within MaxSkew of it) and none came in since the last tick, the stream is
// advanced further by the time that passed since the last packet arrived: a
// connection that closed is then finished after its linger even when the
// capture has gone quiet. A recorded capture piped in (cat old.pcap |) carries
// another clock, and is never advanced past its own packets.
//
// Follow returns nil at io.EOF, src's error, or ctx's error when ctx ended
// first; the packets read by then (see Stop) have all been handed to st. It
// does not close st: Close it to have the connections still open reported.
func Follow(ctx context.Context, src analysis.PacketSource, st *analysis.Stream, opts FollowOptions) error {
	if opts.TickEvery <= 0 {
		opts.TickEvery = DefaultTickEvery
	}
	if opts.MaxSkew <= 0 {
		opts.MaxSkew = DefaultMaxSkew
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	in := &followInput{ready: make(chan struct{}, 1), done: make(chan struct{})}
	in.room = sync.NewCond(&in.mu)
	go in.read(src, opts.Now)

	var (
		spare     followChunk
		maxNs     int64     // the latest packet time handed to st
		arrivedAt time.Time // when the packet of maxNs was read
	)
	// take hands st what was read since the last call; it returns the reader's
	// error once every packet before it was handed over.
	take := func() (err error, ended bool) {
		in.mu.Lock()
		got := in.pending
		in.pending = spare
		readErr, last := in.err, in.lastArrival
		in.room.Signal()
		in.mu.Unlock()
		start := 0
		for i := range got.packets {
			p := &got.packets[i]
			p.Payload = got.payload[start:got.ends[i]:got.ends[i]]
			start = got.ends[i]
			if p.TimestampNs > maxNs {
				maxNs = p.TimestampNs
			}
			if err := st.Add(p); err != nil {
				return err, true
			}
		}
		if len(got.packets) > 0 {
			arrivedAt = last
		}
		got.reset()
		spare = got
		if readErr != nil {
			return readErr, true
		}
		return nil, false
	}
	ticker := time.NewTicker(opts.TickEvery)
	defer ticker.Stop()
	for {
		select {
		case <-in.ready:
			if err, ended := take(); ended {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		case <-ticker.C:
			before := maxNs
			if err, ended := take(); ended {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if maxNs == 0 {
				continue // nothing read yet
			}
			nowNs := maxNs
			host := opts.Now()
			if maxNs == before && absDuration(time.Duration(arrivedAt.UnixNano()-maxNs)) <= opts.MaxSkew {
				// Quiet since the last tick, and the packets carry the host's
				// clock: as much capture time has passed as host time.
				nowNs = maxNs + int64(host.Sub(arrivedAt))
			}
			if err := st.Advance(nowNs); err != nil {
				return err
			}
		case <-ctx.Done():
			if opts.Stop == nil {
				in.stop()
				take()
				return ctx.Err()
			}
			// Stop lets the reads take what the input holds, then ends them:
			// every packet read until then goes to the stream.
			opts.Stop()
			for {
				select {
				case <-in.ready:
				case <-in.done:
				}
				if _, ended := take(); ended {
					<-in.done
					return ctx.Err()
				}
			}
		}
	}
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// followChunk is packets read and not yet handed to the stream, their payloads
// copied into one arena (ends[i] is where packet i's payload ends in it).
type followChunk struct {
	packets []capture.Packet
	ends    []int
	payload []byte
}

func (c *followChunk) reset() {
	c.packets, c.ends, c.payload = c.packets[:0], c.ends[:0], c.payload[:0]
}

// followInput is Follow's reading goroutine and what it hands over.
type followInput struct {
	mu          sync.Mutex
	room        *sync.Cond // signalled when pending was taken
	pending     followChunk
	err         error     // the read's error (io.EOF at the end)
	lastArrival time.Time // when the last packet of pending was read
	stopped     bool
	ready       chan struct{} // a chunk filled, or the reading ended
	done        chan struct{} // the reading goroutine returned
}

func (in *followInput) read(src analysis.PacketSource, now func() time.Time) {
	defer close(in.done)
	var p capture.Packet
	for {
		err := src.Next(&p)
		in.mu.Lock()
		if in.stopped {
			in.mu.Unlock()
			return
		}
		if err != nil {
			in.err = err
			in.mu.Unlock()
			in.signal()
			return
		}
		c := &in.pending
		c.payload = append(c.payload, p.Payload...)
		c.ends = append(c.ends, len(c.payload))
		q := p
		q.Payload = nil
		c.packets = append(c.packets, q)
		in.lastArrival = now()
		n := len(c.packets)
		for len(in.pending.packets) >= followMaxPending && !in.stopped {
			in.room.Wait()
		}
		in.mu.Unlock()
		if n >= followChunkPackets {
			in.signal()
		}
	}
}

func (in *followInput) signal() {
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// stop tells the reading goroutine to hand over nothing more.
func (in *followInput) stop() {
	in.mu.Lock()
	in.stopped = true
	in.room.Broadcast()
	in.mu.Unlock()
}
