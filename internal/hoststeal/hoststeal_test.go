package hoststeal

import (
	"testing"
	"time"
)

func TestReadingIsConsistent(t *testing.T) {
	m := Start()
	if _, err := stealTicks(); err != nil {
		t.Skipf("no steal column here: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // an interval to measure over, not synchronization
	r := m.Read()
	if r.Elapsed < 50*time.Millisecond || r.Stolen < 0 || r.Share < 0 || r.Share > 1 {
		t.Errorf("reading %+v: want at least 50 ms elapsed and a share in [0, 1]", r)
	}
	if (Reading{Share: NoisyShare + 0.01}).Noisy() != true || (Reading{Share: NoisyShare / 2}).Noisy() {
		t.Error("Noisy does not compare the share with NoisyShare")
	}
}
