package ktcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Tracer follows the TCP sockets a Filter selects from the kernel: its programs
// are attached from Open until Close. Read hands out the events in the order
// the kernel wrote them; one goroutine should call Read in a loop.
type Tracer struct {
	kinds  []Kind
	coll   *ebpf.Collection
	progs  []*ebpf.Program // by kind, in the order of kinds
	links  []link.Link
	marker *ebpf.Program
	// The maps of coll.
	ring, counters, sync *ebpf.Map
	reader               *ringbuf.Reader

	readMu sync.Mutex // one Read at a time: record is reused
	record ringbuf.Record
	read   [counterSlots / 2]atomic.Uint64 // events handed out, by kind

	clockOffsetNs int64 // CLOCK_REALTIME - CLOCK_MONOTONIC when the tracer opened

	syncMu     sync.Mutex // one marker in the ring at a time
	nextMarker uint64

	markMu       sync.Mutex
	lastMarker   uint64        // the last marker Read came across
	markerSeen   chan struct{} // closed and replaced when Read comes across a marker
	progress     chan struct{} // closed and replaced when Read takes a record and wantProgress is set
	wantProgress atomic.Bool
	closed       chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Options configure Open.
type Options struct {
	// Filter selects the sockets; the zero Filter selects all.
	Filter Filter
	// Kinds are the tracepoints to follow; empty: AllKinds.
	Kinds []Kind
	// RingBytes is the size of the ring buffer between the kernel and Read, a
	// power of two of at least one page; 0: DefaultRingBytes. When Read falls
	// that far behind, the kernel drops events and counts them (Stats.Lost).
	RingBytes int
}

// DefaultRingBytes is the ring buffer's default size: about 95,000 events,
// a tenth of a second at a million events a second.
const DefaultRingBytes = 16 << 20

// Open loads the programs and attaches them to the tracepoints. The programs,
// maps and links are file descriptors of this process: Close releases them, and
// so does the kernel when the process ends, however it ends (a SIGKILL
// included); nothing is pinned and nothing on the system changes. When the
// kernel cannot run them, the error is an *UnavailableError (errors.Is(err,
// ErrUnavailable)) that says why in one line.
func Open(opts Options) (*Tracer, error) {
	if err := opts.Filter.validate(); err != nil {
		return nil, err
	}
	kinds := opts.Kinds
	if len(kinds) == 0 {
		kinds = AllKinds
	}
	for i, k := range kinds {
		if _, ok := tracepointOf[k]; !ok {
			return nil, fmt.Errorf("ktcp: unknown event kind %d", k)
		}
		if slices.Contains(kinds[:i], k) {
			return nil, fmt.Errorf("ktcp: event kind %s asked for twice", k)
		}
	}
	ringBytes := opts.RingBytes
	if ringBytes == 0 {
		ringBytes = DefaultRingBytes
	}
	if ringBytes < os.Getpagesize() || ringBytes&(ringBytes-1) != 0 || ringBytes > 1<<30 {
		return nil, fmt.Errorf("ktcp: ring buffer of %d bytes: it must be a power of two from one page (%d bytes) to 1 GiB", ringBytes, os.Getpagesize())
	}

	spec, err := kernelTypes.Kernel()
	if err != nil {
		return nil, unavailable(err, fmt.Sprintf("this kernel exposes no BTF type information (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF): %v", err))
	}
	l, err := loadLayout(spec)
	if err != nil {
		return nil, unavailable(err, err.Error())
	}
	for _, k := range kinds {
		if err := checkTracepoint(spec, tracepointOf[k]); err != nil {
			return nil, unavailable(err, err.Error())
		}
	}
	// Kernels before 5.11 count BPF memory against RLIMIT_MEMLOCK; this raises
	// the process's own limit there and does nothing on newer ones.
	_ = rlimit.RemoveMemlock()

	t := &Tracer{
		kinds:      slices.Clone(kinds),
		markerSeen: make(chan struct{}),
		progress:   make(chan struct{}),
		closed:     make(chan struct{}),
	}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	collSpec := &ebpf.CollectionSpec{
		Maps: mapSpecs(ringBytes, opts.Filter),
		Programs: map[string]*ebpf.ProgramSpec{
			"ktcp_marker": {
				Name:         "ktcp_marker",
				Type:         ebpf.SocketFilter,
				Instructions: buildMarker(),
				License:      "Dual MIT/GPL",
			},
		},
	}
	for _, k := range kinds {
		name := "ktcp_" + shortName(k)
		collSpec.Programs[name] = &ebpf.ProgramSpec{
			Name:         name,
			Type:         ebpf.Tracing,
			AttachType:   ebpf.AttachTraceRawTp,
			AttachTo:     tracepointOf[k],
			Instructions: build(l, opts.Filter, k, wakeBytes(ringBytes)),
			License:      "Dual MIT/GPL",
		}
	}
	t.coll, err = ebpf.NewCollectionWithOptions(collSpec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: spec},
		Cache:    kernelTypes,
	})
	if err != nil {
		return nil, loadError("load the programs", err)
	}
	for _, k := range kinds {
		t.progs = append(t.progs, t.coll.Programs["ktcp_"+shortName(k)])
	}
	t.marker = t.coll.Programs["ktcp_marker"]
	t.ring, t.counters, t.sync = t.coll.Maps[mapRing], t.coll.Maps[mapCounters], t.coll.Maps[mapSync]
	t.reader, err = ringbuf.NewReader(t.ring)
	if err != nil {
		return nil, loadError("map the ring buffer", err)
	}
	t.reader.SetDeadline(time.Now().Add(readLatency))
	t.clockOffsetNs = clockOffset()
	for i, prog := range t.progs {
		lk, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return nil, loadError("attach to tracepoint "+tracepointOf[kinds[i]], err)
		}
		t.links = append(t.links, lk)
	}
	ok = true
	return t, nil
}

