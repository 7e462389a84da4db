//go:build !linux

package ktcp

import (
	"context"
	"runtime"
)

// Tracer follows TCP sockets from the kernel; on this system Open always
// fails.
type Tracer struct{}

// Options configure Open.
type Options struct {
	Filter    Filter
	Kinds     []Kind
	RingBytes int
}

// DefaultRingBytes is the ring buffer's default size.
const DefaultRingBytes = 16 << 20

// Open fails: kernel TCP tracing needs Linux.
func Open(Options) (*Tracer, error) {
	return nil, unavailable(nil, "it needs Linux (this is "+runtime.GOOS+")")
}

// UnixNs maps a monotonic time to Unix time.
func (t *Tracer) UnixNs(monoNs int64) int64 { return monoNs }

// Kinds are the kinds of events the tracer follows.
func (t *Tracer) Kinds() []Kind { return nil }

// Read returns ErrClosed.
func (t *Tracer) Read(*Event) error { return ErrClosed }

// Sync returns ErrClosed.
func (t *Tracer) Sync(context.Context) error { return ErrClosed }

// KindStats are the counts of one kind of event.
type KindStats struct {
	Kind                  Kind
	Submitted, Lost, Read uint64
}

// Stats are the tracer's counts since Open.
type Stats struct {
	Submitted, Lost, Read uint64
	Kinds                 []KindStats
}

// Stats returns nothing.
func (t *Tracer) Stats() (Stats, error) { return Stats{}, nil }

// Close does nothing.
func (t *Tracer) Close() error { return nil }

// Objects are the kernel IDs of a tracer's programs, links and maps.
type Objects struct {
	Programs, Links, Maps []uint32
}

// Objects returns nothing.
func (t *Tracer) Objects() (Objects, error) { return Objects{}, nil }

// NetnsInode fails: network namespaces are Linux's.
func NetnsInode(path string) (uint32, error) {
	return 0, unavailable(nil, "network namespaces need Linux")
}
