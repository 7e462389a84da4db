package truthcheck

import (
	"path/filepath"
	"testing"

	"github.com/slowstart/slowstart/report"
)

func TestContradicts(t *testing.T) {
	for _, tc := range []struct {
		iw    report.InitialWindow
		truth int
		wrong bool
	}{
		{report.InitialWindow{Verdict: report.VerdictExact, Segments: 10}, 10, false},
		{report.InitialWindow{Verdict: report.VerdictExact, Segments: 12}, 10, true},
		{report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 10}, 10, false},
		{report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 4}, 3, true},
		{report.InitialWindow{Verdict: report.VerdictRange, Segments: 6, SegmentsMax: 10}, 10, false},
		{report.InitialWindow{Verdict: report.VerdictRange, Segments: 4, SegmentsMax: 8}, 3, true},
		{report.InitialWindow{Verdict: report.VerdictRange, Segments: 12, SegmentsMax: 13}, 50, true},
		{report.InitialWindow{Verdict: report.VerdictAmbiguous, Segments: 7}, 10, false},
	} {
		if got := Contradicts(&tc.iw, tc.truth) != ""; got != tc.wrong {
			t.Errorf("%+v against %d: contradicts %v, want %v", tc.iw, tc.truth, got, tc.wrong)
		}
	}
}

func TestCheckExpectations(t *testing.T) {
	rtt := 40.2
	conn := func(iw report.InitialWindow) *report.Connection {
		return &report.Connection{Vantage: "client", HandshakeRTTMs: &rtt, InitialWindow: &iw}
	}
	truth := Truth{IW: 10, RTTMs: 40}
	for _, tc := range []struct {
		expect        string
		iw            report.InitialWindow
		wrong, timing bool
	}{
		{ExpectExact, report.InitialWindow{Verdict: report.VerdictExact, Segments: 10}, false, false},
		{ExpectExact, report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 10}, false, true},
		{ExpectExact, report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 4}, true, false},
		{ExpectNotExact, report.InitialWindow{Verdict: report.VerdictExact, Segments: 10}, true, false},
		{ExpectNotExact, report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 7}, false, false},
		{ExpectAmbiguous, report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 7}, true, false},
		{ExpectRange, report.InitialWindow{Verdict: report.VerdictRange, Segments: 6, SegmentsMax: 10}, false, false},
		{ExpectRange, report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 4}, false, false}, // at the client
		{ExpectBound, report.InitialWindow{Verdict: report.VerdictExact, Segments: 9}, true, false},
	} {
		truth.Expect = tc.expect
		wrong, timing := Check(conn(tc.iw), "client", truth)
		if (len(wrong) > 0) != tc.wrong || (len(timing) > 0) != tc.timing {
			t.Errorf("%s, %+v: wrong %q, timing %q", tc.expect, tc.iw, wrong, timing)
		}
	}
	// At the server the first HTTP round's reading must be a range; a lower bound is
	// what a stall can cause.
	c := conn(report.InitialWindow{Verdict: report.VerdictLowerBound, Segments: 4})
	c.Vantage = "server"
	if wrong, timing := Check(c, "server", Truth{IW: 10, RTTMs: 40, Expect: ExpectRange}); len(wrong) > 0 || len(timing) == 0 {
		t.Errorf("a lower bound at the server where a range was expected: wrong %q, timing %q", wrong, timing)
	}
	// A handshake RTT holding the dropped SYN's timeout is wrong.
	slow := 1040.2
	c = conn(report.InitialWindow{Verdict: report.VerdictExact, Segments: 10})
	c.HandshakeRTTMs = &slow
	if wrong, _ := Check(c, "client", Truth{IW: 10, RTTMs: 40, SYNsDropped: 1, Expect: ExpectExact}); len(wrong) == 0 {
		t.Error("a handshake RTT of 1040 ms after a dropped SYN passed")
	}
}

// TestPacketsAndRemove: the helpers read a committed capture (nginx, IW 10, 100,000
// bytes over cleartext: 70 data segments of which the first 10 are round 1) and cut
// packets out of it.
func TestPacketsAndRemove(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "captures", "rtt40-iw10-h1-100000.server.pcap")
	ps, err := Packets(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := ClientSYNs(ps); n != 1 {
		t.Errorf("%d client SYNs, want 1", n)
	}
	// tshark -Y "tcp.srcport==80 && tcp.len>0" counts 70.
	var data int
	for _, p := range ps {
		if p.DataIndex > 0 {
			data++
			if !p.FromServer || p.Payload == 0 {
				t.Errorf("data segment %d: from server %v, %d bytes", p.DataIndex, p.FromServer, p.Payload)
			}
		}
	}
	if data != 70 {
		t.Errorf("%d server data segments, want 70", data)
	}
	tenth, ok := DataSegment(ps, 10)
	if !ok || tenth.Payload != 1448 {
		t.Fatalf("segment 10: %+v, %v", tenth, ok)
	}
	ack, ok := FirstDataAck(ps)
	if !ok || ack.FromServer || ack.Payload != 0 {
		t.Fatalf("first data ACK: %+v, %v", ack, ok)
	}
	out := filepath.Join(t.TempDir(), "cut.pcap")
	if err := Remove(path, out, tenth.Index, ack.Index); err != nil {
		t.Fatal(err)
	}
	cut, err := Packets(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cut) != len(ps)-2 {
		t.Errorf("%d packets after cutting 2 of %d", len(cut), len(ps))
	}
	for _, p := range cut {
		if p.FromServer && p.Seq == tenth.Seq && p.Payload > 0 {
			t.Error("segment 10 is still there")
		}
	}
}
