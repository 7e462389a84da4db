package link

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// monotonicClock reads CLOCK_MONOTONIC in nanoseconds through Go's fast clock (the
// runtime reads the same clock via the vDSO), so its times can arm a deadlineTimer.
type monotonicClock struct {
	base   time.Time
	baseNs int64 // CLOCK_MONOTONIC at base
}

// unixNs converts a reading of the clock to Unix nanoseconds.
func (c monotonicClock) unixNs(monoNs int64) int64 {
	return c.base.UnixNano() + (monoNs - c.baseNs)
}

func newMonotonicClock() (monotonicClock, error) {
	var before, after unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &before); err != nil {
		return monotonicClock{}, fmt.Errorf("reading CLOCK_MONOTONIC: %w", err)
	}
	base := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &after); err != nil {
		return monotonicClock{}, fmt.Errorf("reading CLOCK_MONOTONIC: %w", err)
	}
	return monotonicClock{base: base, baseNs: (before.Nano() + after.Nano()) / 2}, nil
}

func (c monotonicClock) nowNs() int64 { return c.baseNs + int64(time.Since(c.base)) }

// deadlineTimer is a timerfd waited on through Go's poller. Go's own timers wake up to a
// millisecond late once the runtime sleeps in the poller (measured here: 0.6 ms median);
// a timerfd is a kernel high-resolution timer whose expiry wakes the poller at once
// (measured: 50 to 85 µs late median in a VM, the cost of waking an idle CPU). It can be
// re-armed from another goroutine, which is how readers wake the scheduler.
type deadlineTimer struct {
	file *os.File
	conn syscall.RawConn

	// Poller callbacks and their state, bound once so waiting and arming allocate
	// nothing. wait is called by one goroutine; armAt by any, under the caller's lock.
	expirations [8]byte
	waitErr     error
	waitStep    func(fd uintptr) bool
	armSpec     unix.ItimerSpec
	armErr      error
	armStep     func(fd uintptr)
}

func newDeadlineTimer() (*deadlineTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating a timerfd: %w", err)
	}
	file := os.NewFile(uintptr(fd), "timerfd")
	conn, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	t := &deadlineTimer{file: file, conn: conn}
	t.waitStep = t.readExpirations
	t.armStep = t.setTime
	return t, nil
}

// armAt makes the timer fire at monotonicNs (CLOCK_MONOTONIC), or at once if that has
// passed. It replaces any earlier setting. Calls must not overlap.
func (t *deadlineTimer) armAt(monotonicNs int64) error {
	t.armSpec = unix.ItimerSpec{Value: unix.NsecToTimespec(max(monotonicNs, 1))} // 0 would disarm
	t.armErr = nil
	if err := t.conn.Control(t.armStep); err != nil {
		return err
	}
	if t.armErr != nil {
		return fmt.Errorf("arming timerfd: %w", t.armErr)
	}
	return nil
}

func (t *deadlineTimer) setTime(fd uintptr) {
	t.armErr = unix.TimerfdSettime(int(fd), unix.TFD_TIMER_ABSTIME, &t.armSpec, nil)
}

// wait blocks until the timer fires (or has fired since the last wait), or is closed.
func (t *deadlineTimer) wait() error {
	t.waitErr = nil
	if err := t.conn.Read(t.waitStep); err != nil {
		return err
	}
	return t.waitErr
}

func (t *deadlineTimer) readExpirations(fd uintptr) bool {
	_, err := unix.Read(int(fd), t.expirations[:])
	if err == unix.EAGAIN {
		return false
	}
	t.waitErr = err
	return true
}

func (t *deadlineTimer) close() error { return t.file.Close() }
