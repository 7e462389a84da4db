package live

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// pipeSource hands out its packets, then blocks (a pipe whose writer is
// quiet) until end is closed, then returns io.EOF. drained is closed when the
// last packet was handed out.
type pipeSource struct {
	packets []capture.Packet
	next    int
	drained chan struct{}
	end     chan struct{}
}

func (s *pipeSource) Next(p *capture.Packet) error {
	if s.next == len(s.packets) {
		close(s.drained)
		<-s.end
		return io.EOF
	}
	*p = s.packets[s.next]
	s.next++
	return nil
}

// followed runs Follow over a capture that then goes quiet, with the host's
// clock at clockNs (advanced by the test), and returns the connections as they
// are emitted.
func followed(t *testing.T, packets []capture.Packet, clockNs *atomic.Int64) (src *pipeSource, emitted <-chan report.Connection, done <-chan error) {
	t.Helper()
	src = &pipeSource{packets: packets, drained: make(chan struct{}), end: make(chan struct{})}
	out := make(chan report.Connection, 16)
	st := analysis.NewStream(context.Background(), analysis.StreamOptions{Shards: 1, Emit: func(c *report.Connection) error {
		out <- *c
		return nil
	}})
	errc := make(chan error, 1)
	go func() {
		err := Follow(context.Background(), src, st, FollowOptions{TickEvery: 5 * time.Millisecond,
			Now: func() time.Time { return time.Unix(0, clockNs.Load()) }})
		if _, closeErr := st.Close(); err == nil {
			err = closeErr
		}
		close(out)
		errc <- err
	}()
	return src, out, errc
}

// TestFollowEmitsBeforeTheEnd: a connection that closed comes out while the
// pipe is still open once the host's clock passed its linger, as analysis.Run
// reports it from the whole file; a recorded capture piped in (its clock far
// from the host's) is not advanced past its own packets, and its connection
// comes out at the end of the input.
func TestFollowEmitsBeforeTheEnd(t *testing.T) {
	packets := readAll(t, filepath.Join("..", "testdata", "captures", "rtt40-iw3-h1-100000.client.pcap"))
	want, err := analysis.Run(context.Background(), &sliceSource{packets: packets}, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Connections) != 1 {
		t.Fatalf("the capture holds %d connections, want 1", len(want.Connections))
	}
	lastNs := packets[len(packets)-1].TimestampNs

	t.Run("live", func(t *testing.T) {
		var clock atomic.Int64
		clock.Store(lastNs) // the packets carry the host's clock
		src, emitted, done := followed(t, packets, &clock)
		<-src.drained
		// Nothing may come out before the linger (2 s of capture time) passed.
		select {
		case c := <-emitted:
			t.Fatalf("connection %d came out before the host's clock moved", c.Index)
		case <-time.After(50 * time.Millisecond):
		}
		clock.Add(int64(3 * time.Second))
		select {
		case c := <-emitted:
			if !reflect.DeepEqual(c, want.Connections[0]) {
				t.Errorf("the followed connection differs from the file's: rounds %d IW %+v, want rounds %d IW %+v",
					len(c.Rounds), c.InitialWindow, len(want.Connections[0].Rounds), want.Connections[0].InitialWindow)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the closed connection did not come out while the pipe was open")
		}
		close(src.end)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("recorded", func(t *testing.T) {
		var clock atomic.Int64
		clock.Store(lastNs + int64(24*time.Hour)) // replayed a day later
		src, emitted, done := followed(t, packets, &clock)
		<-src.drained
		clock.Add(int64(time.Hour))
		select {
		case c := <-emitted:
			t.Fatalf("connection %d of a recorded capture came out before its end (its clock was advanced by the host's)", c.Index)
		case <-time.After(100 * time.Millisecond):
		}
		close(src.end)
		var got []report.Connection
		for c := range emitted {
			got = append(got, c)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		compare(t, "recorded", got, want.Connections)
	})
}

// TestFollowStops: when the context ends, the packets read so far are handed
// to the stream (Close reports their connection) and Follow returns the
// context's error, having cut the read in progress with Stop.
func TestFollowStops(t *testing.T) {
	packets := readAll(t, filepath.Join("..", "testdata", "captures", "rtt40-iw3-h1-100000.client.pcap"))
	half := packets[:len(packets)/2]
	src := &pipeSource{packets: half, drained: make(chan struct{}), end: make(chan struct{})}
	var got []report.Connection
	st := analysis.NewStream(context.Background(), analysis.StreamOptions{Shards: 1, Emit: func(c *report.Connection) error {
		got = append(got, *c)
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := false
	errc := make(chan error, 1)
	go func() {
		errc <- Follow(ctx, src, st, FollowOptions{TickEvery: time.Hour, Stop: func() {
			stopped = true
			close(src.end)
		}})
	}()
	<-src.drained
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v, want the context's error", err)
	}
	if !stopped {
		t.Error("Stop was not called")
	}
	stats, err := st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Packets != int64(len(half)) {
		t.Errorf("the stream was handed %d packets, want the %d read", stats.Packets, len(half))
	}
	if len(got) != 1 || got[0].BytesToClient == 0 {
		t.Errorf("got %d connections (%+v), want the one half read, with its bytes", len(got), got)
	}
}
