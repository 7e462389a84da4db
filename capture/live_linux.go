//go:build linux

package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/slowstart/slowstart/internal/netnsexec"

	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// How a live capture reads: a plain AF_PACKET socket of type SOCK_DGRAM
// (packets from the IP header on, whatever the link layer) bound to one
// interface, read in batches with recvmmsg through the Go poller. Each
// message brings the kernel's receive timestamp (SO_TIMESTAMPNS), the
// packet's original length (PACKET_AUXDATA) and its direction (sll_pkttype).
// Asked for (LiveOptions.Ring), the socket has a TPACKET_V3 packet ring
// instead (ring_linux.go): the kernel writes packets, with the same three, into
// memory it shares with the process, and no system call or copy is made per
// packet; it hands them over in blocks, on a timer when they come slowly, so
// that a capture that stops waits for the last block (a few milliseconds).

const (
	// batchDataBytes bounds the packet buffers of one batch; a batch holds
	// between minBatchPackets and maxBatchPackets packets of snaplen bytes.
	batchDataBytes  = 2 << 20
	minBatchPackets = 8
	maxBatchPackets = 64
	// controlBytes per message: SCM_TIMESTAMPNS (32 bytes) and PACKET_AUXDATA
	// (40 bytes) with room to spare; a multiple of 8 keeps the headers aligned.
	controlBytes = 128
	// stopDeadlineUnixSeconds is a read deadline in the past: setting it
	// wakes a blocked read.
	stopDeadlineUnixSeconds = 1
)

// Live captures TCP packets on one interface. One goroutine calls Next;
// Stop, Stats, SetFilter, Tee and Close may be called from any goroutine.
type Live struct {
	file        *os.File // the packet socket, registered with the Go poller
	conn        syscall.RawConn
	iface       string
	loopback    bool // drop outgoing copies (each packet also comes back in)
	snaplen     int
	bufferBytes int

	// The batch: message i's packet lands in data[i*snaplen:], its control
	// messages in control[i*controlBytes:], its link-layer address in names[i].
	msgs       []unix.Mmsghdr
	iovecs     []unix.Iovec
	names      []unix.RawSockaddrLinklayer
	data       []byte
	control    []byte
	batchCount int // messages the last recvmmsg filled
	batchNext  int // the next of them to hand out
	recvCount  int // set by recvBatch
	recvErr    error
	readFn     func(fd uintptr) bool // recvBatch, made once: a method value allocates
	drainFn    func(fd uintptr)
	eof        bool

	// ring, when the kernel gave one, is what Next reads (the batch above is
	// then unused); closed tells its reader to unmap it.
	ring   *ring
	closed atomic.Bool

	dec *decoder
	tee atomic.Pointer[PcapWriter]

	filterMu       sync.Mutex // orders SetFilter and Stop
	stopped        atomic.Bool
	stopOnce       sync.Once
	closeOnce      sync.Once
	closeErr       error
	stopAfterCtx   func() bool
	packets, bytes atomic.Int64
	tcp, undecoded atomic.Int64

	lastTimestampNs   int64 // of the last packet read: timestamps never go back
	untimed           int64 // packets without a kernel timestamp
	clampedTimestamps atomic.Int64
	maxClampNs        atomic.Int64

	kernelMu                   sync.Mutex
	kernelPackets, kernelDrops int64
}

// OpenLive starts capturing on opts.Interface with opts.Filter applied in
// the kernel. From the moment it returns, every packet that matches is kept
// until Next hands it over (or the receive buffer overflows: see
// LiveStats.KernelDrops). When ctx is done the capture stops as if Stop were
// called. Close the Live when done.
func OpenLive(ctx context.Context, opts LiveOptions) (*Live, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("capture: opening a live capture: %w", err)
	}
	if opts.Interface == "" {
		return nil, errors.New("capture: live capture needs an interface name (see RouteInterface, or ip route get ADDRESS)")
	}
	if opts.Snaplen == 0 {
		opts.Snaplen = DefaultSnaplen
	}
	if opts.BufferBytes == 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	if opts.BufferBytes < 0 {
		return nil, fmt.Errorf("capture: negative receive buffer size %d", opts.BufferBytes)
	}
	program, err := filterProgram(opts.Filter, opts.Snaplen)
	if err != nil {
		return nil, err
	}

	var sock packetSocket
	err = netnsexec.Run(opts.Netns, func() error {
		var err error
		sock, err = openPacketSocket(opts, program)
		return err
	})
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(sock.fd), "packet socket on "+opts.Interface)
	conn, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("capture: registering the packet socket on %s with the poller: %w", opts.Interface, err)
	}
	l := &Live{
		file: file, conn: conn, iface: opts.Interface, loopback: sock.loopback,
		snaplen: opts.Snaplen, bufferBytes: sock.bufferBytes, dec: newDecoder(), ring: sock.ring,
	}
	if l.ring != nil {
		l.bufferBytes = l.ring.blocks * l.ring.blockBytes
		runtime.AddCleanup(l, (*ringMapping).unmap, l.ring.mapping)
	} else {
		l.allocateBatch()
	}
	l.stopAfterCtx = context.AfterFunc(ctx, l.Stop)
	slog.Debug("live capture started", "interface", opts.Interface, "netns", opts.Netns,
		"filter", opts.Filter.String(), "snaplen", opts.Snaplen, "buffer_bytes", sock.bufferBytes)
	return l, nil
}

