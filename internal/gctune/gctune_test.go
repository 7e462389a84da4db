package gctune

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestNextLimit(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name              string
		limit, live, held int64
		want              int64
	}{
		{"small live data: the small room", minLimitBytes, 10 * mb, 40 * mb, 42 * mb},
		{"live data of 20 MB: twice as much room", minLimitBytes, 20 * mb, 40 * mb, 60 * mb},
		{"live data of 40 MB: the large room", minLimitBytes, 40 * mb, 60 * mb, 95 * mb},
		{"live data of 70 MB: no more than heapTarget", minLimitBytes, 70 * mb, 80 * mb, 112 * mb},
		{"live data of 90 MB: half again", minLimitBytes, 90 * mb, 100 * mb, 135 * mb},
		{"live data grows: up at once", minLimitBytes, 300 * mb, 320 * mb, 450 * mb},
		{"live data falls, memory still held: down to what is held", 450 * mb, 100 * mb, 400 * mb, 400 * mb},
		{"live data falls, memory returned: down to the live data's", 450 * mb, 100 * mb, 120 * mb, 150 * mb},
		{"held beyond the limit: never up for it", 450 * mb, 100 * mb, 500 * mb, 450 * mb},
	} {
		if got := nextLimit(tc.limit, tc.live, tc.held); got != tc.want {
			t.Errorf("%s: nextLimit(%d MB, live %d MB, held %d MB) = %d MB, want %d MB",
				tc.name, tc.limit/mb, tc.live/mb, tc.held/mb, got/mb, tc.want/mb)
		}
	}
}

// TestAfterEachCollection: a notification after a collection, and after each
// of the next ones (the sentinel is made again each time).
func TestAfterEachCollection(t *testing.T) {
	notify := make(chan struct{}, 1)
	var stopped atomic.Bool
	defer stopped.Store(true)
	afterEachCollection(notify, &stopped)
	for i := 1; i <= 3; i++ {
		runtime.GC()
		select {
		case <-notify:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification within 10 s after collection %d", i)
		}
	}
}
