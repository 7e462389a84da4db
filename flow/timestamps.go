package flow

// SenderClock reads a TCP sender's timestamp clock (the TSval it puts in every
// segment) as time on the sender, when that clock ticks in milliseconds, as Linux's
// does (RFC 7323 lets it tick from 1 ms to 1 s, and some stacks use microseconds).
// Away from the sender, delays on the path shift when its segments are captured; its
// timestamps say when it sent them.
type SenderClock struct {
	firstTSVal uint32
	firstNs    int64
	set        bool
}

// Observe records a segment of the sender's with its timestamp option, captured at
// capture time atNs (the first one observed is the reference).
func (c *SenderClock) Observe(tsVal uint32, atNs int64) {
	if !c.set {
		c.firstTSVal, c.firstNs, c.set = tsVal, atNs, true
	}
}

// GapNs returns the time on the sender between two of its segments' timestamps,
// fromTSVal and toTSVal, the later captured at atNs, and whether the clock could be
// read: it must tick at 0.5 to 2 per millisecond of capture time since the first
// segment observed, over at least 20 ticks.
func (c *SenderClock) GapNs(fromTSVal, toTSVal uint32, atNs int64) (int64, bool) {
	if !c.set {
		return 0, false
	}
	elapsedTicks := int64(int32(toTSVal - c.firstTSVal))
	elapsedNs := atNs - c.firstNs
	if elapsedTicks < 20 || elapsedNs <= 0 {
		return 0, false
	}
	// 0.5 <= ticks per ms <= 2, in integers (no division on every segment).
	if ticksNs := elapsedTicks * 1_000_000; 2*ticksNs < elapsedNs || ticksNs > 2*elapsedNs {
		return 0, false
	}
	return int64(int32(toTSVal-fromTSVal)) * 1_000_000, true
}
