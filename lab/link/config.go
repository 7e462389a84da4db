package link

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slowstart/slowstart/units"
)

// Seed streams: each random stage draws from its own PCG stream of the Config's seed, so
// adding jitter does not change which packets are lost.
const (
	seedStreamLoss   = 0x6c6f7373 // "loss"
	seedStreamJitter = 0x6a697474 // "jitt"
)

// Config describes one direction of an emulated path.
type Config struct {
	// DelayNs is the one-way propagation delay.
	DelayNs int64
	// Jitter varies the delay at random; the zero value is none.
	Jitter Jitter
	// RateBitsPerSecond is the bottleneck rate; 0 means unlimited (no rate stage, no queue).
	RateBitsPerSecond int64
	// Trace, when set, replaces RateBitsPerSecond with a mahimahi delivery trace.
	Trace *DeliveryTrace
	// Queue is the buffer in front of the rate or trace; the zero value is an unlimited
	// drop-tail queue (see DefaultQueue for a finite default).
	Queue QueueConfig
	// Loss is the random loss process; the zero value loses nothing.
	Loss LossConfig
	// Drop drops the first packets of a kind (the first SYN, say) before any other
	// stage sees them; the zero value drops nothing.
	Drop DropConfig
	// Seed seeds the random stages; the same seed replays the same losses and jitter.
	Seed uint64
}

// HasBottleneck reports whether the direction has a rate or trace stage (and so a queue).
func (c Config) HasBottleneck() bool { return c.RateBitsPerSecond > 0 || c.Trace != nil }

// Validate reports every value that cannot work, each with what to do instead.
func (c Config) Validate() error {
	var problems []error
	if c.DelayNs < 0 {
		problems = append(problems, fmt.Errorf("delay %v is negative: give a one-way delay of 0 or more", time.Duration(c.DelayNs)))
	}
	if c.Jitter.SpreadNs < 0 {
		problems = append(problems, fmt.Errorf("jitter %v is negative: give 0 for none", time.Duration(c.Jitter.SpreadNs)))
	}
	if c.Jitter.Distribution != JitterUniform && c.Jitter.Distribution != JitterNormal {
		problems = append(problems, fmt.Errorf("jitter distribution %d: use JitterUniform or JitterNormal", int(c.Jitter.Distribution)))
	}
	if c.RateBitsPerSecond < 0 {
		problems = append(problems, fmt.Errorf("rate %d bit/s is negative: give a positive rate, or 0 for unlimited", c.RateBitsPerSecond))
	}
	if c.Trace != nil {
		if c.RateBitsPerSecond != 0 {
			problems = append(problems, errors.New("both a rate and a delivery trace are set: a direction has one bottleneck, choose one"))
		}
		if err := c.Trace.Validate(); err != nil {
			problems = append(problems, err)
		}
	}
	if err := c.Queue.Validate(); err != nil {
		problems = append(problems, err)
	}
	if !c.HasBottleneck() && !c.Queue.Unlimited() {
		problems = append(problems, fmt.Errorf("queue limit (%s) without a rate or trace: a queue only fills in front of a bottleneck, so set a rate too", c.Queue))
	}
	if err := c.Loss.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := c.Drop.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("link config: %w", err)
	}
	return nil
}

// String describes the direction for people, e.g.
// "delay 70ms, rate 10 Mbit/s, queue drop-tail, 64 packets, loss bernoulli 1%".
func (c Config) String() string {
	parts := []string{"delay " + time.Duration(c.DelayNs).String()}
	if c.Jitter.SpreadNs > 0 {
		jitter := fmt.Sprintf("jitter %v %s", time.Duration(c.Jitter.SpreadNs), c.Jitter.Distribution)
		if c.Jitter.Reorder {
			jitter += " (reordering)"
		}
		parts = append(parts, jitter)
	}
	switch {
	case c.Trace != nil:
		parts = append(parts, fmt.Sprintf("trace %s (average %s)", c.Trace.Name, units.FormatRate(int64(c.Trace.AverageRateBitsPerSecond()))))
	case c.RateBitsPerSecond > 0:
		parts = append(parts, "rate "+units.FormatRate(c.RateBitsPerSecond))
	default:
		parts = append(parts, "rate unlimited")
	}
	if c.HasBottleneck() {
		parts = append(parts, "queue "+c.Queue.String())
	}
	if c.Loss.Model != LossNone {
		parts = append(parts, "loss "+c.Loss.String())
	}
	if c.Drop.Count > 0 {
		parts = append(parts, c.Drop.String())
	}
	return strings.Join(parts, ", ")
}
