package h3client

import (
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/slowstart/slowstart/quicanalysis"
)

// recordingConn is the client's UDP socket, recording every datagram to and from
// the server with the time it passed the socket.
type recordingConn struct {
	net.PacketConn
	udp *net.UDPConn
	// kernelTimes: arrivals carry the kernel's receive timestamp (SO_TIMESTAMPNS).
	kernelTimes bool
	remote      netip.AddrPort
	mu          sync.Mutex
	records     []quicanalysis.Datagram
	stopped     bool
	hooks       *Hooks // nil: none
}

func (c *recordingConn) record(src, dst netip.AddrPort, b []byte, timeNs int64) {
	now := timeNs
	if now == 0 {
		now = time.Now().UnixNano()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.records = append(c.records, quicanalysis.Datagram{TimeNs: now, Src: src, Dst: dst, Payload: append([]byte(nil), b...)})
	}
}

func (c *recordingConn) local() netip.AddrPort {
	ap, _ := netip.ParseAddrPort(c.PacketConn.LocalAddr().String())
	return unmapAP(ap)
}

func (c *recordingConn) ReadFrom(b []byte) (int, net.Addr, error) {
	var oob [128]byte
	n, oobn, _, addr, err := c.udp.ReadMsgUDPAddrPort(b, oob[:])
	if err != nil {
		return n, nil, err
	}
	var ts int64
	if c.kernelTimes {
		ts = kernelTimestamp(oob[:oobn])
	}
	c.record(unmapAP(addr), c.local(), b[:n], ts)
	if c.hooks != nil && c.hooks.Received != nil {
		c.hooks.Received(b[:n])
	}
	return n, net.UDPAddrFromAddrPort(addr), nil
}

func (c *recordingConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.hooks != nil && c.hooks.Sending != nil && c.hooks.Sending(b) {
		return len(b), nil // held back: the server hears nothing of it
	}
	n, err := c.PacketConn.WriteTo(b, addr)
	if err == nil {
		if ua, ok := addr.(*net.UDPAddr); ok {
			c.record(c.local(), unmapAP(ua.AddrPort()), b[:n], 0)
		}
	}
	return n, err
}

func unmapAP(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func (c *recordingConn) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

func (c *recordingConn) datagrams() []quicanalysis.Datagram {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]quicanalysis.Datagram(nil), c.records...)
}

// SetReadBuffer, SetWriteBuffer and SyscallConn let quic-go size the socket's buffers.
func (c *recordingConn) SetReadBuffer(n int) error {
	return c.PacketConn.(*net.UDPConn).SetReadBuffer(n)
}
func (c *recordingConn) SetWriteBuffer(n int) error {
	return c.PacketConn.(*net.UDPConn).SetWriteBuffer(n)
}
func (c *recordingConn) SyscallConn() (syscall.RawConn, error) {
	return c.PacketConn.(*net.UDPConn).SyscallConn()
}