// wakeBytes is how full the ring is before the kernel wakes the reader: a
// sixteenth of it, at most 256 KiB (about 1,500 events).
func wakeBytes(ringBytes int) int32 {
	return int32(min(ringBytes/16, 256<<10))
}

// readLatency is the longest an event waits in the ring before Read takes it,
// when the ring holds less than wakeBytes.
const readLatency = 25 * time.Millisecond

// shortName fits a program name in the kernel's 15 characters.
func shortName(k Kind) string {
	switch k {
	case KindProbe:
		return "probe"
	case KindState:
		return "state"
	case KindRetransmit:
		return "retransmit"
	case KindCongestionState:
		return "cong_state"
	}
	return "unknown"
}

// kernelTypes holds the kernel's BTF once read, for every Open of the
// process: reading it takes tens of milliseconds, and it does not change while
// the kernel runs.
var kernelTypes = btf.NewCache()

// mapSpecs describes the maps the filter needs, the filter's contents in them.
func mapSpecs(ringBytes int, f Filter) map[string]*ebpf.MapSpec {
	specs := map[string]*ebpf.MapSpec{
		mapRing:     {Name: mapRing, Type: ebpf.RingBuf, MaxEntries: uint32(ringBytes)},
		mapCounters: {Name: mapCounters, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: counterSlots},
		mapSync:     {Name: mapSync, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1},
	}
	if len(f.LocalPorts) > 0 || len(f.RemotePorts) > 0 {
		words := make([]uint64, 2*portBitmapWords)
		for _, port := range f.LocalPorts {
			words[port/64] |= 1 << (port % 64)
		}
		for _, port := range f.RemotePorts {
			words[portBitmapWords+int(port/64)] |= 1 << (port % 64)
		}
		spec := &ebpf.MapSpec{Name: mapPorts, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2 * portBitmapWords}
		for i, w := range words {
			if w != 0 {
				spec.Contents = append(spec.Contents, ebpf.MapKV{Key: uint32(i), Value: w})
			}
		}
		specs[mapPorts] = spec
	}
	if len(f.LocalAddrs) > 0 {
		spec := &ebpf.MapSpec{Name: mapAddrs, Type: ebpf.Hash, KeySize: 16, ValueSize: 1, MaxEntries: uint32(len(f.LocalAddrs))}
		seen := map[[16]byte]bool{}
		for _, a := range f.LocalAddrs {
			if key := addrKey(a); !seen[key] {
				seen[key] = true
				spec.Contents = append(spec.Contents, ebpf.MapKV{Key: key, Value: uint8(1)})
			}
		}
		specs[mapAddrs] = spec
	}
	return specs
}