// packetSocket is a bound packet socket with its filter, before it is
// handed to the poller.
type packetSocket struct {
	fd          int
	loopback    bool
	bufferBytes int   // what the kernel granted
	ring        *ring // nil: read with recvmmsg
}

// openPacketSocket makes the capture socket in the current network namespace
// (of the calling thread). The socket is made with protocol 0 so that it
// receives nothing until bind; it gets a filter that drops everything before
// bind, is drained after, and only then gets the real filter: no packet
// that the filter would refuse can slip in.
func openPacketSocket(opts LiveOptions, program []bpf.RawInstruction) (packetSocket, error) {
	link, err := netlink.LinkByName(opts.Interface)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return packetSocket{}, fmt.Errorf("capture: no interface named %q%s (see ip link): %w",
				opts.Interface, inNetnsText(opts.Netns), ErrNoInterface)
		}
		return packetSocket{}, fmt.Errorf("capture: looking up interface %q%s: %w", opts.Interface, inNetnsText(opts.Netns), err)
	}
	ifIndex := link.Attrs().Index
	loopback := link.Attrs().Flags&net.FlagLoopback != 0

	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return packetSocket{}, fmt.Errorf("capture: opening a packet socket: %w (%w)", ErrPermission, err)
		}
		return packetSocket{}, fmt.Errorf("capture: opening a packet socket: %w", err)
	}
	sock := packetSocket{fd: fd, loopback: loopback}
	fail := func(what string, err error) (packetSocket, error) {
		if sock.ring != nil {
			sock.ring.mapping.unmap()
		}
		unix.Close(fd)
		return packetSocket{}, fmt.Errorf("capture: packet socket on %s: %s: %w", opts.Interface, what, err)
	}

	if err := attachFilter(fd, dropAllProgram()); err != nil {
		return fail("attaching the drop-all filter", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, opts.BufferBytes); err != nil {
		// Without CAP_NET_ADMIN the buffer is capped by net.core.rmem_max.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, opts.BufferBytes); err != nil {
			return fail("setting the receive buffer", err)
		}
	}
	if sock.bufferBytes, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		return fail("reading the receive buffer size", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("asking for kernel timestamps (SO_TIMESTAMPNS)", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return fail("asking for packet lengths (PACKET_AUXDATA)", err)
	}
	if !opts.Ring {
		// Packets wait in the receive buffer, read with recvmmsg.
	} else if r, err := setupRing(fd, opts.BufferBytes); err == nil {
		sock.ring = r
	} else {
		slog.Debug("live capture: no packet ring, reading with recvmmsg", "interface", opts.Interface, "err", err)
	}
	if loopback {
		// Each packet crosses loopback twice (out, then in): keep the copy
		// coming in. Kernels before 4.20 lack the option; Next skips the
		// outgoing copies anyway.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			slog.Debug("PACKET_IGNORE_OUTGOING not available; outgoing loopback copies are skipped in user space", "err", err)
		}
	}
	bindAddr := &unix.SockaddrLinklayer{Protocol: hostToNetwork16(unix.ETH_P_ALL), Ifindex: ifIndex}
	if err := unix.Bind(fd, bindAddr); err != nil {
		return fail("binding to the interface", err)
	}
	if err := drainSocket(fd); err != nil {
		return fail("draining packets queued before the filter", err)
	}
	if err := attachFilter(fd, program); err != nil {
		return fail("attaching the filter "+opts.Filter.String(), err)
	}
	// Reading the statistics resets them: count from the real filter on.
	if _, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err != nil {
		return fail("reading the packet statistics", err)
	}
	return sock, nil
}

func inNetnsText(path string) string {
	if path == "" {
		return ""
	}
	return " in network namespace " + path
}

