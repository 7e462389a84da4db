package lab

import (
	"fmt"
	"strings"

	"github.com/slowstart/slowstart/lab/labpath"
)

// PathCheck is how a trial's path measured against the configured one. A busy
// host (a CPU hog on the emulator's core, a stalled server, a hypervisor that
// takes the CPU) stretches a trial's times without any packet being lost; the
// trial then measures the host, not the path. Two readings show it:
//
//   - the handshake: the client's TCP connect takes the path's round trip and
//     the serialization of the SYN and the SYN/ACK at the path's rate, and
//     nothing more when the host keeps up;
//   - the emulator's schedule: every packet leaves the emulator when its delay
//     and its serialization at the path's rate say, and the emulator records how
//     late it handed each one over (its lateness) when it could not keep up.
//
// A trial whose handshake took longer than expected, or one of whose packets
// left the emulator late, by more than the tolerance, is distorted.
type PathCheck struct {
	// HandshakeRTTMs is the client's TCP connect time; ExpectedHandshakeMs what
	// the configured path gives it (RTT and the two SYNs' serialization). Both
	// 0 over HTTP/3, whose handshake holds TLS's.
	HandshakeRTTMs      float64 `json:"handshake_rtt_ms"`
	ExpectedHandshakeMs float64 `json:"expected_handshake_ms"`
	// EmulatorLateMaxMs is how late the emulator handed over its latest packet
	// (either direction), after its delay and serialization; EmulatorLateMeanMs
	// the mean over the packets.
	EmulatorLateMaxMs  float64 `json:"emulator_late_max_ms"`
	EmulatorLateMeanMs float64 `json:"emulator_late_mean_ms"`
	// ToleranceMs is how far a reading may stray: PathToleranceMs or
	// PathToleranceShare of the RTT, whichever is more.
	ToleranceMs float64 `json:"tolerance_ms"`
	// Distorted: a reading strayed beyond the tolerance; Reason says which.
	Distorted bool   `json:"distorted"`
	Reason    string `json:"reason,omitempty"`
}

// The tolerance of a PathCheck: the emulator and the kernels keep to well under
// a millisecond on a quiet host (bench/lab-accuracy.sh: p99 within 0.1 ms of
// 70 ms), so a few milliseconds, or 5% of a long RTT, are the host's doing.
const (
	PathToleranceMs    = 3.0
	PathToleranceShare = 0.05
)

// synBytes is the size of a SYN and of a SYN/ACK on the wire (IPv4, TCP
// options MSS, SACK, timestamps, window scale: 20 + 40 bytes).
const synBytes = 60

// checkPath compares a finished trial's readings with its spec's path.
func checkPath(spec Spec, res *TrialResult, stats labpath.Stats) *PathCheck {
	rttMs := float64(spec.RTTNs) / 1e6
	pc := &PathCheck{ToleranceMs: max(PathToleranceMs, PathToleranceShare*rttMs)}
	var why []string
	if !spec.HTTP3 && res.ConnectMs > 0 {
		pc.HandshakeRTTMs = res.ConnectMs
		pc.ExpectedHandshakeMs = rttMs
		if spec.RateBitsPerSecond > 0 {
			pc.ExpectedHandshakeMs += 2 * synBytes * 8 / float64(spec.RateBitsPerSecond) * 1e3
		}
		if d := pc.HandshakeRTTMs - pc.ExpectedHandshakeMs; d > pc.ToleranceMs {
			why = append(why, fmt.Sprintf("its TCP handshake took %.1f ms where the path gives %.1f ms", pc.HandshakeRTTMs, pc.ExpectedHandshakeMs))
		}
	}
	out := stats.AToB.PacketsOut + stats.BToA.PacketsOut
	pc.EmulatorLateMaxMs = float64(max(stats.AToB.LatenessMaxNs, stats.BToA.LatenessMaxNs)) / 1e6
	if out > 0 {
		pc.EmulatorLateMeanMs = float64(stats.AToB.LatenessSumNs+stats.BToA.LatenessSumNs) / float64(out) / 1e6
	}
	if pc.EmulatorLateMaxMs > pc.ToleranceMs {
		why = append(why, fmt.Sprintf("the emulator handed a packet over %.1f ms after its delay and serialization", pc.EmulatorLateMaxMs))
	}
	if len(why) > 0 {
		pc.Distorted = true
		pc.Reason = strings.Join(why, ", and ") + fmt.Sprintf(", %.1f ms allowed", pc.ToleranceMs)
	}
	return pc
}
