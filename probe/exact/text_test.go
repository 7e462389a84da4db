package exact

import (
	"bytes"
	"testing"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/golden"
)

// classified runs the tracker over synthetic flows (see tracker_test.go), so that
// the runs rendered are what a measurement of those packets would report.
func classified(flows ...*flow) []Run {
	var runs []Run
	for i, f := range flows {
		tr := newTracker(f.server, flowServerPort, flowClientPort, true)
		for j := range f.packets {
			tr.add(&f.packets[j])
		}
		run := tr.classify(classifyInput{announcedMSS: 64, flightBytes: -1, requestAtNs: ms(20.1)})
		run.Index, run.Local = i+1, "192.0.2.1:40000"
		runs = append(runs, run)
	}
	return runs
}

// TestWriteTextGolden: probe --exact's text for fixed results, against
// testdata/golden (go test -update rewrites them after a deliberate change).
func TestWriteTextGolden(t *testing.T) {
	window := func() *flow {
		return newFlow().handshake().burst(40, 0, 10).segment(80, 10, flowSegment).segment(300, 0, flowSegment)
	}
	cases := []struct {
		name  string
		res   Result
		flows []*flow
	}{
		{"exact.txt", Result{URL: "http://example.test/big", Remote: "192.0.2.2:80", Phase: PhaseHTTP, AnnouncedMSS: 64},
			[]*flow{window(), window(), window()}},
		{"tls-disagree.txt", Result{URL: "https://example.test/", Remote: "192.0.2.2:443", Phase: PhaseTLS, AnnouncedMSS: 64},
			[]*flow{window(), newFlow().handshake().burst(40, 0, 3).segment(1040, 0, flowSegment),
				newFlow().handshake().burst(40, 0, 9).segment(80, 10, flowSegment).segment(300, 0, flowSegment)}},
		{"too-short.txt", Result{URL: "http://example.test/\x1b[31mred", Remote: "192.0.2.2:80", Phase: PhaseHTTP, AfterHandshake: true, AnnouncedMSS: 64},
			[]*flow{newFlow().handshake().burst(40, 0, 2).fromServer(40.2, capture.FlagACK|capture.FlagFIN, 2*52, 10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.res
			res.Schema = Schema
			res.Runs = classified(tc.flows...)
			res.summarize()
			var b bytes.Buffer
			if err := WriteText(&b, &res); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tc.name, b.Bytes())
		})
	}
}
