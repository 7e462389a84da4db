package exact

import (
	"encoding/binary"
	"net"
	"sync"

	"github.com/slowstart/slowstart/tlsrec"
)

// prefixKeepBytes is how much of the server's stream countingConn keeps, for
// the ServerHello.
const prefixKeepBytes = 4096

// TLS record content types.
const (
	recordChangeCipherSpec = 20
	recordHandshake        = 22
	recordApplicationData  = 23
)

// countingConn counts the bytes read from the server and keeps the first of
// them. Once holdWrites is called, every write after the first one (the
// ClientHello) is held back: it reports success and sends nothing, since any
// segment with data would acknowledge the server's flight. The first held-back
// handshake or application-data record means the TLS client has read the
// server's whole flight, whose length is then sent on flightDone.
type countingConn struct {
	net.Conn

	mu         sync.Mutex
	read       int64
	prefix     []byte
	holding    bool
	writes     int
	flightDone chan<- int64
	signaled   bool
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.read += int64(n)
	if keep := min(n, prefixKeepBytes-len(c.prefix)); keep > 0 {
		c.prefix = append(c.prefix, b[:keep]...)
	}
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	hold := c.holding && c.writes > 0
	c.writes++
	if hold && !c.signaled && writesFlightEnd(b) {
		c.signaled = true
		c.flightDone <- c.read
	}
	c.mu.Unlock()
	if hold {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// holdWrites holds back every write after the next one.
func (c *countingConn) holdWrites(flightDone chan<- int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding, c.flightDone = true, flightDone
}

func (c *countingConn) readBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

func (c *countingConn) prefixBytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.prefix...)
}

// writesFlightEnd reports whether a write of TLS records holds a handshake or
// application-data record: the client's answer to the server's whole flight
// (TLS 1.2: ClientKeyExchange; TLS 1.3: the encrypted Finished). A
// ChangeCipherSpec alone does not count: a TLS 1.3 client sends one right
// after the ServerHello. Writes start at record boundaries.
func writesFlightEnd(b []byte) bool {
	for len(b) >= 5 {
		switch b[0] {
		case recordHandshake, recordApplicationData:
			return true
		}
		n := 5 + int(binary.BigEndian.Uint16(b[3:5]))
		if n > len(b) {
			return false
		}
		b = b[n:]
	}
	return false
}

// serverHelloVersion returns "1.2" or "1.3" from the start of the server's
// stream (a TLS record holding the ServerHello), as the capture analysis reads
// it (package tlsrec), or "" when no ServerHello is there.
func serverHelloVersion(stream []byte) string {
	s := tlsrec.NewStream()
	s.Write(0, stream, len(stream))
	return tlsrec.VersionString(s.Hello().NegotiatedVersion)
}
