package link

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDevice is a Device fed and drained through channels, for tests without TUN devices.
type fakeDevice struct {
	incoming  chan []byte
	written   chan writtenPacket
	closed    chan struct{}
	closeOnce sync.Once
}

type writtenPacket struct {
	data []byte
	at   time.Time
}

func newFakeDevice() *fakeDevice {
	return &fakeDevice{
		incoming: make(chan []byte, 1024),
		written:  make(chan writtenPacket, 1024),
		closed:   make(chan struct{}),
	}
}

func (d *fakeDevice) Read(bufs [][]byte, sizes []int) (int, error) {
	select {
	case packet := <-d.incoming:
		sizes[0] = copy(bufs[0], packet)
	case <-d.closed:
		return 0, os.ErrClosed
	}
	return d.readWaiting(bufs, sizes, 1), nil
}

// readWaiting fills bufs from n on with the packets waiting, without blocking, and
// returns the count.
func (d *fakeDevice) readWaiting(bufs [][]byte, sizes []int, n int) int {
	for n < len(bufs) {
		select {
		case packet := <-d.incoming:
			sizes[n] = copy(bufs[n], packet)
			n++
		default:
			return n
		}
	}
	return n
}

func (d *fakeDevice) Write(bufs [][]byte) (int, error) {
	for i, buf := range bufs {
		select {
		case <-d.closed:
			return i, os.ErrClosed
		default:
		}
		d.written <- writtenPacket{data: bytes.Clone(buf), at: time.Now()}
	}
	return len(bufs), nil
}

// pollableFakeDevice is a fakeDevice that can be read without waiting, as a TUN can.
type pollableFakeDevice struct{ *fakeDevice }

func (d pollableFakeDevice) TryRead(bufs [][]byte, sizes []int) (int, error) {
	if d.isClosed() {
		return 0, os.ErrClosed
	}
	return d.readWaiting(bufs, sizes, 0), nil
}

func (d *fakeDevice) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	return nil
}

func (d *fakeDevice) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

func quietOptions() RunOptions {
	return RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// receive waits for the next packet written to d, failing the test after a generous time.
func receive(t *testing.T, d *fakeDevice) writtenPacket {
	t.Helper()
	select {
	case packet := <-d.written:
		return packet
	case <-time.After(10 * time.Second):
		t.Fatal("no packet came out of the emulator within 10 s")
		return writtenPacket{}
	}
}

func TestRunDelaysBothDirections(t *testing.T) {
	polling := quietOptions()
	polling.Poll = true
	for _, mode := range []struct {
		name     string
		options  RunOptions
		pollable bool
	}{
		{"spinning before deadlines", quietOptions(), false},
		{"timers only", RunOptions{EarlyWakeNs: -1, Logger: quietOptions().Logger}, false},
		{"polling", polling, true},
		{"polling asked, devices that cannot poll", polling, false},
	} {
		t.Run(mode.name, func(t *testing.T) { testRunDelaysBothDirections(t, mode.options, mode.pollable) })
	}
}

func testRunDelaysBothDirections(t *testing.T, options RunOptions, pollable bool) {
	a, b := newFakeDevice(), newFakeDevice()
	var deviceA, deviceB Device = a, b
	if pollable {
		deviceA, deviceB = pollableFakeDevice{a}, pollableFakeDevice{b}
	}
	const delayAToB, delayBToA = 5 * time.Millisecond, 3 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		stats Stats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		stats, err := Run(ctx, deviceA, deviceB,
			Config{DelayNs: int64(delayAToB)},
			Config{DelayNs: int64(delayBToA)},
			options)
		done <- result{stats, err}
	}()
	defer cancel()

	const packets = 50
	sentAt := make([]time.Time, packets)
	for i := range packets {
		sentAt[i] = time.Now()
		a.incoming <- bytes.Repeat([]byte{byte(i)}, 100+i)
		if i%10 == 9 {
			time.Sleep(time.Millisecond) // spread arrivals over several deadlines
		}
	}
	for i := range packets {
		got := receive(t, b)
		if want := bytes.Repeat([]byte{byte(i)}, 100+i); !bytes.Equal(got.data, want) {
			t.Fatalf("packet %d came out as %d bytes of %d, want %d bytes of %d", i, len(got.data), got.data[0], len(want), i)
		}
		if held := got.at.Sub(sentAt[i]); held < delayAToB {
			t.Errorf("packet %d crossed a→b in %v, less than the %v delay", i, held, delayAToB)
		}
	}
	start := time.Now()
	b.incoming <- []byte{0x45, 1, 2, 3}
	if got := receive(t, a); !bytes.Equal(got.data, []byte{0x45, 1, 2, 3}) || got.at.Sub(start) < delayBToA {
		t.Errorf("b→a packet %v after %v, want the same bytes after at least %v", got.data, got.at.Sub(start), delayBToA)
	}

	cancel()
	r := <-done
	if r.err != nil {
		t.Fatalf("Run returned %v after cancellation, want nil", r.err)
	}
	if !a.isClosed() || !b.isClosed() {
		t.Error("Run did not close its devices")
	}
	if r.stats.AToB.PacketsIn != packets || r.stats.AToB.PacketsOut != packets || r.stats.BToA.PacketsOut != 1 {
		t.Errorf("stats %+v, want %d packets in and out a→b, 1 out b→a", r.stats, packets)
	}
	polled := options.Poll && pollable
	for _, direction := range []DirectionStats{r.stats.AToB, r.stats.BToA} {
		if polled && direction.TimerWakeups != 0 {
			t.Errorf("polling, yet the timer woke the scheduler %d times", direction.TimerWakeups)
		}
		if !polled && direction.TimerWakeups == 0 {
			t.Error("no timer wake-up: the emulator polled where it should have slept on timers")
		}
	}
	if r.stats.AToB.LatenessMaxNs < 0 || r.stats.AToB.LatenessSumNs > r.stats.AToB.LatenessMaxNs*packets {
		t.Errorf("lateness sum %d and max %d do not fit together", r.stats.AToB.LatenessSumNs, r.stats.AToB.LatenessMaxNs)
	}
}

