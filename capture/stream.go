package capture

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
)

// byteStream is the (decompressed) byte stream of one capture file. Records
// are read in place from its buffer with peek and consumed with discard, so a
// record's bytes are not copied; offset counts the bytes consumed, so that a
// damaged place can be named by its position in the file.
type byteStream struct {
	br     *bufio.Reader
	offset int64  // bytes consumed since the start of the file
	large  []byte // a record too long for br's buffer, read by readLarge
}

// window is the most bytes peek can return at once.
func (s *byteStream) window() int { return s.br.Size() }

// peek returns the next n bytes without consuming them, or fewer and the
// error that cut them (io.EOF at the end of the input). n must not exceed
// the window. The bytes are valid until the next peek, discard or readLarge.
func (s *byteStream) peek(n int) ([]byte, error) { return s.br.Peek(n) }

// discard consumes n bytes, or as many as remain.
func (s *byteStream) discard(n int) error {
	m, err := s.br.Discard(n)
	s.offset += int64(m)
	return err
}

// largeChunkBytes is how far s.large grows ahead of the bytes read into it: a
// length field cannot make the reader allocate more than twice what the file
// holds plus this.
const largeChunkBytes = 1 << 20

// readLarge consumes n bytes into a buffer the stream owns (valid until the
// next readLarge). At the end of the input it returns the bytes read and
// io.ErrUnexpectedEOF. The buffer grows by doubling, from largeChunkBytes, as
// bytes arrive, so reading n bytes copies fewer than 2n however long n is;
// callers bound n (MaxRecordBytes, ngMaxBlockBytes).
func (s *byteStream) readLarge(n int) ([]byte, error) {
	s.large = s.large[:0]
	for len(s.large) < n {
		have := len(s.large)
		if have == cap(s.large) {
			grown := make([]byte, have, min(n, max(2*have, largeChunkBytes)))
			copy(grown, s.large)
			s.large = grown
		}
		m, err := io.ReadFull(s.br, s.large[have:min(n, cap(s.large))])
		s.large = s.large[:have+m]
		s.offset += int64(m)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return s.large, err
		}
	}
	return s.large, nil
}

// endOfInput turns what a peek of n bytes returned into the error that ends
// the records: io.EOF when nothing was left, io.ErrUnexpectedEOF when the
// input ended inside the n bytes, or the read error itself.
func endOfInput(got int, err error) error {
	switch {
	case err == nil:
		return io.ErrUnexpectedEOF // not reached: peek returns n bytes or an error
	case errors.Is(err, io.EOF) && got == 0:
		return io.EOF
	case errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	default:
		return err
	}
}

// skipDamage consumes n damaged bytes at the stream's position, up to a good
// record found inside them, and counts them as damage before record.
func (s *byteStream) skipDamage(damage *Damage, record int64, n int) error {
	damage.place(record, s.offset)
	damage.Bytes += int64(n)
	return s.discard(n)
}

// lengthField is where a format's place to read again has a length that
// cannot be 0: bytes [at+offset, at+offset+size) of a candidate at offset at
// are not all zero. resync jumps over runs of zeros with it (a sparse file, a
// header followed by /dev/zero) instead of asking readAt at every byte.
type lengthField struct{ offset, size int }

// resync consumes bytes, from skip bytes after the stream's position on, up to
// the next place where readAt finds records to read again (runFound), or up to
// where it cannot tell yet (runUnknown: the window ends first), or to the end of
// the input; it adds the bytes it skipped to damage (and marks a damage that
// runs to the end) and returns only read errors. pcap and pcapng differ only in
// readAt and where their length field lies.
func (s *byteStream) resync(skip int, damage *Damage, field lengthField, readAt func(buf []byte, at int, eof bool) runResult) error {
	for {
		buf, err := s.peek(s.window())
		eof := false
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return err
			}
			eof = true
		}
		at := skip
		found := false
	scan:
		for ; at < len(buf); at++ {
			if first := at + field.offset; first < len(buf) && buf[first] == 0 {
				// No place to read again starts before the field can hold a
				// byte that is not zero.
				at = max(at, nonZeroFrom(buf, first)-field.offset-field.size+1)
				if at >= len(buf) {
					break
				}
			}
			switch readAt(buf, at, eof) {
			case runFound:
				found = true
				break scan
			case runUnknown:
				break scan
			}
		}
		if at == 0 && !found { // a run too long to check from the start of the window
			at = 1
		}
		at = min(at, len(buf))
		damage.Bytes += int64(at)
		if err := s.discard(at); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if found {
			return nil
		}
		if eof {
			damage.ToEnd = true
			return nil
		}
		skip = 0
	}
}

// nonZeroFrom returns the index of the first byte of buf at or after from that
// is not zero, or len(buf); it compares eight bytes at a time.
func nonZeroFrom(buf []byte, from int) int {
	i := from
	for ; i+8 <= len(buf); i += 8 {
		if binary.NativeEndian.Uint64(buf[i:]) != 0 {
			break
		}
	}
	for ; i < len(buf); i++ {
		if buf[i] != 0 {
			return i
		}
	}
	return len(buf)
}
