package keylog

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestLongLineSkipped: a line longer than MaxLineBytes (here 1 MiB) is skipped
// and counted, and the secrets around it are read (the whole key log was
// rejected with "token too long").
func TestLongLineSkipped(t *testing.T) {
	random := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	in := "CLIENT_RANDOM " + random + " " + strings.Repeat("01", 48) + "\n" +
		"# " + strings.Repeat("x", 1<<20) + "\n" +
		"CLIENT_RANDOM " + other + " " + strings.Repeat("02", 48) + "\n" +
		strings.Repeat("y", MaxLineBytes+1) + "\n" +
		strings.Repeat("z", MaxLineBytes-1) // at the limit, last, no newline: an ordinary bad line
	l, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 2 || l.Skipped != 3 || l.LongLines != 2 {
		t.Errorf("%d secrets, %d lines skipped (%d long); want 2, 3 (2)", l.Len(), l.Skipped, l.LongLines)
	}
}

// TestBinaryRefused: random bytes (/dev/urandom) or zeros are refused at once,
// not read to their end.
func TestBinaryRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	noise := make([]byte, 8<<20)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	for name, in := range map[string]io.Reader{
		"random": bytes.NewReader(noise),
		"zeros":  bytes.NewReader(make([]byte, 8<<20)),
	} {
		counted := &countingReader{r: in}
		_, err := Parse(counted)
		if !errors.Is(err, ErrNotKeyLog) {
			t.Errorf("%s: %v; want ErrNotKeyLog", name, err)
		}
		if counted.n > 1<<20 {
			t.Errorf("%s: %d bytes read before refusing", name, counted.n)
		}
	}
}

// TestTooLongRefused: a key log is at most MaxBytes long (an endless one,
// such as a FIFO fed forever, is not read forever).
func TestTooLongRefused(t *testing.T) {
	line := []byte("# a comment line of a key log that never ends\n")
	_, err := Parse(io.LimitReader(&repeatReader{line: line}, MaxBytes+int64(len(line))))
	if !errors.Is(err, ErrNotKeyLog) {
		t.Errorf("%v; want ErrNotKeyLog", err)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type repeatReader struct {
	line []byte
	at   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.at:])
		n += c
		r.at = (r.at + c) % len(r.line)
	}
	return n, nil
}

// FuzzParse: any bytes parse without a panic, within the limits, and what was
// read as a secret is found again by its random.
func FuzzParse(f *testing.F) {
	f.Add([]byte("CLIENT_RANDOM " + strings.Repeat("ab", 32) + " " + strings.Repeat("01", 48) + "\n"))
	f.Add([]byte("# comment\r\nSERVER_HANDSHAKE_TRAFFIC_SECRET " + strings.Repeat("cd", 32) + " " + strings.Repeat("02", 32) + "\n\n"))
	f.Add([]byte("RSA 0011 2233\nCLIENT_RANDOM zz 00\n" + strings.Repeat("x", MaxLineBytes+2)))
	f.Add([]byte{0, 1, 2, '\n'})
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(bytes.NewReader(data))
		if l == nil {
			t.Fatalf("no Log (error %v)", err)
		}
		if l.LongLines > l.Skipped {
			t.Errorf("%d long lines of %d skipped", l.LongLines, l.Skipped)
		}
		if err == nil && bytes.IndexByte(data, 0) >= 0 && l.Len() == 0 && len(data) <= textCheckBytes {
			t.Errorf("binary input read without error")
		}
	})
}
