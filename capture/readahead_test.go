package capture

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// failingAfter gives data in reads of uneven sizes, then err.
type failingAfter struct {
	data []byte
	err  error
	rng  *rand.Rand
}

func (f *failingAfter) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p[:min(len(p), 1+f.rng.IntN(5000))], f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestReadAheadGivesEveryByteBeforeTheError: what is read ahead is the
// source's bytes in order, read in any sizes, and a source that fails halfway
// (a corrupt gzip stream) gives every byte before the failure, then the
// failure itself: the records before a corruption are read.
func TestReadAheadGivesEveryByteBeforeTheError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20+12345)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	corrupt := errors.New("flate: corrupt input")
	for _, tc := range []struct {
		name string
		err  error
	}{{"to the end", io.EOF}, {"corrupt halfway", corrupt}} {
		// The source has a generator of its own: it is read in the
		// goroutine reading ahead.
		ra := newReadAhead(&failingAfter{data: data, err: tc.err, rng: rand.New(rand.NewPCG(5, 6))}, 64<<10, 3)
		var got bytes.Buffer
		buf := make([]byte, 70000)
		var err error
		for {
			var n int
			n, err = ra.Read(buf[:1+rng.IntN(len(buf))])
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Errorf("%s: %d bytes read ahead, not the source's %d", tc.name, got.Len(), len(data))
		}
		if err != tc.err {
			t.Errorf("%s: ended by %v, want %v", tc.name, err, tc.err)
		}
		if n, err2 := ra.Read(buf); n != 0 || err2 != tc.err {
			t.Errorf("%s: a read after the end gave %d, %v", tc.name, n, err2)
		}
		ra.Close()
	}
}

// TestReadAheadCloseStopsReading: Close ends the goroutine reading ahead even
// when nobody reads what it read (a capture closed before its end).
func TestReadAheadCloseStopsReading(t *testing.T) {
	ra := newReadAhead(&failingAfter{data: make([]byte, 10<<20), err: io.EOF, rng: rand.New(rand.NewPCG(3, 4))}, 4096, 2)
	buf := make([]byte, 100)
	if _, err := ra.Read(buf); err != nil {
		t.Fatal(err)
	}
	ra.Close()
	ra.Close() // twice is harmless
	select {
	case <-ra.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the goroutine reading ahead still runs 10 s after Close")
	}
}
