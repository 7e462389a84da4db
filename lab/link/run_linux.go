package link

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// RunOptions tunes Run; the zero value gives the defaults.
type RunOptions struct {
	// MaxPacketBytes is the largest packet carried (default 2048, enough for an MTU of
	// 1500 with room to spare). Longer packets are dropped and counted as oversize.
	MaxPacketBytes int
	// BatchPackets is how many packets one read or write system-call batch may hold
	// (default 64).
	BatchPackets int
	// EarlyWakeNs is how long before a packet's time the scheduler's timer fires; it
	// spins (yielding the processor) for the rest, to release packets within a few
	// microseconds of their time. Default 300 µs: a timer wake-up after a sleep of tens of
	// milliseconds took 85 µs (median) to 130 µs (p99) on an idle 2-core virtual machine,
	// and more when other processes compete (see DirectionStats.TimerLatenessMaxNs).
	// Negative: never spin, rely on the timer alone.
	EarlyWakeNs int64
	// SpinShare bounds the CPU each direction may spend spinning, as a share of one core
	// over time (default 0.05). Past it the scheduler sleeps to the deadline and accepts
	// the timer's lateness: under heavy traffic deadlines are microseconds apart and
	// spinning for each would take a core the transfer needs.
	SpinShare float64
	// Poll runs the emulator in polling mode when both devices are PollableDevices: one
	// goroutine reads both devices without waiting and releases packets at their time,
	// never sleeping, so neither a reader's nor a timer's wake-up (50 µs to several
	// hundred on a virtual machine) adds to the path. It keeps one processor busy for
	// as long as Run runs: for a trial that runs alone, not for many in parallel.
	// EarlyWakeNs and SpinShare do not apply.
	Poll bool
	// Logger receives diagnostics (default slog.Default()).
	Logger *slog.Logger
	// Tap, when set, sees every packet read from a device and every packet written to
	// one, with the time (Unix ns) it was read or written: device 0 is a, 1 is b. So
	// all packets tapped at device 0 are what a capture on a would show. It is called
	// from the emulator's goroutines and must not keep data past the call.
	Tap func(device int, data []byte, unixNs int64)
}

