package capture

import (
	"io"
	"sync"
)

// readAhead reads from r in a goroutine of its own, up to ahead chunks of
// chunkBytes before its reader: a gzip-compressed capture is decompressed
// while the records before are decoded. Every byte r gave before an error is
// handed out before that error, as reading r itself would: a stream corrupt
// halfway gives the records before the corruption. Close stops the
// goroutine.
type readAhead struct {
	chunks chan aheadChunk // read, in order
	free   chan []byte     // buffers to read into
	done   chan struct{}
	exited chan struct{} // closed when fill returns
	stop   sync.Once
	cur    []byte // the rest of the chunk being read from
	buf    []byte // cur's buffer, given back when cur is read
	err    error  // the error after cur
}

type aheadChunk struct {
	b   []byte
	err error
}

func newReadAhead(r io.Reader, chunkBytes, ahead int) *readAhead {
	ra := &readAhead{chunks: make(chan aheadChunk, ahead), free: make(chan []byte, ahead+1),
		done: make(chan struct{}), exited: make(chan struct{})}
	for range ahead + 1 {
		ra.free <- make([]byte, chunkBytes)
	}
	go ra.fill(r)
	return ra
}

// fill reads r into free buffers and sends them on, until an error (io.EOF
// at the end) or Close.
func (ra *readAhead) fill(r io.Reader) {
	defer close(ra.exited)
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.done:
			return
		}
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var m int
			m, err = r.Read(buf[n:])
			n += m
		}
		select {
		case ra.chunks <- aheadChunk{b: buf[:n], err: err}:
		case <-ra.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.err != nil {
			return 0, ra.err
		}
		if ra.buf != nil {
			ra.free <- ra.buf[:cap(ra.buf)]
			ra.buf = nil
		}
		c := <-ra.chunks
		ra.cur, ra.buf, ra.err = c.b, c.b, c.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// Close stops the reading ahead; Read must not be called after it.
func (ra *readAhead) Close() error {
	ra.stop.Do(func() { close(ra.done) })
	return nil
}
