package loopload

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/ktcp"
)

// Drain reads events events from tracer on a thread of its own, handing each to
// each (when not nil), and returns the wall and CPU time the thread took.
func Drain(tracer *ktcp.Tracer, events uint64, each func(*ktcp.Event)) (wall, cpu time.Duration, err error) {
	type result struct {
		wall, cpu time.Duration
		err       error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var ev ktcp.Event
		cpu0, start := ThreadCPU(), time.Now()
		for range events {
			if err := tracer.Read(&ev); err != nil {
				done <- result{err: err}
				return
			}
			if each != nil {
				each(&ev)
			}
		}
		done <- result{wall: time.Since(start), cpu: ThreadCPU() - cpu0}
	}()
	r := <-done
	return r.wall, r.cpu, r.err
}

// ThreadCPU is the calling thread's CPU time.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// CurrentRSS is the process's resident set now (bytes), from /proc/self/statm.
func CurrentRSS() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident uint64
	fmt.Sscan(string(data), &size, &resident)
	return resident * uint64(os.Getpagesize())
}
