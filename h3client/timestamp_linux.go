package h3client

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// enableTimestamps asks the kernel to stamp every datagram the socket receives
// (SO_TIMESTAMPNS), so that arrivals are timed when the kernel had them, not when
// quic-go got round to reading them.
func enableTimestamps(c *net.UDPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return false
	}
	return true
}

// kernelTimestamp reads the SCM_TIMESTAMPNS of a received datagram's control
// messages; 0 when there is none.
func kernelTimestamp(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano()
		}
	}
	return 0
}
