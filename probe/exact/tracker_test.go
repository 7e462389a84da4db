package exact

import (
	"net/netip"
	"testing"

	"github.com/slowstart/slowstart/capture"
)

// flow builds the packets of one synthetic connection: the client at
// 192.0.2.1:40000, the server at 192.0.2.2:80, the server's ISN 1000, segments
// of 52 bytes with a 32-byte TCP header (timestamps), as with an MSS of 64.
type flow struct {
	client, server netip.Addr
	packets        []capture.Packet
}

const (
	flowClientPort = 40000
	flowServerPort = 80
	flowServerISN  = 1000
	flowSegment    = 52
)

func newFlow() *flow {
	return &flow{client: netip.MustParseAddr("192.0.2.1"), server: netip.MustParseAddr("192.0.2.2")}
}

func ms(v float64) int64 { return int64(v * 1e6) }

func (f *flow) fromClient(atMs float64, flags uint8, window uint16) *flow {
	p := capture.Packet{TimestampNs: ms(atMs), Src: f.client, Dst: f.server, SrcPort: flowClientPort, DstPort: flowServerPort,
		Flags: flags, Window: window, HeaderLen: 32, Options: capture.TCPOptions{WindowScale: -1}}
	if flags&capture.FlagSYN != 0 {
		p.Options.MSS, p.Options.WindowScale = 64, 7
	}
	f.packets = append(f.packets, p)
	return f
}

func (f *flow) fromServer(atMs float64, flags uint8, offset, length int) *flow {
	p := capture.Packet{TimestampNs: ms(atMs), Src: f.server, Dst: f.client, SrcPort: flowServerPort, DstPort: flowClientPort,
		Seq: uint32(flowServerISN + 1 + offset), Flags: flags, PayloadLen: length, HeaderLen: 32, Options: capture.TCPOptions{WindowScale: -1}}
	if flags&capture.FlagSYN != 0 {
		p.Seq, p.Options.MSS, p.Options.WindowScale = flowServerISN, 1460, 7
	}
	f.packets = append(f.packets, p)
	return f
}

// handshake: SYN at 0, SYN/ACK at 20 ms, ACK and request at 20 ms with a
// window of 504 << 7 bytes.
func (f *flow) handshake() *flow {
	return f.fromClient(0, capture.FlagSYN, 64240).
		fromServer(20, capture.FlagSYN|capture.FlagACK, 0, 0).
		fromClient(20, capture.FlagACK, 504).
		fromClient(20.1, capture.FlagACK|capture.FlagPSH, 504)
}

// burst sends segments [first, first+count) of full size at atMs.
func (f *flow) burst(atMs float64, first, count int) *flow {
	for i := first; i < first+count; i++ {
		f.fromServer(atMs+float64(i-first)*0.01, capture.FlagACK, i*flowSegment, flowSegment)
	}
	return f
}

