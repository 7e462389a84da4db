package lab

import (
	"strings"
	"testing"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/link"
)

// TestCheckPath: a trial is distorted when its TCP handshake took longer than
// the path's RTT and the SYNs' serialization, or a packet left the emulator
// late, by more than 3 ms or 5% of the RTT.
func TestCheckPath(t *testing.T) {
	late := func(ms float64) labpath.Stats {
		return labpath.Stats{BToA: link.DirectionStats{Counters: link.Counters{PacketsOut: 10}, LatenessMaxNs: int64(ms * 1e6), LatenessSumNs: int64(ms * 1e6)}}
	}
	for _, c := range []struct {
		name      string
		spec      Spec
		connectMs float64
		stats     labpath.Stats
		distorted bool
		reason    string
	}{
		{"as configured", Spec{RTTNs: 100e6}, 100.4, late(0.2), false, ""},
		{"within 5% of a long RTT", Spec{RTTNs: 200e6}, 209, late(0.2), false, ""},
		{"a slow handshake", Spec{RTTNs: 100e6}, 314, late(0.2), true, "its TCP handshake took 314.0 ms where the path gives 100.0 ms"},
		// At 100 kbit/s a 60-byte SYN takes 4.8 ms each way: 109.6 ms is the path.
		{"the SYNs' serialization is the path's", Spec{RTTNs: 100e6, RateBitsPerSecond: 100_000}, 109.6, late(0), false, ""},
		{"a late emulator", Spec{RTTNs: 40e6}, 40.2, late(12), true, "the emulator handed a packet over 12.0 ms after its delay and serialization"},
		{"HTTP/3's handshake is not compared", Spec{RTTNs: 40e6, HTTP3: true}, 95, late(0.5), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := TrialResult{ConnectMs: c.connectMs}
			pc := checkPath(c.spec, &res, c.stats)
			if pc.Distorted != c.distorted || !strings.Contains(pc.Reason, c.reason) {
				t.Errorf("distorted %v (%s), want %v (%q)", pc.Distorted, pc.Reason, c.distorted, c.reason)
			}
		})
	}
}