func (o RunOptions) withDefaults() RunOptions {
	if o.MaxPacketBytes <= 0 {
		o.MaxPacketBytes = 2048
	}
	if o.BatchPackets <= 0 {
		o.BatchPackets = 64
	}
	if o.EarlyWakeNs == 0 {
		o.EarlyWakeNs = 300_000
	}
	if o.SpinShare <= 0 {
		o.SpinShare = 0.05
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats is what Run counted in each direction.
type Stats struct {
	AToB, BToA DirectionStats
}

// DirectionStats counts one direction.
type DirectionStats struct {
	Counters
	// PacketsOversize were longer than RunOptions.MaxPacketBytes and dropped on entry.
	PacketsOversize int64
	// PacketsWriteFailed were refused by the output device (e.g. a malformed packet).
	PacketsWriteFailed int64
	// LatenessSumNs and LatenessMaxNs measure how long after its time each packet was
	// handed to the output device; the mean is LatenessSumNs / PacketsOut.
	LatenessSumNs, LatenessMaxNs int64
	// TimerWakeups counts the scheduler's timer wake-ups, and TimerLatenessSumNs and
	// TimerLatenessMaxNs how long after the armed time they came: the machine's wake-up
	// latency, which RunOptions.EarlyWakeNs should exceed.
	TimerWakeups                           int64
	TimerLatenessSumNs, TimerLatenessMaxNs int64
}

// Run emulates the path between devices a and b until ctx is done or a device fails:
// packets read from a go through a pipeline built from aToB and are written to b, and
// packets from b go through bToA to a. It takes ownership of both devices and closes them
// before returning. It returns nil after ctx is done, else the error that stopped it.
//
// Each device has a reader goroutine that reads batches and enqueues them, stamped with
// the time they were read; each direction has a scheduler goroutine that sleeps on a
// high-resolution timer until the pipeline's next packet is due (see RunOptions.EarlyWakeNs)
// and writes every due packet in one batch. Packet buffers come from a pool: in the steady
// state nothing is allocated per packet.
func Run(ctx context.Context, a, b Device, aToB, bToA Config, options RunOptions) (Stats, error) {
	closeDevices := func() { a.Close(); b.Close() }
	options = options.withDefaults()
	if err := aToB.Validate(); err != nil {
		closeDevices()
		return Stats{}, fmt.Errorf("direction a→b: %w", err)
	}
	if err := bToA.Validate(); err != nil {
		closeDevices()
		return Stats{}, fmt.Errorf("direction b→a: %w", err)
	}
	clock, err := newMonotonicClock()
	if err != nil {
		closeDevices()
		return Stats{}, err
	}
	pool := newPacketPool(options.MaxPacketBytes)
	forward, err := newDirection("a→b", aToB, b, clock, pool, options)
	if err == nil {
		forward.inDevice, forward.outDevice = 0, 1
	}
	if err != nil {
		closeDevices()
		return Stats{}, err
	}
	backward, err := newDirection("b→a", bToA, a, clock, pool, options)
	if err == nil {
		backward.inDevice, backward.outDevice = 1, 0
	}
	if err != nil {
		forward.timer.close()
		closeDevices()
		return Stats{}, err
	}
	options.Logger.Debug("link emulator started", "a_to_b", aToB.String(), "b_to_a", bToA.String())

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var closing atomic.Bool
	var group sync.WaitGroup
	start := func(name string, loop func() error) {
		group.Go(func() {
			if err := loop(); err != nil && !closing.Load() {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	pollA, aPolls := a.(PollableDevice)
	pollB, bPolls := b.(PollableDevice)
	if processors := runtime.GOMAXPROCS(0); options.Poll && (!aPolls || !bPolls || processors < 2) {
		options.Logger.Debug("link emulator cannot poll: timers instead", "devices_pollable", aPolls && bPolls, "gomaxprocs", processors)
		options.Poll = false
	}
	if options.Poll {
		start("polling the devices", func() error { return poll(pollA, pollB, forward, backward) })
	} else {
		start("reading device a", func() error { return forward.readFrom(a) })
		start("reading device b", func() error { return backward.readFrom(b) })
		start("releasing a→b", forward.schedule)
		start("releasing b→a", backward.schedule)
	}

	<-runCtx.Done()
	closing.Store(true)
	closeDevices()
	forward.timer.close()
	backward.timer.close()
	group.Wait()

	stats := Stats{AToB: forward.stats(), BToA: backward.stats()}
	for _, direction := range []struct {
		name  string
		stats DirectionStats
	}{{"a→b", stats.AToB}, {"b→a", stats.BToA}} {
		options.Logger.Debug("link emulator stopped", "direction", direction.name,
			"packets_in", direction.stats.PacketsIn, "packets_out", direction.stats.PacketsOut,
			"dropped_queue", direction.stats.PacketsDroppedQueue, "dropped_loss", direction.stats.PacketsDroppedLoss,
			"lateness_max", time.Duration(direction.stats.LatenessMaxNs))
	}
	if ctx.Err() != nil {
		return stats, nil // stopped as asked
	}
	return stats, context.Cause(runCtx)
}

// packetPool recycles packet buffers between the readers and the schedulers. It is a
// plain free list rather than a sync.Pool: the packets inside a long path are a large,
// steady working set, which a sync.Pool would hand to the garbage collector at every
// cycle and allocate again.
type packetPool struct {
	mu             sync.Mutex
	free           []*Packet
	maxPacketBytes int
}

// maxFreePackets bounds the free list; packets beyond it are left to the garbage
// collector after a burst.
const maxFreePackets = 16384

func newPacketPool(maxPacketBytes int) *packetPool {
	return &packetPool{maxPacketBytes: maxPacketBytes}
}

// fill puts a free packet into every nil slot of packets.
func (p *packetPool) fill(packets []*Packet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range packets {
		if packets[i] != nil {
			continue
		}
		if n := len(p.free); n > 0 {
			packets[i], p.free[n-1] = p.free[n-1], nil
			p.free = p.free[:n-1]
			continue
		}
		// One byte more than the largest packet, so a read that fills the buffer is
		// known to be a packet that did not fit.
		packets[i] = &Packet{buffer: make([]byte, p.maxPacketBytes+1)}
	}
}

// put returns one packet.
func (p *packetPool) put(packet *Packet) {
	p.mu.Lock()
	p.putLocked(packet)
	p.mu.Unlock()
}

// putAll returns packets and clears their slots.
func (p *packetPool) putAll(packets []*Packet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, packet := range packets {
		if packet != nil {
			p.putLocked(packet)
		}
		packets[i] = nil
	}
}

func (p *packetPool) putLocked(packet *Packet) {
	if packet.buffer == nil || len(p.free) >= maxFreePackets {
		return
	}
	packet.Data = nil
	p.free = append(p.free, packet)
}

// direction is one way through the emulator: the pipeline, shared by the reader that
// fills it and the scheduler that empties it, and the device it writes to.
type direction struct {
	name    string
	out     Device
	clock   monotonicClock
	pool    *packetPool
	options RunOptions
	timer   *deadlineTimer

	mu             sync.Mutex
	pipeline       *Pipeline
	schedulerAwake bool  // the scheduler will look at the pipeline before sleeping again
	armedNs        int64 // when the timer fires; math.MaxInt64 when it will not
	arrivals       atomic.Uint64

	// Owned by the reader.
	packetsOversize int64
	// inDevice and outDevice number the devices for RunOptions.Tap.
	inDevice, outDevice int

	// writeMu orders writes to out: whoever dequeues due packets (the scheduler, or the
	// reader when a packet is due the moment it arrives) takes it before releasing mu,
	// so packets are written in the order they left the pipeline. Lock order: mu, then
	// writeMu. It also guards the counters below.
	writeMu                      sync.Mutex
	packetsWriteFailed           int64
	latenessSumNs, latenessMaxNs int64

	// Owned by the scheduler.
	timerWakeups                           int64
	timerLatenessSumNs, timerLatenessMaxNs int64
}

func newDirection(name string, config Config, out Device, clock monotonicClock, pool *packetPool, options RunOptions) (*direction, error) {
	pipeline, err := NewPipeline(config, clock.nowNs(), pool.put)
	if err != nil {
		return nil, fmt.Errorf("direction %s: %w", name, err)
	}
	timer, err := newDeadlineTimer()
	if err != nil {
		return nil, fmt.Errorf("direction %s: %w", name, err)
	}
	return &direction{
		name: name, out: out, clock: clock, pool: pool, options: options, timer: timer,
		pipeline: pipeline, armedNs: math.MaxInt64, // asleep until a reader arms the timer
	}, nil
}

// stats reads the counters; call it once the goroutines have stopped.
func (d *direction) stats() DirectionStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return DirectionStats{
		Counters:           d.pipeline.Counters(),
		PacketsOversize:    d.packetsOversize,
		PacketsWriteFailed: d.packetsWriteFailed,
		LatenessSumNs:      d.latenessSumNs,
		LatenessMaxNs:      d.latenessMaxNs,
		TimerWakeups:       d.timerWakeups,
		TimerLatenessSumNs: d.timerLatenessSumNs,
		TimerLatenessMaxNs: d.timerLatenessMaxNs,
	}
}

// batchReader is one device's read state: the pool packets its buffers belong to,
// and scratch for the packets of its direction that are due (the moment they
// arrive, or, when polling, at each round).
type batchReader struct {
	packets []*Packet
	bufs    [][]byte
	sizes   []int
	due     []*Packet
	dueBufs [][]byte
}

func (d *direction) newBatchReader() *batchReader {
	batchSize := d.options.BatchPackets
	r := &batchReader{
		packets: make([]*Packet, batchSize),
		bufs:    make([][]byte, batchSize),
		sizes:   make([]int, batchSize),
		due:     make([]*Packet, 0, batchSize),
		dueBufs: make([][]byte, 0, batchSize),
	}
	d.pool.fill(r.packets)
	for i, packet := range r.packets {
		r.bufs[i] = packet.buffer
	}
	return r
}

// closeBatchReader returns the reader's packets to the pool.
func (d *direction) closeBatchReader(r *batchReader) { d.pool.putAll(r.packets) }

// readFrom reads batches from in and enqueues them until in fails or is closed.
func (d *direction) readFrom(in Device) error {
	r := d.newBatchReader()
	defer d.closeBatchReader(r)
	for {
		n, err := in.Read(r.bufs, r.sizes)
		if err != nil {
			return err
		}
		if err := d.accept(r, n, true); err != nil {
			return err
		}
	}
}

// accept enqueues the n packets just read into r, writes out those due at once, and,
// when wakeScheduler is set, arms the scheduler's timer for the next one.
func (d *direction) accept(r *batchReader, n int, wakeScheduler bool) error {
	nowNs := d.clock.nowNs()
	d.mu.Lock()
	for i := range n {
		if r.sizes[i] > d.options.MaxPacketBytes || r.sizes[i] >= len(r.bufs[i]) {
			d.packetsOversize++
			continue // the slot keeps its packet for the next read
		}
		r.packets[i].Data = r.packets[i].buffer[:r.sizes[i]]
		if d.options.Tap != nil {
			d.options.Tap(d.inDevice, r.packets[i].Data, d.clock.unixNs(nowNs))
		}
		d.pipeline.Enqueue(r.packets[i], nowNs)
		r.packets[i] = nil
	}
	// Packets due at once (no delay, say) leave from here: waking the scheduler
	// would cost a thread wake-up, tens of microseconds on a virtual machine.
	r.due, r.dueBufs = d.dequeueDueLocked(nowNs, r.due, r.dueBufs)
	if len(r.due) > 0 {
		d.writeMu.Lock()
	}
	var err error
	if wakeScheduler {
		err = d.wakeSchedulerLocked()
	}
	d.mu.Unlock()
	d.arrivals.Add(1)
	if len(r.due) > 0 {
		writeErr := d.writeLocked(r.due, r.dueBufs)
		d.writeMu.Unlock()
		if writeErr != nil {
			return writeErr
		}
	}
	if err != nil {
		return err
	}
	d.pool.fill(r.packets[:n])
	for i := range n {
		r.bufs[i] = r.packets[i].buffer
	}
	return nil
}

// releaseDue writes out the packets due now, in r's scratch for due packets.
func (d *direction) releaseDue(r *batchReader) error {
	d.mu.Lock()
	r.due, r.dueBufs = d.dequeueDueLocked(d.clock.nowNs(), r.due, r.dueBufs)
	if len(r.due) == 0 {
		d.mu.Unlock()
		return nil
	}
	d.writeMu.Lock()
	d.mu.Unlock()
	err := d.writeLocked(r.due, r.dueBufs)
	d.writeMu.Unlock()
	return err
}

// poll is the polling mode (RunOptions.Poll): one goroutine reads both devices without
// waiting and releases each direction's due packets, round after round, until a device
// fails or is closed. Nothing sleeps, so no thread wake-up stands between a packet and
// the emulator, nor between a packet's time and its release: the cost is one processor
// kept busy.
func poll(a, b PollableDevice, forward, backward *direction) error {
	forwardReader, backwardReader := forward.newBatchReader(), backward.newBatchReader()
	defer forward.closeBatchReader(forwardReader)
	defer backward.closeBatchReader(backwardReader)
	sides := [2]struct {
		in        PollableDevice
		direction *direction
		reader    *batchReader
	}{{a, forward, forwardReader}, {b, backward, backwardReader}}
	for {
		for _, side := range sides {
			n, err := side.in.TryRead(side.reader.bufs, side.reader.sizes)
			if err != nil {
				return err
			}
			if n > 0 {
				if err := side.direction.accept(side.reader, n, false); err != nil {
					return err
				}
			}
		}
		for _, side := range sides {
			if err := side.direction.releaseDue(side.reader); err != nil {
				return err
			}
		}
		// No runtime.Gosched here even when idle: it puts the goroutine on the global
		// run queue and wakes another thread to take it, a futex wake-up (tens of µs
		// on a virtual machine) per round that also moves the loop between threads.
		// Other goroutines run on the other processors (Run polls only with two or
		// more), and the runtime preempts a loop that holds one for long.
	}
}

// wakeSchedulerLocked makes sure a sleeping scheduler wakes in time for the pipeline's
// next packet, which a new arrival may have made earlier.
func (d *direction) wakeSchedulerLocked() error {
	if d.schedulerAwake {
		return nil
	}
	nextNs, ok := d.pipeline.NextReadyNs()
	if !ok {
		return nil
	}
	wakeNs := nextNs - max(d.options.EarlyWakeNs, 0)
	if wakeNs >= d.armedNs {
		return nil
	}
	d.armedNs = wakeNs
	return d.timer.armAt(wakeNs)
}

// schedule writes packets out at their time until the timer or the output device is
// closed.
func (d *direction) schedule() error {
	batchSize := d.options.BatchPackets
	due := make([]*Packet, 0, batchSize)
	bufs := make([][]byte, 0, batchSize)
	spin := spinBudget{share: d.options.SpinShare, capacityNs: 5_000_000}
	spin.refill(d.clock.nowNs())
	for {
		if err := d.timer.wait(); err != nil {
			return err
		}
		wokeNs := d.clock.nowNs()
		d.mu.Lock()
		if d.armedNs != math.MaxInt64 {
			latenessNs := max(wokeNs-d.armedNs, 0)
			d.timerWakeups++
			d.timerLatenessSumNs += latenessNs
			d.timerLatenessMaxNs = max(d.timerLatenessMaxNs, latenessNs)
		}
		d.schedulerAwake, d.armedNs = true, math.MaxInt64
		d.mu.Unlock()
		for {
			nowNs := d.clock.nowNs()
			d.mu.Lock()
			due, bufs = d.dequeueDueLocked(nowNs, due, bufs)
			nextNs, pending := d.pipeline.NextReadyNs()
			if len(due) == 0 && !pending {
				d.schedulerAwake = false // nothing to do: readers arm the timer
				d.mu.Unlock()
				break
			}
			if len(due) > 0 {
				d.writeMu.Lock()
			}
			d.mu.Unlock()
			if len(due) > 0 {
				err := d.writeLocked(due, bufs)
				d.writeMu.Unlock()
				if err != nil {
					return err
				}
				continue // time has moved on: look again
			}
			waitNs := nextNs - d.clock.nowNs()
			if waitNs <= 0 {
				continue
			}
			if d.options.EarlyWakeNs >= 0 && waitNs <= d.options.EarlyWakeNs && spin.take(nowNs, waitNs) {
				d.spinUntil(nextNs)
				continue
			}
			if err := d.sleepUntilNext(spin.available(nowNs)); err != nil {
				return err
			}
			break
		}
	}
}

// sleepUntilNext arms the timer for the pipeline's next packet (asking it again, as
// a reader may have added an earlier one) and marks the scheduler asleep.
func (d *direction) sleepUntilNext(spinAvailableNs int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	nextNs, ok := d.pipeline.NextReadyNs()
	d.schedulerAwake = false
	if !ok {
		return nil
	}
	wakeNs := nextNs
	if d.options.EarlyWakeNs > 0 && spinAvailableNs >= d.options.EarlyWakeNs {
		wakeNs -= d.options.EarlyWakeNs
	}
	d.armedNs = wakeNs
	return d.timer.armAt(wakeNs)
}

// spinUntil yields the processor until deadlineNs, or until a reader adds packets (one
// may be due sooner).
func (d *direction) spinUntil(deadlineNs int64) {
	arrivals := d.arrivals.Load()
	for d.clock.nowNs() < deadlineNs && d.arrivals.Load() == arrivals {
		runtime.Gosched()
	}
}

// dequeueDueLocked collects up to a batch of packets due at nowNs into due (and their
// bytes into bufs), reusing both slices.
func (d *direction) dequeueDueLocked(nowNs int64, due []*Packet, bufs [][]byte) ([]*Packet, [][]byte) {
	due, bufs = due[:0], bufs[:0]
	for len(due) < cap(due) {
		packet := d.pipeline.Dequeue(nowNs)
		if packet == nil {
			break
		}
		due = append(due, packet)
		bufs = append(bufs, packet.Data)
	}
	return due, bufs
}

// writeLocked hands due packets to the output device and returns them to the pool. The
// caller holds writeMu.
func (d *direction) writeLocked(due []*Packet, bufs [][]byte) error {
	nowNs := d.clock.nowNs()
	for _, packet := range due {
		latenessNs := max(nowNs-packet.TimeNs, 0)
		d.latenessSumNs += latenessNs
		d.latenessMaxNs = max(d.latenessMaxNs, latenessNs)
		if d.options.Tap != nil {
			d.options.Tap(d.outDevice, packet.Data, d.clock.unixNs(nowNs))
		}
	}
	var err error
	for sent := 0; sent < len(bufs); {
		var n int
		n, err = d.out.Write(bufs[sent:])
		sent += n
		if err == nil || isClosedError(err) || sent >= len(bufs) {
			break
		}
		// One packet refused (a malformed one, say): count it and go on with the rest.
		if d.packetsWriteFailed == 0 {
			d.options.Logger.Warn("output device refused a packet; counting further ones silently", "direction", d.name, "error", err)
		}
		d.packetsWriteFailed++
		sent++
		err = nil
	}
	d.pool.putAll(due)
	return err
}

// spinBudget is a token bucket of spinning time: it fills at share of wall time up to
// capacityNs, and each spin takes its length from it.
type spinBudget struct {
	share        float64
	capacityNs   int64
	tokensNs     int64
	lastRefillNs int64
}

func (b *spinBudget) refill(nowNs int64) {
	if b.lastRefillNs != 0 {
		b.tokensNs = min(b.capacityNs, b.tokensNs+int64(float64(nowNs-b.lastRefillNs)*b.share))
	} else {
		b.tokensNs = b.capacityNs
	}
	b.lastRefillNs = nowNs
}

// take spends spinNs if the budget holds it.
func (b *spinBudget) take(nowNs, spinNs int64) bool {
	b.refill(nowNs)
	if b.tokensNs < spinNs {
		return false
	}
	b.tokensNs -= spinNs
	return true
}

// available returns the spinning time the budget holds now.
func (b *spinBudget) available(nowNs int64) int64 {
	b.refill(nowNs)
	return b.tokensNs
}
