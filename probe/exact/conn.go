package exact

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
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
// stream (a TLS record holding the ServerHello), or "" when it is not there.
func serverHelloVersion(stream []byte) string {
	if len(stream) < 5+4 || stream[0] != recordHandshake || stream[5] != 2 { // ServerHello
		return ""
	}
	body := stream[5+4:]
	if n := int(binary.BigEndian.Uint16(stream[3:5])); n-4 < len(body) {
		body = body[:max(n-4, 0)]
	}
	if len(body) < 2+32+1 {
		return ""
	}
	legacy := binary.BigEndian.Uint16(body)
	body = body[2+32:]
	sessionIDLen := int(body[0])
	body = body[1:]
	if len(body) < sessionIDLen+2+1+2 {
		return tlsVersionName(legacy)
	}
	body = body[sessionIDLen+2+1:] // session id, cipher suite, compression
	extensionsLen := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	body = body[:min(extensionsLen, len(body))]
	for len(body) >= 4 {
		kind, n := binary.BigEndian.Uint16(body), int(binary.BigEndian.Uint16(body[2:]))
		if len(body) < 4+n {
			break
		}
		if kind == 43 && n == 2 { // supported_versions
			return tlsVersionName(binary.BigEndian.Uint16(body[4:]))
		}
		body = body[4+n:]
	}
	return tlsVersionName(legacy)
}

func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "1.0"
	case tls.VersionTLS11:
		return "1.1"
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return ""
}
