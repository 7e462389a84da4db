package link

import (
	"slices"
	"testing"
)

func TestDelayIsExactToTheNanosecond(t *testing.T) {
	tests := []struct {
		name      string
		delayNs   int64
		arrivalNs int64
	}{
		{"70 ms", 70 * millisecondNs, 1_234_567},
		{"half a millisecond", 500_000, 3},
		{"one nanosecond", 1, 0},
		{"zero", 0, 42},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			delay := NewDelay(test.delayNs, Jitter{}, 1)
			packet := newTestPackets(100)[0]
			delay.Enqueue(packet, test.arrivalNs, nil)
			wantNs := test.arrivalNs + test.delayNs
			if readyNs, ok := delay.NextReadyNs(); !ok || readyNs != wantNs {
				t.Errorf("NextReadyNs = %d, %v; want %d, true", readyNs, ok, wantNs)
			}
			if test.delayNs > 0 {
				if early := delay.Dequeue(wantNs - 1); early != nil {
					t.Fatalf("packet left at %d ns, 1 ns early", wantNs-1)
				}
			}
			got := delay.Dequeue(wantNs)
			if got != packet || got.TimeNs != wantNs {
				t.Fatalf("Dequeue(%d) = %v; want the packet with TimeNs %d", wantNs, got, wantNs)
			}
			if _, ok := delay.NextReadyNs(); ok {
				t.Error("NextReadyNs reports a packet after the only one left")
			}
		})
	}
}

// jitterRun sends packets 10 µs apart through a jittered delay and returns the order
// they leave in and each one's time in the stage.
func jitterRun(t *testing.T, jitter Jitter, seed uint64, count int) (order []int, heldNs []int64) {
	t.Helper()
	const delayNs, spacingNs = 1 * millisecondNs, 10_000
	delay := NewDelay(delayNs, jitter, seed)
	packets := newTestPackets(slices.Repeat([]int{100}, count)...)
	for i, p := range packets {
		delay.Enqueue(p, int64(i)*spacingNs, nil)
	}
	heldNs = make([]int64, count)
	lastTimeNs := int64(-1)
	for _, p := range drain(delay, 1<<62) {
		i := indexOf(t, packets, p)
		if p.TimeNs < lastTimeNs {
			t.Fatalf("packet %d left at %d ns, before the previous one at %d ns", i, p.TimeNs, lastTimeNs)
		}
		lastTimeNs = p.TimeNs
		order = append(order, i)
		heldNs[i] = p.TimeNs - int64(i)*spacingNs
	}
	if len(order) != count {
		t.Fatalf("%d packets left the delay, want %d", len(order), count)
	}
	return order, heldNs
}

func TestJitterWithoutReorderKeepsOrder(t *testing.T) {
	for _, distribution := range []JitterDistribution{JitterUniform, JitterNormal} {
		t.Run(distribution.String(), func(t *testing.T) {
			jitter := Jitter{SpreadNs: 300_000, Distribution: distribution}
			order, heldNs := jitterRun(t, jitter, 7, 5000)
			if !slices.IsSorted(order) {
				t.Error("packets left out of order although Reorder is off")
			}
			if slices.Min(heldNs) == slices.Max(heldNs) {
				t.Error("every packet was held the same time: no jitter was applied")
			}
			for i, held := range heldNs {
				if held < 0 {
					t.Fatalf("packet %d held %d ns", i, held)
				}
			}
		})
	}
}

func TestJitterWithReorderStaysInBoundsAndReorders(t *testing.T) {
	const jitterNs = 300_000
	order, heldNs := jitterRun(t, Jitter{SpreadNs: jitterNs, Reorder: true}, 7, 5000)
	if slices.IsSorted(order) {
		t.Error("no packet overtook another although Reorder is on and the jitter is 30 times the spacing")
	}
	for i, held := range heldNs {
		if held < millisecondNs-jitterNs || held > millisecondNs+jitterNs {
			t.Fatalf("packet %d held %d ns, outside 1 ms ± %d ns", i, held, jitterNs)
		}
	}
}

func TestJitterIsReproducibleBySeed(t *testing.T) {
	jitter := Jitter{SpreadNs: 200_000, Distribution: JitterNormal, Reorder: true}
	_, first := jitterRun(t, jitter, 11, 500)
	_, again := jitterRun(t, jitter, 11, 500)
	_, other := jitterRun(t, jitter, 12, 500)
	if !slices.Equal(first, again) {
		t.Error("the same seed gave different delays")
	}
	if slices.Equal(first, other) {
		t.Error("different seeds gave the same delays")
	}
}
