// Package gctune tunes the Go garbage collector for a batch analysis, whose
// live data is the open connections of a capture: see ForBatch. It is not for
// servers or long-running verbs, which keep the runtime's defaults.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// ForBatch trades memory the process does not need for less garbage
// collection during a batch analysis: the collector runs when the heap
// reaches a limit that follows the live data (see nextLimit), not when it has
// grown 2× past it. GOGC is set to 1000, so that the runtime's own goal (11×
// the live data, 40 MB before the first collection) comes after that limit:
// at 400, its first goal of 20 MB made a collection before the limit had
// anything to follow (bulk of bench/shapes.sh 3 to 2 collections, vlan6 5 to
// 4, lossy 1 to none), and a capture of a few MB of live data keeps the
// smaller room it would have. The live data
// is read as each collection ends (afterEachCollection), so that the limit
// it sets is in place before the heap grows on: read every 50 ms alone, a
// new limit came only after the heap of a capture whose live data grows fast
// (vlan6 of bench/shapes.sh: 45 MB in its first 100 ms) had run into the old
// one, and the collector ran two or three times back to back (vlan6: 7
// collections, 5 since). It is read every 50 ms as well, for the limit to
// come down as the scavenger returns memory. The room of large live data is
// half of it, not a quarter: a heap of a gigabyte of open keep-alive
// connections (bench/shapes.sh edge50k) grew into a quarter's limit between
// two readings 50 ms apart, and the collector then ran back to back. Down
// no further than the memory the process holds (its heap's free pages not
// yet returned included): a limit lowered below that as connections
// finished made the collector run back to back to the end (132 collections
// against 25 on edge50k, 13.4 s against 8.7 s); held, it comes down as the
// scavenger returns pages (mixed at 4× the length: 154-159 MB at the peak,
// against 163-167 MB with a limit that never came down). The stream holds
// only open connections (about 60 MB live on the 3.7 M packet bench
// capture), so captures of any length stay near 140 MB, and a capture with
// very many open connections (or a whole Report kept for a page load) gets
// the memory it needs (the limit follows it) instead of a collector that
// never stops. A user's GOGC or GOMEMLIMIT wins. stop ends the adjustment.
func ForBatch() (stop func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	oldPercent := debug.SetGCPercent(1000)
	oldLimit := debug.SetMemoryLimit(minLimitBytes)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	done := make(chan struct{})
	finished := make(chan struct{})
	collected := make(chan struct{}, 1)
	var stopped atomic.Bool
	afterEachCollection(collected, &stopped)
	go func() {
		defer close(finished)
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		limit := int64(minLimitBytes)
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
			case <-collected:
			}
			metrics.Read(sample)
			for _, s := range sample {
				if s.Value.Kind() != metrics.KindUint64 {
					return
				}
			}
			live := int64(sample[0].Value.Uint64())
			held := int64(sample[1].Value.Uint64() - sample[2].Value.Uint64())
			if want := nextLimit(limit, live, held); want != limit {
				limit = want
				debug.SetMemoryLimit(limit)
			}
		}
	}()
	return func() {
		stopped.Store(true)
		close(done)
		<-finished
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

// sentinel is an object nothing refers to, made again after each collection
// found it unreachable (see afterEachCollection).
type sentinel struct {
	notify  chan<- struct{}
	stopped *atomic.Bool
}

// afterEachCollection sends on notify (without waiting) after each collection
// from now on, until stopped is set: a finalizer on an unreachable object
// runs once the collection that found it is over, and sets the next.
func afterEachCollection(notify chan<- struct{}, stopped *atomic.Bool) {
	runtime.SetFinalizer(&sentinel{notify: notify, stopped: stopped}, func(s *sentinel) {
		if s.stopped.Load() {
			return
		}
		select {
		case s.notify <- struct{}{}:
		default:
		}
		afterEachCollection(s.notify, s.stopped)
	})
}

// minLimitBytes is the limit ForBatch starts with, before the first
// collection has measured any live data.
const minLimitBytes = 48 << 20

// Rooms for garbage above the live data (see nextLimit).
const (
	largeRoom = 55 << 20 // at least, while the live data is large
	smallRoom = 32 << 20 // at least, while it is small
)

// heapTarget is the heap an analysis keeps under while its live data is less
// than two thirds of it: with the binary's own pages (some 25 MB) and the
// runtime's, 150 MB of memory at most.
const heapTarget = 112 << 20

// nextLimit is the memory limit that follows limit, with live bytes of live
// data and held bytes of memory held by the process: up at once, down no
// further than held. The room above the live data is half of it (largeRoom
// at least), but never more than twice the live data (smallRoom at least).
// A capture of few connections open at once (https: 14-24 MB live) is
// collected every 32 MB allocated, a few milliseconds each, so its peak is
// the same at any length (a limit of 110 MB at least, reached only by long
// captures, made https 1.6 times larger at 4× its length); one of many
// (mixed: 40-60 MB live) keeps the larger room that spares it collections
// each as long as its live data is large. Nor does the heap grow past
// heapTarget while the live data is less than two thirds of it: mixed's
// live data rises to some 80 MB at the end of each of its copies at 4×
// its length (59 at 1×, the end of the input coming first), and the room
// above it took its peak from 121 MB at 1× to 140-146 at 4×.
func nextLimit(limit, live, held int64) int64 {
	want := min(live+max(live/2, largeRoom), max(3*live, live+smallRoom))
	want = min(want, max(heapTarget, live+live/2))
	if want < limit {
		// Down no further than the memory the process holds: the
		// scavenger returns what is free, and the limit follows.
		want = min(limit, max(want, held))
	}
	return want
}
