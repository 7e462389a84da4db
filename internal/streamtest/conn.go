package streamtest

import (
	"bytes"
	"net"
	"slices"
	"sync"
)

// RecordingConn is a net.Conn that keeps a copy of every byte its side writes and
// the size of each Write.
type RecordingConn struct {
	net.Conn
	mu      sync.Mutex
	written bytes.Buffer
	writes  []int
}

func (c *RecordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.written.Write(p)
	c.writes = append(c.writes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// Bytes returns what was written so far.
func (c *RecordingConn) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.written.Bytes())
}

// WriteSizes returns the size of each Write so far, in order.
func (c *RecordingConn) WriteSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}
