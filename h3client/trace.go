package h3client

import (
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/slowstart/slowstart/quicanalysis"
)

// TracedPacket is one packet the client sent or received, as quic-go's tracing hooks
// (its qlog events) reported it.
type TracedPacket struct {
	TimeNs int64  // when the event was recorded (Unix ns)
	Sent   bool   // sent by the client; false: received
	Type   string // qlog packet type: "initial", "handshake", "1RTT", ...
	Number int64
	Bytes  int // the packet's length on the wire
	Frames []TracedFrame
}

// TracedFrame is one frame of a traced packet: CRYPTO and STREAM with their offsets,
// ACK with its ranges, others by name.
type TracedFrame struct {
	Kind     string // "crypto", "stream", "ack", "padding", "ping", "other"
	StreamID int64
	Offset   int64
	Length   int64
	Fin      bool
	Ranges   [][2]int64 // ACK: [smallest, largest], largest range first
}

// tracer collects the packet events of the client's connection. It implements
// qlogwriter.Trace; quic-go calls it from its connection goroutines.
type tracer struct {
	mu      sync.Mutex
	packets []TracedPacket
}

func (t *tracer) AddProducer() qlogwriter.Recorder { return &recorder{t: t} }

// Packets returns what was traced so far.
func (t *tracer) Packets() []TracedPacket {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TracedPacket(nil), t.packets...)
}

type recorder struct{ t *tracer }

func (r *recorder) Close() error { return nil }

func (r *recorder) RecordEvent(ev qlogwriter.Event) {
	now := time.Now().UnixNano()
	var p TracedPacket
	var frames []qlog.Frame
	switch e := ev.(type) {
	case qlog.PacketSent:
		p = TracedPacket{TimeNs: now, Sent: true, Type: string(e.Header.PacketType), Number: int64(e.Header.PacketNumber), Bytes: e.Raw.Length}
		frames = e.Frames
	case *qlog.PacketSent:
		p = TracedPacket{TimeNs: now, Sent: true, Type: string(e.Header.PacketType), Number: int64(e.Header.PacketNumber), Bytes: e.Raw.Length}
		frames = e.Frames
	case qlog.PacketReceived:
		p = TracedPacket{TimeNs: now, Type: string(e.Header.PacketType), Number: int64(e.Header.PacketNumber), Bytes: e.Raw.Length}
		frames = e.Frames
	case *qlog.PacketReceived:
		p = TracedPacket{TimeNs: now, Type: string(e.Header.PacketType), Number: int64(e.Header.PacketNumber), Bytes: e.Raw.Length}
		frames = e.Frames
	default:
		return
	}
	for _, f := range frames {
		p.Frames = append(p.Frames, tracedFrame(f.Frame))
	}
	r.t.mu.Lock()
	r.t.packets = append(r.t.packets, p)
	r.t.mu.Unlock()
}

func tracedFrame(f any) TracedFrame {
	switch f := f.(type) {
	case *qlog.CryptoFrame:
		return TracedFrame{Kind: "crypto", Offset: f.Offset, Length: f.Length}
	case *qlog.StreamFrame:
		return TracedFrame{Kind: "stream", StreamID: int64(f.StreamID), Offset: f.Offset, Length: f.Length, Fin: f.Fin}
	case *qlog.AckFrame:
		t := TracedFrame{Kind: "ack"}
		for _, r := range f.AckRanges {
			t.Ranges = append(t.Ranges, [2]int64{int64(r.Smallest), int64(r.Largest)})
		}
		return t
	case *qlog.PingFrame:
		return TracedFrame{Kind: "ping"}
	}
	return TracedFrame{Kind: "other"}
}

// compareTrace checks the decoded datagrams against the tracer's packets: the same
// packet numbers, sizes and frames each way. It returns notes for disagreements.
func compareTrace(trace []TracedPacket, a *quicanalysis.Analyzer) []string {
	type key struct {
		sent   bool
		space  string
		number int64
	}
	traced := map[key]TracedPacket{}
	for _, p := range trace {
		traced[key{p.Sent, qlogSpace(p.Type), p.Number}] = p
	}
	var notes []string
	decoded := a.Packets()
	matched := 0
	for _, p := range decoded {
		if p.Number < 0 {
			continue
		}
		t, ok := traced[key{p.FromClient, p.Space.String(), p.Number}]
		if !ok {
			continue
		}
		matched++
		if t.Bytes != p.Bytes {
			notes = append(notes, fmt.Sprintf("packet %s %d: %d bytes decoded, %d traced", p.Space, p.Number, p.Bytes, t.Bytes))
		}
	}
	if matched < len(traced) {
		notes = append(notes, fmt.Sprintf("quic-go traced %d packets; %d of them were found in the recorded datagrams", len(traced), matched))
	}
	if len(notes) > 5 {
		notes = append(notes[:5], fmt.Sprintf("and %d more disagreements", len(notes)-5))
	}
	return notes
}

func qlogSpace(packetType string) string {
	switch packetType {
	case "initial":
		return "initial"
	case "handshake":
		return "handshake"
	}
	return "application"
}
