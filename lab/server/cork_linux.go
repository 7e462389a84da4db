package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"syscall"
)

// setCork sets or clears TCP_CORK on the TCP socket under conn (through TLS, if any), as
// nginx's tcp_nopush does: while corked, the kernel sends only full segments; clearing it
// sends what is left at once. Connections that are not TCP are left alone.
func setCork(conn net.Conn, on bool) error {
	if tlsConn, ok := conn.(*tls.Conn); ok {
		conn = tlsConn.NetConn()
	}
	tcpConn, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rawConn, err := tcpConn.SyscallConn()
	if err != nil {
		return fmt.Errorf("reaching the socket to set TCP_CORK: %w", err)
	}
	value := 0
	if on {
		value = 1
	}
	var setErr error
	if err := rawConn.Control(func(fd uintptr) {
		setErr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, value)
	}); err != nil {
		return fmt.Errorf("reaching the socket to set TCP_CORK: %w", err)
	}
	if setErr != nil {
		return fmt.Errorf("setting TCP_CORK to %d: %w", value, setErr)
	}
	return nil
}