// hostToNetwork16 is htons: sockaddr_ll's protocol is in network byte order.
func hostToNetwork16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// attachFilter sets (or replaces, atomically) the socket's BPF filter.
func attachFilter(fd int, program []bpf.RawInstruction) error {
	filters := make([]unix.SockFilter, len(program))
	for i, ins := range program {
		filters[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog)
}

// drainSocket discards whatever the socket holds.
func drainSocket(fd int) error {
	var buf [1]byte
	for {
		_, _, err := unix.Recvfrom(fd, buf[:], unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		switch {
		case err == nil, errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			return nil
		default:
			return err
		}
	}
}

// allocateBatch makes the buffers of one recvmmsg and points the messages at them.
func (l *Live) allocateBatch() {
	n := min(max(batchDataBytes/l.snaplen, minBatchPackets), maxBatchPackets)
	l.msgs = make([]unix.Mmsghdr, n)
	l.iovecs = make([]unix.Iovec, n)
	l.names = make([]unix.RawSockaddrLinklayer, n)
	l.data = make([]byte, n*l.snaplen)
	l.control = make([]byte, n*controlBytes)
	for i := range l.msgs {
		l.iovecs[i].Base = &l.data[i*l.snaplen]
		l.iovecs[i].SetLen(l.snaplen)
		h := &l.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&l.names[i]))
		h.Iov = &l.iovecs[i]
		h.SetIovlen(1)
		h.Control = &l.control[i*controlBytes]
	}
	l.readFn = l.recvBatch
	l.drainFn = func(fd uintptr) { l.recvBatch(fd) }
}

// recvBatch reads up to a batch of packets without blocking. It returns false
// when there is nothing to read (the poller then waits), true otherwise with
// recvCount and recvErr set.
func (l *Live) recvBatch(fd uintptr) bool {
	for i := range l.msgs {
		h := &l.msgs[i].Hdr
		h.Namelen = unix.SizeofSockaddrLinklayer
		h.SetControllen(controlBytes)
		h.Flags = 0
		l.msgs[i].Len = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&l.msgs[0])),
			uintptr(len(l.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			l.recvCount, l.recvErr = int(n), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			l.recvCount, l.recvErr = 0, nil
			return false
		default:
			l.recvCount, l.recvErr = 0, errno
			return true
		}
	}
}

// Next fills p with the next captured TCP segment. It blocks until one
// arrives or the capture stops; after Stop it returns the packets that were
// captured before it and then io.EOF. Payload points into the Live's buffer
// and is valid until the next call. Packets that are not TCP (possible only
// with a filter that passes them) are skipped and counted.
func (l *Live) Next(p *Packet) error {
	if l.ring != nil {
		return l.nextFromRing(p)
	}
	for {
		for l.batchNext < l.batchCount {
			i := l.batchNext
			l.batchNext++
			if l.takePacket(i, p) {
				return nil
			}
		}
		if l.eof {
			return io.EOF
		}
		if err := l.readBatch(); err != nil {
			return err
		}
	}
}

// Buffered is how many packets of the batch read from the kernel are still
// to be handed over (not all of them TCP): Next returns at least the next of
// them without waiting. Called from Next's goroutine.
func (l *Live) Buffered() int {
	if r := l.ring; r != nil {
		switch {
		case r.mem == nil:
			return 0
		case r.held && r.left > 0:
			return r.left
		case !r.held && r.ready():
			return 1
		}
		return 0
	}
	return l.batchCount - l.batchNext
}

// readBatch fills the batch, waiting for packets unless the capture has
// stopped; once stopped, an empty socket is the end (l.eof).
func (l *Live) readBatch() error {
	l.batchCount, l.batchNext = 0, 0
	if !l.stopped.Load() {
		err := l.conn.Read(l.readFn)
		if err == nil {
			return l.takeBatch()
		}
		if !l.stopped.Load() {
			return fmt.Errorf("capture: reading packets on %s: %w", l.iface, err)
		}
		// Stop set a past deadline to wake this read: drain below.
	}
	if err := l.conn.Control(l.drainFn); err != nil {
		l.eof = true // closed: nothing more can be read
		return nil
	}
	if err := l.takeBatch(); err != nil {
		return err
	}
	if l.batchCount == 0 {
		l.eof = true
	}
	return nil
}

func (l *Live) takeBatch() error {
	if l.recvErr != nil {
		return fmt.Errorf("capture: reading packets on %s: %w", l.iface, l.recvErr)
	}
	l.batchCount = l.recvCount
	return nil
}

