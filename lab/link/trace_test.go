package link

import (
	"strings"
	"testing"
)

func TestTraceDeliverySchedule(t *testing.T) {
	// Opportunities at 1, 1 and 3 ms, repeating every 3 ms: 4, 4, 6, 7, 7, 9 ...
	trace := &DeliveryTrace{Name: "test", OpportunitiesMs: []int64{1, 1, 3}}
	tests := []struct {
		name             string
		arrivalsNs       []int64
		sizes            []int
		wantDeparturesNs []int64
	}{
		{
			// Each opportunity carries 1504 bytes: the 4 left after a 1500-byte packet
			// start the next one, so the fourth packet still needs only one opportunity.
			name:             "a burst uses consecutive opportunities",
			arrivalsNs:       []int64{0, 0, 0, 0},
			sizes:            []int{1500, 1500, 1500, 1500},
			wantDeparturesNs: []int64{1 * millisecondNs, 1 * millisecondNs, 3 * millisecondNs, 4 * millisecondNs},
		},
		{
			name:             "small packets share one opportunity",
			arrivalsNs:       []int64{0, 0, 0},
			sizes:            []int{500, 500, 504},
			wantDeparturesNs: []int64{millisecondNs, millisecondNs, millisecondNs},
		},
		{
			name:             "a packet larger than an opportunity takes two",
			arrivalsNs:       []int64{2 * millisecondNs},
			sizes:            []int{2000},
			wantDeparturesNs: []int64{4 * millisecondNs},
		},
		{
			name:             "an opportunity at the arrival time is missed",
			arrivalsNs:       []int64{1 * millisecondNs},
			sizes:            []int{100},
			wantDeparturesNs: []int64{3 * millisecondNs},
		},
		{
			name:             "after a long idle time the trace has kept repeating",
			arrivalsNs:       []int64{1_000*millisecondNs + 500_000},
			sizes:            []int{100},
			wantDeparturesNs: []int64{1_002 * millisecondNs},
		},
		{
			name:             "a 1504-byte packet fills a whole opportunity",
			arrivalsNs:       []int64{2 * millisecondNs, 2 * millisecondNs},
			sizes:            []int{1504, 1504},
			wantDeparturesNs: []int64{3 * millisecondNs, 4 * millisecondNs},
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			stage := NewTrace(trace, NewQueue(QueueConfig{}), 0)
			packets := newTestPackets(test.sizes...)
			var departed []*Packet
			for i, p := range packets {
				departed = append(departed, drain(stage, test.arrivalsNs[i])...)
				stage.Enqueue(p, test.arrivalsNs[i], nil)
			}
			if readyNs, ok := stage.NextReadyNs(); !ok || readyNs > test.wantDeparturesNs[0] {
				t.Errorf("NextReadyNs = %d, %v; want at most %d", readyNs, ok, test.wantDeparturesNs[0])
			}
			departed = append(departed, drain(stage, 1<<40)...)
			if len(departed) != len(packets) {
				t.Fatalf("%d packets departed, want %d", len(departed), len(packets))
			}
			for i, p := range departed {
				if p != packets[i] || p.TimeNs != test.wantDeparturesNs[i] {
					t.Errorf("departure %d: packet %d at %d ns, want packet %d at %d ns",
						i, indexOf(t, packets, p), p.TimeNs, i, test.wantDeparturesNs[i])
				}
			}
		})
	}
}

func TestTraceRepeatsWithItsLastTimeAsPeriod(t *testing.T) {
	// A trace 0, 2 has period 2 ms: its opportunity at 2 ms and the next repetition's at
	// 0 (= 2 ms) fall together, as in mahimahi.
	stage := NewTrace(&DeliveryTrace{Name: "test", OpportunitiesMs: []int64{0, 2}}, NewQueue(QueueConfig{}), 0)
	for _, p := range newTestPackets(1504, 1504, 1504) {
		stage.Enqueue(p, millisecondNs, nil)
	}
	var gotNs []int64
	for _, p := range drain(stage, 10*millisecondNs) {
		gotNs = append(gotNs, p.TimeNs)
	}
	wantNs := []int64{2 * millisecondNs, 2 * millisecondNs, 4 * millisecondNs}
	if len(gotNs) != len(wantNs) || gotNs[0] != wantNs[0] || gotNs[1] != wantNs[1] || gotNs[2] != wantNs[2] {
		t.Fatalf("departures at %v ns, want %v", gotNs, wantNs)
	}
}