// loadError turns a failure to create, load or attach into an
// UnavailableError whose reason says what the user can do.
func loadError(what string, err error) error {
	var verr *ebpf.VerifierError
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		if os.Geteuid() == 0 {
			return unavailable(err, what+": permission denied although running as root: kernel lockdown or a security module forbids BPF tracing")
		}
		return unavailable(err, what+": permission denied: run as root, or with the capabilities CAP_BPF and CAP_PERFMON")
	case errors.Is(err, unix.ENOSYS):
		return unavailable(err, what+": this kernel has no BPF system call (CONFIG_BPF_SYSCALL)")
	case errors.As(err, &verr):
		last := ""
		if n := len(verr.Log); n > 0 {
			last = verr.Log[n-1]
		}
		return unavailable(err, fmt.Sprintf("%s: the kernel's verifier refused it (%s)", what, strings.TrimSpace(last)))
	case errors.Is(err, ebpf.ErrNotSupported):
		return unavailable(err, fmt.Sprintf("%s: this kernel does not support it (%v)", what, err))
	}
	return fmt.Errorf("ktcp: %s: %w", what, err)
}

// clockOffset returns CLOCK_REALTIME - CLOCK_MONOTONIC, read between two
// readings of the monotonic clock.
func clockOffset() int64 {
	var before, real, after unix.Timespec
	best := int64(-1)
	var offset int64
	for range 5 {
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
		unix.ClockGettime(unix.CLOCK_REALTIME, &real)
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
		if span := after.Nano() - before.Nano(); best < 0 || span < best {
			best = span
			offset = real.Nano() - (before.Nano()+after.Nano())/2
		}
	}
	return offset
}

// UnixNs maps an event's MonoNs to Unix time in nanoseconds, with the offset
// between the two clocks read when the tracer opened (a later step of the wall
// clock is not followed).
func (t *Tracer) UnixNs(monoNs int64) int64 { return monoNs + t.clockOffsetNs }

// Kinds are the kinds of events the tracer follows.
func (t *Tracer) Kinds() []Kind { return slices.Clone(t.kinds) }

// Read waits for the next event and fills ev with it. It returns ErrClosed once
// the tracer is closed.
func (t *Tracer) Read(ev *Event) error {
	t.readMu.Lock()
	defer t.readMu.Unlock()
	for {
		if err := t.reader.ReadInto(&t.record); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The ring is empty and the poll interval over: wait for the next one.
				t.reader.SetDeadline(time.Now().Add(readLatency))
				continue
			}
			if errors.Is(err, os.ErrClosed) {
				return ErrClosed
			}
			return fmt.Errorf("ktcp: read the ring buffer: %w", err)
		}
		if t.wantProgress.Load() {
			t.signalProgress()
		}
		raw := t.record.RawSample
		if len(raw) < recordSize {
			return fmt.Errorf("ktcp: a record of %d bytes in the ring buffer, want %d", len(raw), recordSize)
		}
		if Kind(raw[recKind]) == kindMarker {
			t.sawMarker(binary.NativeEndian.Uint64(raw[recCookie:]))
			continue
		}
		decode(raw, ev)
		if int(ev.Kind) < len(t.read) {
			t.read[ev.Kind].Add(1)
		}
		return nil
	}
}

func (t *Tracer) signalProgress() {
	t.markMu.Lock()
	if t.wantProgress.Swap(false) {
		close(t.progress)
		t.progress = make(chan struct{})
	}
	t.markMu.Unlock()
}

func (t *Tracer) sawMarker(seq uint64) {
	t.markMu.Lock()
	t.lastMarker = seq
	close(t.markerSeen)
	t.markerSeen = make(chan struct{})
	t.markMu.Unlock()
}