// takePacket decodes message i of the batch into p; false if it is to be
// skipped (an outgoing copy on loopback, or not a TCP segment).
func (l *Live) takePacket(i int, p *Packet) bool {
	if l.loopback && l.names[i].Pkttype == unix.PACKET_OUTGOING {
		return false
	}
	data := l.data[i*l.snaplen : i*l.snaplen+int(l.msgs[i].Len)]
	timestampNs, wireBytes := parseControl(l.control[i*controlBytes : i*controlBytes+int(l.msgs[i].Hdr.Controllen)])
	return l.takeFrame(data, timestampNs, wireBytes, p)
}

// takeFrame decodes a packet read from the kernel into p; false if it is to
// be skipped (not a TCP segment).
func (l *Live) takeFrame(data []byte, timestampNs int64, wireBytes int, p *Packet) bool {
	if timestampNs == 0 {
		timestampNs = time.Now().UnixNano() // the kernel gave none
		l.untimed++
	}
	if timestampNs < l.lastTimestampNs {
		// The kernel stamps outgoing and incoming packets on different
		// paths (and CPUs): its queue order can disagree with the stamps by
		// a few microseconds. The queue order stands; the stamp follows it.
		l.clampedTimestamps.Add(1)
		l.maxClampNs.Store(max(l.maxClampNs.Load(), l.lastTimestampNs-timestampNs))
		timestampNs = l.lastTimestampNs
	}
	l.lastTimestampNs = timestampNs
	wireBytes = max(wireBytes, len(data))
	l.packets.Add(1)
	l.bytes.Add(int64(wireBytes))
	if w := l.tee.Load(); w != nil {
		if err := w.WritePacket(data, timestampNs, wireBytes); err != nil {
			// The writer keeps the error and returns it from Flush.
			l.tee.CompareAndSwap(w, nil)
			slog.Warn("live capture: writing the pcap copy failed; the copy stops here", "interface", l.iface, "err", err)
		}
	}
	switch l.dec.decode(data, wireBytes, layers.LinkTypeRaw, p) {
	case decodedTCP:
		l.tcp.Add(1)
		p.TimestampNs = timestampNs
		p.Interface = 0
		return true
	case decodedUndecodable:
		l.undecoded.Add(1)
	}
	return false
}

// parseControl reads a message's receive timestamp (0 if absent) and the
// packet's original length (0 if absent) from its control messages.
func parseControl(control []byte) (timestampNs int64, wireBytes int) {
	headerBytes := unix.CmsgLen(0)
	for len(control) >= headerBytes {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&control[0]))
		msgBytes := int(h.Len)
		if msgBytes < headerBytes || msgBytes > len(control) {
			break
		}
		payload := control[headerBytes:msgBytes]
		switch {
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(payload) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts := (*unix.Timespec)(unsafe.Pointer(&payload[0]))
			timestampNs = ts.Nano()
		case h.Level == unix.SOL_PACKET && h.Type == unix.PACKET_AUXDATA && len(payload) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})):
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&payload[0]))
			wireBytes = int(aux.Len)
		}
		next := unix.CmsgSpace(msgBytes - headerBytes)
		if next >= len(control) {
			break
		}
		control = control[next:]
	}
	return timestampNs, wireBytes
}

// Stop ends the capture: packets that reach the interface after Stop returns
// are not captured, and those captured before are not lost: Next hands them
// over, then returns io.EOF. Stop wakes a Next blocked in another goroutine.
// It reads the kernel's drop count (LiveStats.KernelDrops). Calling it again
// does nothing.
func (l *Live) Stop() {
	l.stopOnce.Do(func() {
		l.filterMu.Lock()
		err := l.conn.Control(func(fd uintptr) {
			if err := attachFilter(int(fd), dropAllProgram()); err != nil {
				slog.Warn("live capture: could not stop the kernel filter; packets may be captured after Stop", "interface", l.iface, "err", err)
			}
			l.readKernelStats(int(fd))
		})
		l.stopped.Store(true)
		l.filterMu.Unlock()
		if err != nil {
			return // closed already
		}
		if err := l.file.SetReadDeadline(time.Unix(stopDeadlineUnixSeconds, 0)); err != nil {
			slog.Warn("live capture: could not wake the reader", "interface", l.iface, "err", err)
		}
	})
}

// readKernelStats adds the kernel's counts since the last read (reading
// PACKET_STATISTICS resets them).
func (l *Live) readKernelStats(fd int) {
	st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		slog.Warn("live capture: could not read the kernel's packet statistics", "interface", l.iface, "err", err)
		return
	}
	l.kernelMu.Lock()
	l.kernelPackets += int64(st.Packets)
	l.kernelDrops += int64(st.Drops)
	l.kernelMu.Unlock()
}

