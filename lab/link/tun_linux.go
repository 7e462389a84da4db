package link

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// TUN is a Device over a Linux TUN file descriptor. It expects a device made with
// IFF_TUN|IFF_NO_PI and without IFF_VNET_HDR: each read and write is then exactly one IP
// packet, and with no virtio header the kernel offers no segmentation offloads, so
// packets are no larger than the device's MTU. Reads and writes go through Go's network
// poller: a blocked Read costs no thread and no CPU.
type TUN struct {
	file *os.File
	conn syscall.RawConn

	// The state of the Read and Write in progress, and the poller callbacks bound to it
	// once, so that reading and writing allocate nothing. Read must not be called from
	// two goroutines at once, nor Write; a Read and a Write may run together.
	reading readBatch
	writing writeBatch
	// closed is set by Close, so that errors of a Read or Write racing with it read
	// as os.ErrClosed (the poller's own "use of closed file" is not exported).
	closed atomic.Bool
}

type readBatch struct {
	bufs  [][]byte
	sizes []int
	count int
	err   error
	// nonblocking makes the poller callback return on EAGAIN even with nothing read
	// (TryRead) instead of asking the poller to wait (Read).
	nonblocking bool
	step        func(fd uintptr) bool
}

type writeBatch struct {
	bufs  [][]byte
	count int
	err   error
	step  func(fd uintptr) bool
}

// NewTUN wraps an open TUN device. The descriptor must be in non-blocking mode so Go's
// poller can wait on it, and attached to its device (TUNSETIFF done) before it becomes an
// *os.File: open /dev/net/tun with unix.Open(..., O_RDWR|O_NONBLOCK|O_CLOEXEC, 0), issue
// TUNSETIFF, then os.NewFile. (os.OpenFile registers the descriptor with the poller at
// once, and a TUN descriptor without a device reports an error event that the poller
// keeps: reads then fail with "not pollable".) Do not call f.Fd() on it, which switches
// it to blocking mode. The TUN owns f from then on and closes it in Close.
func NewTUN(f *os.File) (*TUN, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("TUN %s: getting its raw descriptor: %w", f.Name(), err)
	}
	var nonblocking bool
	var checkErr error
	if err := conn.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblocking, checkErr = flags&unix.O_NONBLOCK != 0, err
	}); err != nil {
		return nil, fmt.Errorf("TUN %s: %w", f.Name(), err)
	}
	if checkErr != nil {
		return nil, fmt.Errorf("TUN %s: reading its file status flags: %w", f.Name(), checkErr)
	}
	if !nonblocking {
		return nil, fmt.Errorf("TUN %s is in blocking mode: open it with O_NONBLOCK before os.NewFile, and do not call Fd() on the *os.File", f.Name())
	}
	t := &TUN{file: f, conn: conn}
	t.reading.step = t.reading.readSome
	t.writing.step = t.writing.writeSome
	return t, nil
}

// Read implements Device: it waits for the first packet in the poller, then reads on
// until the device has no more (EAGAIN) or bufs is full.
func (t *TUN) Read(bufs [][]byte, sizes []int) (int, error) {
	return t.read(bufs, sizes, false)
}

// TryRead implements PollableDevice: Read that returns 0 at once when the device holds
// no packet, without waiting in the poller.
func (t *TUN) TryRead(bufs [][]byte, sizes []int) (int, error) {
	return t.read(bufs, sizes, true)
}

func (t *TUN) read(bufs [][]byte, sizes []int, nonblocking bool) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	r := &t.reading
	r.bufs, r.sizes, r.count, r.err, r.nonblocking = bufs, sizes, 0, nil, nonblocking
	err := t.conn.Read(r.step)
	n, readErr := r.count, r.err
	r.bufs, r.sizes = nil, nil
	if n > 0 {
		return n, nil // an error is reported by the next call, which meets it again
	}
	if readErr != nil {
		return 0, fmt.Errorf("reading TUN %s: %w", t.file.Name(), readErr)
	}
	if err != nil {
		if t.closed.Load() {
			err = os.ErrClosed
		}
		return 0, fmt.Errorf("reading TUN %s: %w", t.file.Name(), err)
	}
	return 0, nil
}

// readSome is the poller callback of Read: false asks the poller to wait for data.
func (r *readBatch) readSome(fd uintptr) bool {
	for r.count < len(r.bufs) {
		size, err := unix.Read(int(fd), r.bufs[r.count])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return r.count > 0 || r.nonblocking
		case err != nil:
			r.err = err
			return true
		}
		r.sizes[r.count] = size
		r.count++
	}
	return true
}

// Write implements Device: one write system call per packet (a TUN device takes one
// packet per call), all inside one poller operation.
func (t *TUN) Write(bufs [][]byte) (int, error) {
	w := &t.writing
	w.bufs, w.count, w.err = bufs, 0, nil
	err := t.conn.Write(w.step)
	n, writeErr := w.count, w.err
	w.bufs = nil
	if writeErr != nil {
		return n, fmt.Errorf("writing a %d-byte packet to TUN %s: %w", len(bufs[n]), t.file.Name(), writeErr)
	}
	if err != nil {
		if t.closed.Load() {
			err = os.ErrClosed
		}
		return n, fmt.Errorf("writing to TUN %s: %w", t.file.Name(), err)
	}
	return n, nil
}

// writeSome is the poller callback of Write: false asks the poller to wait for room.
func (w *writeBatch) writeSome(fd uintptr) bool {
	for w.count < len(w.bufs) {
		_, err := unix.Write(int(fd), w.bufs[w.count])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false
		case err != nil:
			w.err = err
			return true
		}
		w.count++
	}
	return true
}

// Close implements Device.
func (t *TUN) Close() error {
	t.closed.Store(true)
	return t.file.Close()
}

// isClosedError reports whether err comes from using a device or timer after Close.
func isClosedError(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EBADF)
}
