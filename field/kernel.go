package field

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/ktcp"
)

// kernelSource reads the kernel's TCP tracepoints (package ktcp) into the
// tracker.
type kernelSource struct {
	r      *runner
	tracer *ktcp.Tracer

	mu     sync.Mutex
	final  *ktcp.Stats // the tracer's counts when it closed
	closed bool
}

// kernelKinds are the tracepoints field needs: segments received, state
// changes, retransmissions (not the congestion state's changes).
var kernelKinds = []ktcp.Kind{ktcp.KindProbe, ktcp.KindState, ktcp.KindRetransmit}

// syncTimeout bounds the wait for the events written before field stops.
const syncTimeout = 2 * time.Second

// selfNetns is the network namespace of this process.
const selfNetns = "/proc/self/ns/net"

func openKernelSource(r *runner, opts Options) (*kernelSource, error) {
	filter := ktcp.Filter{LocalPorts: opts.Ports}
	if !opts.AllNetns {
		paths := opts.Netns
		if len(paths) == 0 {
			paths = []string{selfNetns}
		}
		for _, p := range paths {
			inode, err := ktcp.NetnsInode(p)
			if err != nil {
				return nil, &UsageError{err}
			}
			filter.Netns = append(filter.Netns, inode)
		}
	}
	tracer, err := ktcp.Open(ktcp.Options{Filter: filter, Kinds: kernelKinds, RingBytes: opts.RingBytes})
	if err != nil {
		return nil, err
	}
	r.tracker = newTracker(opts.MaxConns, opts.Exchange, int64(opts.Quiet), int64(opts.Idle), tracer.UnixNs, r.emit)
	return &kernelSource{r: r, tracer: tracer}, nil
}

// run reads events until ctx ends: every event the kernel wrote until then is
// read (Sync), then the tracer is closed.
func (k *kernelSource) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, k.close)
	defer stop()
	var ev ktcp.Event
	for {
		if err := k.tracer.Read(&ev); err != nil {
			if errors.Is(err, ktcp.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading the kernel's events: %w", err)
		}
		k.r.mu.Lock()
		k.r.tracker.feed(&ev)
		k.r.mu.Unlock()
	}
}

func (k *kernelSource) counts(c *statusCounts) {
	k.mu.Lock()
	defer k.mu.Unlock()
	stats := k.final
	if stats == nil {
		s, err := k.tracer.Stats()
		if err != nil {
			return
		}
		stats = &s
	}
	c.eventsRead, c.eventsLost = stats.Read, stats.Lost
}

func (k *kernelSource) monoNow() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

func (k *kernelSource) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	k.tracer.Sync(ctx)
	cancel()
	if s, err := k.tracer.Stats(); err == nil {
		k.final = &s
	}
	k.tracer.Close()
}
