package live

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// TestWatchFile: Watch over a capture file reports what analysis.File reports.
func TestWatchFile(t *testing.T) {
	path := filepath.Join("..", "testdata", "captures", "rtt40-iw10-tls13h2-200000.client.pcap")
	opts := analysis.Options{Packets: true}
	want, err := analysis.File(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []report.Connection
	err = Watch(context.Background(), r, WatchOptions{Analysis: opts}, func(c report.Connection) { got = append(got, c) })
	if err != nil {
		t.Fatal(err)
	}
	compare(t, filepath.Base(path), got, want.Connections)
}

// chanSource hands over packets sent on a channel; closing it is the end.
type chanSource chan capture.Packet

func (s chanSource) Next(p *capture.Packet) error {
	q, ok := <-s
	if !ok {
		return errEnd
	}
	*p = q
	return nil
}

var errEnd = context.Canceled

// watchOnClock runs Watch over src in a goroutine, with per-packet lists and a
// tick every millisecond, on a clock that reads start until a time is sent on
// clock (which holds one: a send waits until the time before was read, at a
// tick). Reports go to reports, and Watch's error to done.
func watchOnClock(src chanSource, start time.Time, reports chan<- report.Connection) (clock chan<- time.Time, done <-chan error) {
	times := make(chan time.Time, 1)
	times <- start
	end := make(chan error, 1)
	var now time.Time
	go func() {
		end <- Watch(context.Background(), src, WatchOptions{Analysis: analysis.Options{Packets: true}, TickEvery: time.Millisecond,
			Now: func() time.Time {
				select {
				case now = <-times:
				default:
				}
				return now
			}}, func(c report.Connection) { reports <- c })
	}()
	return times, end
}

// TestWatchIdleThenClosed: a connection idle by the clock is reported while
// packets are not arriving, then reported again, whole, when it is over.
func TestWatchIdleThenClosed(t *testing.T) {
	packets := readAll(t, filepath.Join("..", "testdata", "captures", "rtt40-iw3-h1-100000.client.pcap"))
	half := len(packets) / 2
	src := make(chanSource)
	reports := make(chan report.Connection, 4)
	clock, done := watchOnClock(src, time.Unix(0, packets[half-1].TimestampNs), reports)
	for _, p := range packets[:half] {
		src <- p
	}
	// Time passes with no packet: the connection is reported as it is so far.
	clock <- time.Unix(0, packets[half-1].TimestampNs).Add(DefaultIdle + time.Second)
	first := <-reports
	if len(first.Packets) != half {
		t.Fatalf("idle report: %d packets, want %d", len(first.Packets), half)
	}
	// The clock moves on with the packets that follow.
	clock <- time.Unix(0, packets[len(packets)-1].TimestampNs)
	for _, p := range packets[half:] {
		src <- p
	}
	close(src)
	second := <-reports
	if err := <-done; err != errEnd {
		t.Fatalf("Watch: %v, want the source's error", err)
	}
	if second.Index != first.Index || len(second.Packets) != len(packets) {
		t.Fatalf("final report: #%d with %d packets, want #%d with %d", second.Index, len(second.Packets), first.Index, len(packets))
	}
}

// TestWatchIdleShownOncePerPause: a connection that stays idle through several
// snapshots is shown once while open, then once more, whole, when it ends.
func TestWatchIdleShownOncePerPause(t *testing.T) {
	packets := readAll(t, filepath.Join("..", "testdata", "captures", "rtt40-iw3-h1-100000.client.pcap"))
	half := len(packets) / 2
	src := make(chanSource)
	reports := make(chan report.Connection, 8)
	lastNs := packets[half-1].TimestampNs
	clock, done := watchOnClock(src, time.Unix(0, lastNs), reports)
	for _, p := range packets[:half] {
		src <- p
	}
	// Five snapshots' worth of idle time, a value at a time: the clock holds
	// one, so each is sent only once the one before was read (and its tick's
	// snapshot made).
	for k := range 6 {
		clock <- time.Unix(0, lastNs).Add(DefaultIdle + time.Duration(k)*DefaultIdle)
	}
	close(src)
	if err := <-done; err != errEnd {
		t.Fatalf("Watch: %v, want the source's error", err)
	}
	close(reports)
	var got []report.Connection
	for c := range reports {
		got = append(got, c)
	}
	if len(got) != 2 || !slices.Contains(got[0].Notes, StillOpenNote) || slices.Contains(got[1].Notes, StillOpenNote) || got[0].Index != got[1].Index {
		var notes [][]string
		for _, c := range got {
			notes = append(notes, c.Notes)
		}
		t.Fatalf("%d reports (notes %q), want the idle connection shown once while open, then once final", len(got), notes)
	}
}
