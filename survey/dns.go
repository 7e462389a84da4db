package survey

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/slowstart/slowstart/internal/netnsexec"
)

// DNS cache bounds: answers are kept for dnsTTL (Go's resolver does not say
// the records' own TTL), failures for dnsNegativeTTL, at most dnsCacheEntries
// names (the least recently used go first).
const (
	dnsTTL          = 10 * time.Minute
	dnsNegativeTTL  = time.Minute
	dnsCacheEntries = 100_000
)

// resolver looks names up for a survey: at most a given number at once, one
// lookup per name however many targets share it, answers cached.
type resolver struct {
	lookupFn func(ctx context.Context, host string) ([]netip.Addr, error)
	slots    semaphore
	group    singleflight.Group

	mu    sync.Mutex
	cache map[string]*list.Element
	lru   *list.List // of *dnsEntry, most recent first
}

type dnsEntry struct {
	host    string
	addrs   []netip.Addr
	err     error
	expires time.Time
}

// newResolver uses lookup, or the system's resolver inside netns when nil.
func newResolver(lookup func(ctx context.Context, host string) ([]netip.Addr, error), netns string, concurrency int) *resolver {
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			var addrs []netip.Addr
			err := netnsexec.Run(netns, func() error {
				var err error
				addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
				return err
			})
			return addrs, err
		}
	}
	return &resolver{lookupFn: lookup, slots: make(semaphore, concurrency), cache: map[string]*list.Element{}, lru: list.New()}
}

// lookup returns the addresses of host (unmapped, at least one) or why there
// are none.
func (r *resolver) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if e, ok := r.cached(host); ok {
		return e.addrs, e.err
	}
	v, err, _ := r.group.Do(host, func() (any, error) {
		if e, ok := r.cached(host); ok {
			return e, nil
		}
		if err := r.slots.acquire(ctx); err != nil {
			return nil, err
		}
		addrs, err := r.lookupFn(ctx, host)
		r.slots.release()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx) // not an answer: not cached
		}
		e := &dnsEntry{host: host, expires: time.Now().Add(dnsTTL)}
		for _, a := range addrs {
			e.addrs = append(e.addrs, a.Unmap())
		}
		if err == nil && len(e.addrs) == 0 {
			err = errors.New("no address")
		}
		if err != nil {
			e.addrs, e.err, e.expires = nil, fmt.Errorf("%w", err), time.Now().Add(dnsNegativeTTL)
		}
		r.store(e)
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	e := v.(*dnsEntry)
	return e.addrs, e.err
}

func (r *resolver) cached(host string) (*dnsEntry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.cache[host]
	if !ok {
		return nil, false
	}
	e := el.Value.(*dnsEntry)
	if time.Now().After(e.expires) {
		r.lru.Remove(el)
		delete(r.cache, host)
		return nil, false
	}
	r.lru.MoveToFront(el)
	return e, true
}

func (r *resolver) store(e *dnsEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.cache[e.host]; ok {
		r.lru.Remove(el)
	}
	r.cache[e.host] = r.lru.PushFront(e)
	for r.lru.Len() > dnsCacheEntries {
		oldest := r.lru.Back()
		r.lru.Remove(oldest)
		delete(r.cache, oldest.Value.(*dnsEntry).host)
	}
}