func (f *flow) segment(atMs float64, index, length int) *flow {
	return f.fromServer(atMs, capture.FlagACK, index*flowSegment, length)
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name         string
		flow         *flow
		armed        bool
		base         int64 // setBase when not armed
		flightBytes  int64
		wantOutcome  string
		wantSegments int
		wantBytes    int
		wantProbe    int
	}{
		{name: "linux: window, tail loss probe, retransmission",
			flow:        newFlow().handshake().burst(40, 0, 10).segment(80, 10, flowSegment).segment(300, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeSuccess, wantSegments: 10, wantBytes: 520, wantProbe: 52},
		{name: "no loss probe: retransmission of the first segment",
			flow:        newFlow().handshake().burst(40, 0, 3).segment(1040, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeSuccess, wantSegments: 3, wantBytes: 156},
		{name: "last segment of the window lost: the probe leaves a hole",
			flow:        newFlow().handshake().burst(40, 0, 9).segment(80, 10, flowSegment).segment(300, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeLoss, wantSegments: 9, wantBytes: 468, wantProbe: 52},
		{name: "first segment lost, its retransmission fills the hole",
			flow:        newFlow().handshake().burst(40, 1, 9).segment(80, 10, flowSegment).segment(300, 0, flowSegment).segment(780, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeLoss, wantSegments: 9, wantBytes: 468, wantProbe: 52},
		{name: "response complete inside the window",
			flow:        newFlow().handshake().burst(40, 0, 4).segment(40.1, 4, 30).segment(240, 4, 30),
			flightBytes: 4*52 + 30, wantOutcome: OutcomeTooShort, wantSegments: 5, wantBytes: 238},
		{name: "response complete only through the loss probe",
			flow:        newFlow().handshake().burst(40, 0, 10).segment(80, 10, 20).segment(300, 0, flowSegment),
			flightBytes: 10*52 + 20, wantOutcome: OutcomeSuccess, wantSegments: 10, wantBytes: 520, wantProbe: 20},
		{name: "server closes after a short response",
			flow:        newFlow().handshake().burst(40, 0, 2).fromServer(40.2, capture.FlagACK|capture.FlagFIN, 2*52, 10),
			flightBytes: -1, wantOutcome: OutcomeTooShort, wantSegments: 3, wantBytes: 114},
		{name: "FIN before any data",
			flow:        newFlow().handshake().fromServer(40, capture.FlagACK|capture.FlagFIN, 0, 0),
			flightBytes: -1, wantOutcome: OutcomeFIN},
		{name: "RST before any data",
			flow:        newFlow().handshake().fromServer(40, capture.FlagRST, 0, 0),
			flightBytes: -1, wantOutcome: OutcomeRST},
		{name: "RST after some data",
			flow:        newFlow().handshake().burst(40, 0, 3).fromServer(45, capture.FlagRST, 3*52, 0),
			flightBytes: -1, wantOutcome: OutcomeLoss, wantSegments: 3, wantBytes: 156},
		{name: "no data",
			flow:        newFlow().handshake(),
			flightBytes: -1, wantOutcome: OutcomeTimeout},
		{name: "data, then neither more nor a retransmission",
			flow:        newFlow().handshake().burst(40, 0, 6),
			flightBytes: -1, wantOutcome: OutcomeTimeout, wantSegments: 6, wantBytes: 312},
		{name: "the advertised window caps the flight",
			flow: newFlow().fromClient(0, capture.FlagSYN, 64240).fromServer(20, capture.FlagSYN|capture.FlagACK, 0, 0).
				fromClient(20, capture.FlagACK|capture.FlagPSH, 4).burst(40, 0, 9).segment(300, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeRwndLimited, wantSegments: 9, wantBytes: 468},
		{name: "SYN retransmitted: the server may start smaller",
			flow: newFlow().fromClient(0, capture.FlagSYN, 64240).fromClient(1000, capture.FlagSYN, 64240).
				fromServer(1020, capture.FlagSYN|capture.FlagACK, 0, 0).fromClient(1020, capture.FlagACK|capture.FlagPSH, 504).
				burst(1040, 0, 2).segment(1300, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeLoss, wantSegments: 2, wantBytes: 104},
		{name: "merged by GSO/GRO: 4 and 5 segments in two packets, then a loss probe",
			flow:        newFlow().handshake().fromServer(40, capture.FlagACK, 0, 204).fromServer(40.1, capture.FlagACK, 204, 260).fromServer(70, capture.FlagACK, 464, 52).segment(250, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeSuccess, wantSegments: 9, wantBytes: 464, wantProbe: 52},
		{name: "merged by GSO on loopback: two packets of 5 segments each, then one segment retransmitted",
			flow:        newFlow().handshake().fromServer(40, capture.FlagACK, 0, 260).fromServer(40.1, capture.FlagACK, 260, 260).segment(300, 0, flowSegment),
			flightBytes: -1, wantOutcome: OutcomeSuccess, wantSegments: 10, wantBytes: 520},
		{name: "the server raised the MSS to 216 bytes",
			flow:        newFlow().handshake().fromServer(40, capture.FlagACK, 0, 216).fromServer(40.1, capture.FlagACK, 216, 216).fromServer(40.2, capture.FlagACK, 432, 216).fromServer(300, capture.FlagACK, 0, 216),
			flightBytes: -1, wantOutcome: OutcomeSuccess, wantSegments: 3, wantBytes: 648},
		{name: "after a handshake of 1000 bytes",
			flow:  newFlow().handshake().fromServer(40, capture.FlagACK, 0, 1000).fromServer(100, capture.FlagACK, 1000, 52).fromServer(100.1, capture.FlagACK, 1052, 52).fromServer(400, capture.FlagACK, 1000, 52),
			armed: false, base: 1000, flightBytes: -1, wantOutcome: OutcomeSuccess, wantSegments: 2, wantBytes: 104},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			armed := tc.armed || tc.base == 0
			tr := newTracker(tc.flow.server, flowServerPort, flowClientPort, armed)
			for i := range tc.flow.packets {
				tr.add(&tc.flow.packets[i])
				if !armed && tc.flow.packets[i].TimestampNs == ms(40) {
					tr.setBase(tc.base)
				}
			}
			run := tr.classify(classifyInput{announcedMSS: 64, flightBytes: tc.flightBytes})
			if run.Outcome != tc.wantOutcome || run.Segments != tc.wantSegments || run.Bytes != tc.wantBytes || run.LossProbeBytes != tc.wantProbe {
				t.Errorf("got %s %d segments %d bytes probe %d (%s), want %s %d segments %d bytes probe %d",
					run.Outcome, run.Segments, run.Bytes, run.LossProbeBytes, run.Reason, tc.wantOutcome, tc.wantSegments, tc.wantBytes, tc.wantProbe)
			}
			if run.HandshakeRTTMs <= 0 {
				t.Errorf("handshake RTT %v ms, want it from SYN to SYN/ACK", run.HandshakeRTTMs)
			}
		})
	}
}

// withServerTimestamps gives the server's packets from index from on TCP timestamps:
// tsVals[i] for the i-th of them.
func (f *flow) withServerTimestamps(from int, tsVals ...uint32) *flow {
	k := 0
	for i := from; i < len(f.packets) && k < len(tsVals); i++ {
		if f.packets[i].Src == f.server {
			f.packets[i].Options.HasTimestamps, f.packets[i].Options.TSVal = true, tsVals[k]
			k++
		}
	}
	return f
}

// TestLossProbeOnTheServersClock: a flight held up on the way reaches this side
// bunched with the tail loss probe sent 40 ms after it (4 ms apart on arrival, less
// than the RTT); the server's timestamps, ticking in milliseconds since the SYN/ACK,
// show the silence, and the probe is not counted.
func TestLossProbeOnTheServersClock(t *testing.T) {
	f := newFlow().handshake().burst(100, 0, 10).segment(104, 10, flowSegment).segment(300, 0, flowSegment)
	// The SYN/ACK (index 1), the 10 segments of the flight, the probe, the retransmission.
	ts := []uint32{1000}
	for range 10 {
		ts = append(ts, 1040)
	}
	ts = append(ts, 1080, 1280)
	f.withServerTimestamps(0, ts...)
	for _, withTimestamps := range []bool{true, false} {
		packets := f.packets
		if !withTimestamps {
			packets = newFlow().handshake().burst(100, 0, 10).segment(104, 10, flowSegment).segment(300, 0, flowSegment).packets
		}
		tr := newTracker(f.server, flowServerPort, flowClientPort, true)
		for i := range packets {
			tr.add(&packets[i])
		}
		run := tr.classify(classifyInput{flightBytes: -1, announcedMSS: 64, requestAtNs: ms(20.1)})
		wantSegments, wantProbe := 10, 52
		if !withTimestamps {
			wantSegments, wantProbe = 11, 0 // what capture times alone can tell
		}
		if run.Outcome != OutcomeSuccess || run.Segments != wantSegments || run.LossProbeBytes != wantProbe {
			t.Errorf("timestamps %v: %s, %d segments, probe %d bytes; want success, %d segments, probe %d: %s",
				withTimestamps, run.Outcome, run.Segments, run.LossProbeBytes, wantSegments, wantProbe, run.Reason)
		}
	}
}

// TestTrackerEnds: the tracker signals the end of a run at the first
// retransmission, and not before.
func TestTrackerEnds(t *testing.T) {
	f := newFlow().handshake().burst(40, 0, 5).segment(80, 5, flowSegment)
	tr := newTracker(f.server, flowServerPort, flowClientPort, true)
	for i := range f.packets {
		tr.add(&f.packets[i])
	}
	select {
	case <-tr.ended:
		t.Fatal("ended before any retransmission")
	default:
	}
	select {
	case <-tr.handshakeSeen:
	default:
		t.Fatal("the handshake was not seen")
	}
	f.segment(300, 0, flowSegment)
	tr.add(&f.packets[len(f.packets)-1])
	select {
	case <-tr.ended:
	default:
		t.Fatal("did not end at the retransmission")
	}
}

func TestSummarize(t *testing.T) {
	run := func(outcome string, segments int) Run {
		return Run{Outcome: outcome, Segments: segments, Bytes: segments * 52}
	}
	cases := []struct {
		name        string
		runs        []Run
		wantVerdict string
		wantIW      int
	}{
		{"all agree", []Run{run(OutcomeSuccess, 10), run(OutcomeSuccess, 10), run(OutcomeSuccess, 10)}, VerdictExact, 10},
		{"loss and timeout do not spoil", []Run{run(OutcomeSuccess, 10), run(OutcomeLoss, 7), run(OutcomeTimeout, 0)}, VerdictExact, 10},
		{"a smaller complete answer agrees", []Run{run(OutcomeSuccess, 10), run(OutcomeTooShort, 6)}, VerdictExact, 10},
		{"successes disagree", []Run{run(OutcomeSuccess, 10), run(OutcomeSuccess, 9)}, VerdictInconsistent, 0},
		{"a complete answer larger than the window", []Run{run(OutcomeSuccess, 10), run(OutcomeTooShort, 12)}, VerdictInconsistent, 0},
		{"only too short", []Run{run(OutcomeTooShort, 4), run(OutcomeTooShort, 5)}, VerdictLowerBound, 5},
		{"receive window", []Run{run(OutcomeRwndLimited, 40), run(OutcomeTooShort, 5)}, VerdictRwndLimited, 40},
		{"nothing", []Run{run(OutcomeLoss, 3), run(OutcomeRST, 0)}, VerdictNone, 0},
		{"merged segments and a loss probe: TSO may have deferred some", []Run{run(OutcomeSuccess, 9), {Outcome: OutcomeSuccess, Segments: 9, Bytes: 464, MergedSegments: true, LossProbeBytes: 52}}, VerdictLowerBound, 9},
		{"merged segments without a loss probe", []Run{{Outcome: OutcomeSuccess, Segments: 10, Bytes: 520, MergedSegments: true}}, VerdictExact, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{Runs: tc.runs, Phase: PhaseHTTP}
			res.summarize()
			if res.Verdict != tc.wantVerdict || res.IWSegments != tc.wantIW {
				t.Errorf("got %s %d (%s), want %s %d", res.Verdict, res.IWSegments, res.Reason, tc.wantVerdict, tc.wantIW)
			}
			if res.Consistent != (tc.wantVerdict == VerdictExact) {
				t.Errorf("consistent %v for verdict %s", res.Consistent, res.Verdict)
			}
			if iw := res.InitialWindow(); (iw == nil) != (tc.wantVerdict == VerdictNone) {
				t.Errorf("InitialWindow %+v for verdict %s", iw, res.Verdict)
			}
		})
	}
}

func TestOptionsNormalized(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{"defaults", Options{URL: "http://192.0.2.1/"}, false},
		{"MSS below the servers' minimum", Options{URL: "http://192.0.2.1/", MSS: 40}, true},
		{"no scheme", Options{URL: "192.0.2.1/"}, true},
		{"ftp", Options{URL: "ftp://192.0.2.1/"}, true},
		{"after the handshake over cleartext", Options{URL: "http://192.0.2.1/", AfterHandshake: true}, true},
		{"bad TLS version", Options{URL: "https://192.0.2.1/", TLSVersion: "1.1"}, true},
		{"too many runs", Options{URL: "https://192.0.2.1/", Runs: 1000}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, tgt, err := tc.opts.normalized()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if err == nil && (opts.MSS != DefaultMSS || opts.Runs != DefaultRuns || tgt.port != 80 || tgt.requestPath() != "/") {
				t.Errorf("defaults not filled: %+v %+v", opts, tgt)
			}
		})
	}
}
