package main

import (
	"context"
	"errors"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/report"
)

// packetsPerBatch is how many decoded packets the reading goroutine hands over at
// once: large enough that channel operations vanish from the profile.
const packetsPerBatch = 4096

// batch is a run of decoded packets whose payloads are copied into one arena,
// since capture.Reader's payloads are only valid until its next call.
type batch struct {
	packets     []capture.Packet
	payloadEnds []int
	payload     []byte
	count       int
	err         error // what ended the input after these packets (io.EOF at the end)
}

// pipelinedFile is analysis.File split over two goroutines: one reads and decodes
// the capture, the other tracks connections. It is a prototype to measure what
// using both cores would give; the Report's Source holds only the packet counts.
func pipelinedFile(ctx context.Context, path string, opts analysis.Options) (*report.Report, error) {
	reader, err := capture.Open(path)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	const batchesInFlight = 4
	full := make(chan *batch, batchesInFlight)
	free := make(chan *batch, batchesInFlight+1)
	for range batchesInFlight + 1 {
		free <- &batch{
			packets:     make([]capture.Packet, packetsPerBatch),
			payloadEnds: make([]int, packetsPerBatch),
		}
	}
	go readBatches(ctx, reader, full, free)

	source := &batchSource{full: full, free: free}
	rep, err := analysis.Run(ctx, source, opts)
	cancel()
	// Wait for the reader to stop before reading its Stats.
	for range full {
	}
	if rep != nil {
		stats := reader.Stats()
		rep.Source = report.Source{Kind: "file", Path: path, Packets: stats.Records, TCPPackets: stats.TCP}
	}
	return rep, err
}

// readBatches decodes packets into batches from free and sends them on full; it
// closes full after the batch that carries the error ending the input.
func readBatches(ctx context.Context, reader *capture.Reader, full chan<- *batch, free <-chan *batch) {
	defer close(full)
	for {
		var b *batch
		select {
		case b = <-free:
		case <-ctx.Done():
			return
		}
		b.count, b.payload, b.err = 0, b.payload[:0], nil
		for b.count < packetsPerBatch {
			p := &b.packets[b.count]
			if err := reader.Next(p); err != nil {
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
		case full <- b:
		case <-ctx.Done():
			return
		}
		if b.err != nil {
			return
		}
	}
}

var errStoppedEarly = errors.New("the reading goroutine stopped before the end of the input")

// batchSource is the analysis.PacketSource side of the pipeline.
type batchSource struct {
	full    <-chan *batch
	free    chan<- *batch
	current *batch
	next    int
}

func (s *batchSource) Next(p *capture.Packet) error {
	for s.current == nil || s.next == s.current.count {
		if s.current != nil {
			if s.current.err != nil {
				return s.current.err
			}
			s.free <- s.current
		}
		b, ok := <-s.full
		if !ok {
			return errStoppedEarly
		}
		s.current, s.next = b, 0
	}
	*p = s.current.packets[s.next]
	s.next++
	return nil
}
