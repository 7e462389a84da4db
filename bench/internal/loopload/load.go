package loopload

import (
	"bufio"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// StartServer listens on addr and answers each connection's one-line request
// with answerBytes, then waits for the client to close. Closing the listener
// stops it.
func StartServer(addr string, answerBytes int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	answer := make([]byte, answerBytes)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				conn.Write(answer)
				io.Copy(io.Discard, r)
			}()
		}
	}()
	return ln, nil
}

// ShortConnections runs clients that each connect to addr, send a one-line
// request, read a 1 KB answer and close, again and again for d, and returns how
// many connections were answered. With reset the clients close with a RST
// (SO_LINGER 0): no TIME_WAIT is left to run out of ports.
func ShortConnections(addr string, clients int, d time.Duration, reset bool) int64 {
	var done atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			buf := make([]byte, 1024)
			for time.Now().Before(stop) {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					continue // the listen queue overflowed: try again
				}
				if reset {
					conn.(*net.TCPConn).SetLinger(0)
				}
				if _, err := conn.Write([]byte("GET\n")); err == nil {
					if _, err := io.ReadFull(conn, buf); err == nil {
						done.Add(1)
					}
				}
				conn.Close()
			}
		})
	}
	wg.Wait()
	return done.Load()
}
