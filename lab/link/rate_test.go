package link

import "testing"

func TestRateSerialization(t *testing.T) {
	tests := []struct {
		name              string
		rateBitsPerSecond int64
		sizes             []int
		arrivalsNs        []int64
		wantDeparturesNs  []int64
	}{
		{
			name:              "1500 bytes at 1.2 Mbit/s take 10 ms",
			rateBitsPerSecond: 1_200_000,
			sizes:             []int{1500},
			arrivalsNs:        []int64{5},
			wantDeparturesNs:  []int64{5 + 10*millisecondNs},
		},
		{
			name:              "back-to-back packets queue behind each other",
			rateBitsPerSecond: 1_200_000,
			sizes:             []int{1500, 1500, 150},
			arrivalsNs:        []int64{0, 0, 0},
			wantDeparturesNs:  []int64{10 * millisecondNs, 20 * millisecondNs, 21 * millisecondNs},
		},
		{
			name:              "a packet arriving at an idle link starts at once",
			rateBitsPerSecond: 12_000_000,
			sizes:             []int{1500, 1500},
			arrivalsNs:        []int64{0, 5 * millisecondNs},
			wantDeparturesNs:  []int64{1 * millisecondNs, 6 * millisecondNs},
		},
		{
			name:              "a packet arriving mid-transmission waits for the end",
			rateBitsPerSecond: 12_000_000,
			sizes:             []int{1500, 100},
			arrivalsNs:        []int64{0, 500_000},
			wantDeparturesNs:  []int64{millisecondNs, millisecondNs + 66_666},
		},
		{
			name:              "sub-nanosecond remainders carry over",
			rateBitsPerSecond: 3, // 1 byte takes 8/3 s
			sizes:             []int{1, 1, 1},
			arrivalsNs:        []int64{0, 0, 0},
			wantDeparturesNs:  []int64{2_666_666_666, 5_333_333_333, 8_000_000_000},
		},
		{
			name:              "1 Gbit/s",
			rateBitsPerSecond: 1_000_000_000,
			sizes:             []int{1500, 64},
			arrivalsNs:        []int64{0, 0},
			wantDeparturesNs:  []int64{12_000, 12_512},
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			rate := NewRate(test.rateBitsPerSecond, NewQueue(QueueConfig{}))
			packets := newTestPackets(test.sizes...)
			var departed []*Packet
			for i, p := range packets {
				departed = append(departed, drain(rate, test.arrivalsNs[i])...)
				if dropped := rate.Enqueue(p, test.arrivalsNs[i], nil); len(dropped) > 0 {
					t.Fatalf("an unlimited queue dropped %d packets", len(dropped))
				}
			}
			departed = append(departed, drain(rate, 1<<62)...)
			if len(departed) != len(packets) {
				t.Fatalf("%d packets departed, want %d", len(departed), len(packets))
			}
			for i, p := range departed {
				if p != packets[i] {
					t.Errorf("departure %d is packet %d", i, indexOf(t, packets, p))
				}
				if p.TimeNs != test.wantDeparturesNs[i] {
					t.Errorf("packet %d departed at %d ns, want %d ns", i, p.TimeNs, test.wantDeparturesNs[i])
				}
			}
		})
	}
}

func TestRateReportsNextDeparture(t *testing.T) {
	rate := NewRate(12_000_000, NewQueue(QueueConfig{}))
	if _, ok := rate.NextReadyNs(); ok {
		t.Error("an empty rate stage reports a next packet")
	}
	for _, p := range newTestPackets(1500, 1500) {
		rate.Enqueue(p, 0, nil)
	}
	for _, wantNs := range []int64{millisecondNs, 2 * millisecondNs} {
		readyNs, ok := rate.NextReadyNs()
		if !ok || readyNs != wantNs {
			t.Fatalf("NextReadyNs = %d, %v; want %d", readyNs, ok, wantNs)
		}
		if p := rate.Dequeue(wantNs - 1); p != nil {
			t.Fatalf("a packet left at %d ns, before its time %d ns", wantNs-1, wantNs)
		}
		if p := rate.Dequeue(wantNs); p == nil || p.TimeNs != wantNs {
			t.Fatalf("no packet left at %d ns", wantNs)
		}
	}
}

func TestRateDropsWhenItsQueueIsFull(t *testing.T) {
	rate := NewRate(12_000_000, NewQueue(QueueConfig{Discipline: DropTail, LimitPackets: 1}))
	packets := newTestPackets(1500, 1500, 1500)
	var dropped []*Packet
	for _, p := range packets {
		dropped = rate.Enqueue(p, 0, dropped)
	}
	// The first is on the wire, the second waits, the third finds the queue full.
	if len(dropped) != 1 || dropped[0] != packets[2] {
		t.Fatalf("dropped %d packets, want only the third", len(dropped))
	}
	if got := drain(rate, 10*millisecondNs); len(got) != 2 {
		t.Fatalf("%d packets departed, want 2", len(got))
	}
}