func TestTraceQueueDrops(t *testing.T) {
	trace := &DeliveryTrace{Name: "test", OpportunitiesMs: []int64{10}}
	stage := NewTrace(trace, NewQueue(QueueConfig{Discipline: DropHead, LimitPackets: 2}), 0)
	packets := newTestPackets(1500, 1500, 1500)
	var dropped []*Packet
	for _, p := range packets {
		dropped = stage.Enqueue(p, 0, dropped)
	}
	if len(dropped) != 1 || dropped[0] != packets[0] {
		t.Fatalf("drop-head dropped %d packets, want the first only", len(dropped))
	}
	got := drain(stage, 20*millisecondNs)
	if len(got) != 2 || got[0] != packets[1] || got[0].TimeNs != 10*millisecondNs || got[1].TimeNs != 20*millisecondNs {
		t.Fatalf("departures %v, want packets 1 and 2 at 10 and 20 ms", got)
	}
}

func TestParseTrace(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		want      []int64
		wantError string
	}{
		{"mahimahi file", "0\n1\n1\n5\n", []int64{0, 1, 1, 5}, ""},
		{"blank lines, comments and CRLF", "# made by hand\r\n1\r\n\r\n2\r\n", []int64{1, 2}, ""},
		{"empty", "", nil, "no delivery opportunities"},
		{"decreasing", "5\n3\n", nil, "line 2: 3 ms comes after 5 ms"},
		{"not a number", "1\n2ms\n", nil, `line 2: "2ms" is not a timestamp`},
		{"negative", "-1\n3\n", nil, `line 1: "-1" is not a timestamp`},
		{"zero length", "0\n0\n", nil, "must last a nonzero time"},
		{"absurdly long", "1\n99999999999999\n", nil, "outside 0.."},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			trace, err := ParseTrace(strings.NewReader(test.text), "up.trace")
			if test.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), test.wantError) || !strings.Contains(err.Error(), "up.trace") {
					t.Fatalf("error = %v, want one naming the file and saying %q", err, test.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(trace.OpportunitiesMs) != len(test.want) {
				t.Fatalf("opportunities %v, want %v", trace.OpportunitiesMs, test.want)
			}
			for i := range test.want {
				if trace.OpportunitiesMs[i] != test.want[i] {
					t.Fatalf("opportunities %v, want %v", trace.OpportunitiesMs, test.want)
				}
			}
		})
	}
}

func TestTraceAverageRate(t *testing.T) {
	trace, err := ParseTrace(strings.NewReader("1\n2\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	// Two opportunities of 1504 bytes every 2 ms: one per millisecond, 12.032 Mbit/s.
	if got := trace.AverageRateBitsPerSecond(); got != 12_032_000 {
		t.Errorf("AverageRateBitsPerSecond = %g, want 12032000", got)
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add("0\n1\n1\n5\n")
	f.Add("# c\n\n3\n")
	f.Add("5\n3\n")
	f.Fuzz(func(t *testing.T, text string) {
		trace, err := ParseTrace(strings.NewReader(text), "fuzz")
		if err != nil {
			return
		}
		if err := trace.Validate(); err != nil {
			t.Fatalf("ParseTrace accepted a trace that Validate rejects: %v", err)
		}
		stage := NewTrace(trace, NewQueue(QueueConfig{}), 0)
		stage.Enqueue(newTestPackets(1500)[0], 0, nil)
		if got := drain(stage, 2*trace.PeriodMs()*millisecondNs+1); len(got) != 1 {
			t.Fatalf("a packet did not cross a valid trace within two periods")
		}
	})
}