// Sync returns once Read has handed out every event the kernel wrote before
// Sync was called, and been called again: a goroutine must be reading. It
// puts a marker in the ring buffer after those events and waits for Read to
// come across it.
func (t *Tracer) Sync(ctx context.Context) error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	if t.isClosed() {
		return ErrClosed
	}
	t.nextMarker++
	seq := t.nextMarker
	if err := t.sync.Put(uint32(0), seq); err != nil {
		if t.isClosed() {
			return ErrClosed
		}
		return fmt.Errorf("ktcp: sync: %w", err)
	}
	for {
		t.markMu.Lock()
		t.wantProgress.Store(true)
		progress := t.progress
		t.markMu.Unlock()
		placed, err := t.marker.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
		if err != nil {
			if t.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("ktcp: sync: run the marker program: %w", err)
		}
		if placed == 1 {
			break
		}
		// The ring is full: wait until Read takes a record and frees room.
		select {
		case <-progress:
		case <-t.closed:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		t.markMu.Lock()
		if t.lastMarker >= seq {
			t.markMu.Unlock()
			return nil
		}
		seen := t.markerSeen
		t.markMu.Unlock()
		select {
		case <-seen:
		case <-t.closed:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (t *Tracer) isClosed() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// KindStats are the counts of one kind of event.
type KindStats struct {
	Kind Kind
	// Submitted events were written to the ring buffer by the kernel; Lost ones
	// matched the filter but found the ring buffer full and were dropped; Read
	// ones were handed out by Read.
	Submitted, Lost, Read uint64
}

// Stats are the tracer's counts since Open.
type Stats struct {
	// Submitted, Lost and Read are the sums over Kinds.
	Submitted, Lost, Read uint64
	Kinds                 []KindStats
}

// Stats reads the kernel's counters and the reader's.
func (t *Tracer) Stats() (Stats, error) {
	var s Stats
	for _, k := range t.kinds {
		ks := KindStats{Kind: k, Read: t.read[k].Load()}
		for slot, total := range map[uint32]*uint64{2 * uint32(k): &ks.Submitted, 2*uint32(k) + 1: &ks.Lost} {
			var perCPU []uint64
			if err := t.counters.Lookup(slot, &perCPU); err != nil {
				return s, fmt.Errorf("ktcp: read the counters: %w", err)
			}
			for _, v := range perCPU {
				*total += v
			}
		}
		s.Submitted += ks.Submitted
		s.Lost += ks.Lost
		s.Read += ks.Read
		s.Kinds = append(s.Kinds, ks)
	}
	return s, nil
}

// Close detaches the programs and releases everything Open made; a Read or
// Sync waiting returns ErrClosed. Later calls return the first one's result.
func (t *Tracer) Close() error {
	t.closeOnce.Do(func() {
		if t.closed != nil {
			close(t.closed)
		}
		var errs []error
		for _, lk := range t.links {
			errs = append(errs, lk.Close())
		}
		if t.reader != nil {
			errs = append(errs, t.reader.Close())
		}
		if t.coll != nil {
			t.coll.Close()
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// Objects are the kernel IDs of a tracer's programs, links and maps, as
// bpftool lists them: what a check that nothing is left behind looks for.
type Objects struct {
	Programs, Links, Maps []uint32
}

// Objects returns the IDs of what the tracer loaded.
func (t *Tracer) Objects() (Objects, error) {
	var o Objects
	for _, prog := range append(slices.Clone(t.progs), t.marker) {
		info, err := prog.Info()
		if err != nil {
			return o, err
		}
		id, _ := info.ID()
		o.Programs = append(o.Programs, uint32(id))
	}
	for _, lk := range t.links {
		info, err := lk.Info()
		if err != nil {
			return o, err
		}
		o.Links = append(o.Links, uint32(info.ID))
	}
	for _, m := range t.coll.Maps {
		info, err := m.Info()
		if err != nil {
			return o, err
		}
		id, _ := info.ID()
		o.Maps = append(o.Maps, uint32(id))
	}
	return o, nil
}