// Close stops the capture and releases the socket. Calling it again does nothing.
func (l *Live) Close() error {
	l.closeOnce.Do(func() {
		l.stopAfterCtx()
		l.Stop()
		l.closed.Store(true)
		if err := l.file.Close(); err != nil {
			l.closeErr = fmt.Errorf("capture: closing the packet socket on %s: %w", l.iface, err)
		}
	})
	return l.closeErr
}

// Stats returns the counts so far. While the capture runs it asks the kernel
// for its counts.
func (l *Live) Stats() LiveStats {
	if !l.stopped.Load() {
		l.filterMu.Lock()
		if !l.stopped.Load() {
			_ = l.conn.Control(func(fd uintptr) { l.readKernelStats(int(fd)) })
		}
		l.filterMu.Unlock()
	}
	l.kernelMu.Lock()
	defer l.kernelMu.Unlock()
	return LiveStats{
		Interface: l.iface, LinkType: LinkTypeNameRaw, Snaplen: l.snaplen, BufferBytes: l.bufferBytes, Ring: l.ring != nil,
		Packets: l.packets.Load(), Bytes: l.bytes.Load(), TCP: l.tcp.Load(), Undecodable: l.undecoded.Load(),
		KernelPackets: l.kernelPackets, KernelDrops: l.kernelDrops,
		ClampedTimestamps: l.clampedTimestamps.Load(), MaxClampNs: l.maxClampNs.Load(),
	}
}

// SetFilter replaces the kernel filter at once (for example when the local
// port becomes known). Packets already captured under the old filter are
// still handed over. It fails after Stop.
func (l *Live) SetFilter(f Filter) error {
	program, err := filterProgram(f, l.snaplen)
	if err != nil {
		return err
	}
	l.filterMu.Lock()
	defer l.filterMu.Unlock()
	if l.stopped.Load() {
		return fmt.Errorf("capture: setting the filter %s on %s: the capture has stopped", f, l.iface)
	}
	var attachErr error
	if err := l.conn.Control(func(fd uintptr) { attachErr = attachFilter(int(fd), program) }); err != nil {
		return fmt.Errorf("capture: setting the filter %s on %s: %w", f, l.iface, err)
	}
	if attachErr != nil {
		return fmt.Errorf("capture: setting the filter %s on %s: %w", f, l.iface, attachErr)
	}
	return nil
}

// Tee writes every packet the capture reads from now on to w as well,
// decoded or not (nil stops it). A write error stops the copy; w keeps the
// error and its Flush returns it.
func (l *Live) Tee(w *PcapWriter) { l.tee.Store(w) }

// nextFromRing is Next reading the packet ring.
func (l *Live) nextFromRing(p *Packet) error {
	r := l.ring
	for {
		if r.mem == nil {
			return io.EOF
		}
		if l.closed.Load() {
			// Closed: nothing more is read, and the packet handed out last
			// is no longer the caller's.
			r.mapping.unmap()
			r.mem = nil
			return io.EOF
		}
		if r.held && r.left > 0 {
			data, wireBytes, timestampNs, pktType := r.packet()
			if l.loopback && pktType == unix.PACKET_OUTGOING {
				continue
			}
			if l.takeFrame(data, timestampNs, wireBytes, p) {
				return nil
			}
			continue
		}
		if r.held {
			// (The packet handed out last was in this block: it is given
			// back only now, at the next call.)
			r.release()
		}
		if r.ready() {
			r.take()
			continue
		}
		if l.eof {
			return io.EOF
		}
		if err := l.waitRing(); err != nil {
			return err
		}
	}
}

// waitRing waits until the next block is the process's: for the kernel to
// hand it over while the capture runs; after Stop, at most for the timer of
// the block the kernel was filling, when that holds packets (none come after
// Stop), else the capture is over (l.eof).
func (l *Live) waitRing() error {
	r := l.ring
	if !l.stopped.Load() {
		err := l.conn.Read(func(uintptr) bool { return r.ready() })
		if err == nil {
			return nil
		}
		if !l.stopped.Load() {
			if l.closed.Load() {
				return nil // Next says io.EOF
			}
			return fmt.Errorf("capture: reading packets on %s: %w", l.iface, err)
		}
		// Stop set a past deadline to wake this wait: drain below.
	}
	deadline := time.Now().Add(ringDrainWait)
	for !r.ready() {
		if !r.pending() || time.Now().After(deadline) {
			l.eof = true
			return nil
		}
		time.Sleep(ringRetireMs * time.Millisecond / 4)
	}
	return nil
}
