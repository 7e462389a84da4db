package server

import (
	"net"
	"syscall"
	"testing"
)

func TestSetCork(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	corked := func() int {
		rawConn, err := conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		value := -1
		var getErr error
		if err := rawConn.Control(func(fd uintptr) {
			value, getErr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK)
		}); err != nil || getErr != nil {
			t.Fatal(err, getErr)
		}
		return value
	}
	for _, on := range []bool{true, false, true} {
		if err := setCork(conn, on); err != nil {
			t.Fatal(err)
		}
		if got, want := corked() != 0, on; got != want {
			t.Errorf("after setCork(%v), TCP_CORK is %v", on, got)
		}
	}
	// Not a TCP connection: nothing to do, no error.
	pipeEnd, otherEnd := net.Pipe()
	defer pipeEnd.Close()
	defer otherEnd.Close()
	if err := setCork(pipeEnd, true); err != nil {
		t.Errorf("setCork on a pipe: %v", err)
	}
}