func TestRunDropsOversizePackets(t *testing.T) {
	a, b := newFakeDevice(), newFakeDevice()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	options := quietOptions()
	options.MaxPacketBytes = 1000
	done := make(chan Stats, 1)
	go func() {
		stats, _ := Run(ctx, a, b, Config{}, Config{}, options)
		done <- stats
	}()
	a.incoming <- make([]byte, 1200)
	a.incoming <- make([]byte, 1000)
	if got := receive(t, b); len(got.data) != 1000 {
		t.Fatalf("first packet out has %d bytes, want the 1000-byte one (the 1200-byte one is too long)", len(got.data))
	}
	cancel()
	stats := <-done
	if stats.AToB.PacketsOversize != 1 || stats.AToB.PacketsIn != 1 {
		t.Errorf("stats %+v, want 1 oversize and 1 packet in", stats.AToB)
	}
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	a, b := newFakeDevice(), newFakeDevice()
	_, err := Run(context.Background(), a, b, Config{}, Config{DelayNs: -1}, quietOptions())
	if err == nil || !strings.Contains(err.Error(), "b→a") || !strings.Contains(err.Error(), "delay") {
		t.Fatalf("Run error = %v, want one naming direction b→a", err)
	}
	if !a.isClosed() || !b.isClosed() {
		t.Error("Run did not close its devices on a config error")
	}
}

func TestSpinBudget(t *testing.T) {
	budget := spinBudget{share: 0.1, capacityNs: 1000}
	budget.refill(1)
	if !budget.take(1, 600) {
		t.Fatal("a full budget of 1000 ns refused 600 ns")
	}
	if budget.take(1, 600) {
		t.Fatal("a budget of 400 ns granted 600 ns")
	}
	// 2000 ns later at a 10% share: 400 + 200 = 600 ns.
	if got := budget.available(2001); got != 600 {
		t.Fatalf("available = %d ns, want 600", got)
	}
	if got := budget.available(1_000_000); got != 1000 {
		t.Fatalf("available = %d ns after a long pause, want the capacity 1000", got)
	}
}
