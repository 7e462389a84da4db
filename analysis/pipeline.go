package analysis

import (
	"context"
	"errors"

	"github.com/slowstart/slowstart/capture"
)

// packetsPerBatch is how many decoded packets the reading goroutine hands over at
// once: large enough that channel operations vanish from the profile.
const packetsPerBatch = 4096

// batch is a run of decoded packets whose captured payloads are copied into one
// arena, since a capture.Reader's payloads are only valid until its next call.
type batch struct {
	packets     []capture.Packet
	payloadEnds []int
	payload     []byte
	count       int
	err         error // what ended the input after these packets (io.EOF at the end)
}

// readAhead decodes packets from src on its own goroutine, so that reading and
// decoding use one core and connection tracking the other. Close it (after the
// consumer is done) to stop the goroutine.
type readAhead struct {
	full    chan *batch
	free    chan *batch
	cancel  context.CancelFunc
	current *batch
	next    int
}

func newReadAhead(ctx context.Context, src PacketSource) *readAhead {
	const batchesInFlight = 4
	ctx, cancel := context.WithCancel(ctx)
	r := &readAhead{full: make(chan *batch, batchesInFlight), free: make(chan *batch, batchesInFlight+1), cancel: cancel}
	for range batchesInFlight + 1 {
		r.free <- &batch{packets: make([]capture.Packet, packetsPerBatch), payloadEnds: make([]int, packetsPerBatch)}
	}
	go r.fill(ctx, src)
	return r
}

// fill decodes packets into batches and sends them on full; it closes full after
// the batch that carries the error ending the input.
func (r *readAhead) fill(ctx context.Context, src PacketSource) {
	defer close(r.full)
	for {
		var b *batch
		select {
		case b = <-r.free:
		case <-ctx.Done():
			return
		}
		b.count, b.payload, b.err = 0, b.payload[:0], nil
		for b.count < packetsPerBatch {
			p := &b.packets[b.count]
			if err := src.Next(p); err != nil {
				b.err = err
				break
			}
			b.payload = append(b.payload, p.Payload...)
			b.payloadEnds[b.count] = len(b.payload)
			b.count++
		}
		// Point the payloads into the arena only now: append may have moved it.
		start := 0
		for i := range b.count {
			end := b.payloadEnds[i]
			b.packets[i].Payload = b.payload[start:end:end]
			start = end
		}
		select {
		case r.full <- b:
		case <-ctx.Done():
			return
		}
		if b.err != nil {
			return
		}
	}
}

var errStoppedEarly = errors.New("the reading goroutine stopped before the end of the input")

// Next implements PacketSource.
func (r *readAhead) Next(p *capture.Packet) error {
	for r.current == nil || r.next == r.current.count {
		if r.current != nil {
			if r.current.err != nil {
				return r.current.err
			}
			r.free <- r.current
		}
		b, ok := <-r.full
		if !ok {
			return errStoppedEarly
		}
		r.current, r.next = b, 0
	}
	*p = r.current.packets[r.next]
	r.next++
	return nil
}

// Close stops the reading goroutine and waits for it.
func (r *readAhead) Close() {
	r.cancel()
	for range r.full {
	}
}
