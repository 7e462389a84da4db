package survey

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// scheduler hands targets to the workers so that one server address is
// measured by one target at a time, with a pause between two targets on it,
// while the other addresses keep the workers busy. It holds at most maxPending
// targets read ahead of the measurements: add waits for room.
type scheduler struct {
	pause      time.Duration
	maxPending int

	mu      sync.Mutex
	wake    chan struct{} // closed (and replaced) whenever the state changes
	dests   map[string]*destination
	ready   []*destination // free, with targets waiting, pause over: first come, first served
	resting destHeap       // free, with targets waiting, in their pause
	pending int
	closed  bool
	pruneAt int // prune idle destinations when there are this many
}

// destination is one server address and the targets waiting for it.
type destination struct {
	key     string
	queue   []*task
	busy    bool
	readyAt time.Time
	index   int // in resting, -1 when not there
}

func newScheduler(pause time.Duration, maxPending int) *scheduler {
	maxPending = max(maxPending, 1)
	return &scheduler{pause: pause, maxPending: maxPending, wake: make(chan struct{}), dests: map[string]*destination{},
		pruneAt: 4 * maxPending}
}

// broadcast wakes every waiter; called with mu held.
func (s *scheduler) broadcast() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// add queues a target behind the others of its address, waiting while the
// scheduler holds maxPending targets; false when ctx ended first.
func (s *scheduler) add(ctx context.Context, t *task) bool {
	key := t.addr.String()
	s.mu.Lock()
	for s.pending >= s.maxPending {
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	s.pending++
	d := s.dests[key]
	if d == nil {
		d = &destination{key: key, index: -1}
		s.dests[key] = d
	}
	d.queue = append(d.queue, t)
	if len(d.queue) == 1 && !d.busy {
		s.schedule(d)
	}
	s.broadcast()
	return true
}

// schedule puts a free destination with targets waiting where next finds it.
func (s *scheduler) schedule(d *destination) {
	if d.readyAt.After(time.Now()) {
		heap.Push(&s.resting, d)
		return
	}
	s.ready = append(s.ready, d)
}

// next returns the next target to measure, waiting for one; false when the
// scheduler is closed and empty, or ctx ended.
func (s *scheduler) next(ctx context.Context) (*task, bool) {
	s.mu.Lock()
	for {
		now := time.Now()
		for s.resting.Len() > 0 && !s.resting[0].readyAt.After(now) {
			s.ready = append(s.ready, heap.Pop(&s.resting).(*destination))
		}
		if len(s.ready) > 0 {
			d := s.ready[0]
			s.ready[0] = nil
			s.ready = s.ready[1:]
			t := d.queue[0]
			d.queue[0] = nil
			d.queue = d.queue[1:]
			d.busy = true
			s.mu.Unlock()
			return t, true
		}
		if s.closed && s.pending == 0 {
			s.mu.Unlock()
			return nil, false
		}
		wake := s.wake
		var timer *time.Timer
		var expired <-chan time.Time
		if s.resting.Len() > 0 {
			timer = time.NewTimer(time.Until(s.resting[0].readyAt))
			expired = timer.C
		}
		s.mu.Unlock()
		select {
		case <-wake:
		case <-expired:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil, false
		}
		s.mu.Lock()
	}
}

// done frees the target's address, for the next target after the pause.
func (s *scheduler) done(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	d := s.dests[t.addr.String()]
	d.busy = false
	d.readyAt = time.Now().Add(s.pause)
	switch {
	case len(d.queue) > 0:
		s.schedule(d)
	case s.pause <= 0:
		delete(s.dests, d.key)
	default:
		// Kept until its pause is over, so that a target on it read meanwhile
		// still waits; idle ones past their pause are dropped now and then.
		s.pruneIdle()
	}
	s.broadcast()
}

// pruneIdle drops idle destinations whose pause is over, when there are many;
// called with mu held.
func (s *scheduler) pruneIdle() {
	if len(s.dests) < s.pruneAt {
		return
	}
	now := time.Now()
	for k, d := range s.dests {
		if !d.busy && len(d.queue) == 0 && !d.readyAt.After(now) {
			delete(s.dests, k)
		}
	}
	s.pruneAt = max(2*len(s.dests), 4*s.maxPending)
}

// close says no more targets will be added.
func (s *scheduler) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.broadcast()
}

// destHeap orders resting destinations by the end of their pause.
type destHeap []*destination

func (h destHeap) Len() int           { return len(h) }
func (h destHeap) Less(i, j int) bool { return h[i].readyAt.Before(h[j].readyAt) }
func (h destHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *destHeap) Push(x any) {
	d := x.(*destination)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *destHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	d.index = -1
	return d
}
