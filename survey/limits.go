package survey

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// limits are a survey's global rate limits: new connections per second, and
// packets per second. A connection waits for its token; packets are charged
// when a measurement ends (its captures counted them), putting the bucket in
// debt that later connections wait out, so that the average holds over any
// stretch longer than a few measurements.
type limits struct {
	connections *rate.Limiter // nil: no limit
	packets     *rate.Limiter
	packetBurst int
}

func newLimits(connectionsPerSecond, packetsPerSecond float64) *limits {
	l := &limits{}
	if connectionsPerSecond > 0 {
		// A burst of a tenth of a second's worth: smooth, yet one exact
		// measurement's runs need not wait for each other at high rates.
		l.connections = rate.NewLimiter(rate.Limit(connectionsPerSecond), max(1, int(math.Ceil(connectionsPerSecond/10))))
	}
	if packetsPerSecond > 0 {
		l.packetBurst = max(1, int(math.Ceil(packetsPerSecond/10)))
		l.packets = rate.NewLimiter(rate.Limit(packetsPerSecond), l.packetBurst)
	}
	return l
}

// waitConnections waits until n new connections may be opened: the
// connection rate allows them, and the packet budget is not in debt.
func (l *limits) waitConnections(ctx context.Context, n int) error {
	if l.packets != nil {
		for {
			tokens := l.packets.Tokens()
			if tokens >= 0 {
				break
			}
			debt := time.Duration(-tokens / float64(l.packets.Limit()) * float64(time.Second))
			t := time.NewTimer(debt + time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			}
		}
	}
	if l.connections == nil {
		return nil
	}
	for n > 0 {
		k := min(n, l.connections.Burst())
		if err := l.connections.WaitN(ctx, k); err != nil {
			return ctxErr(ctx, err)
		}
		n -= k
	}
	return nil
}

// chargePackets counts packets a measurement exchanged.
func (l *limits) chargePackets(n int) {
	if l.packets == nil || n <= 0 {
		return
	}
	now := time.Now()
	for n > 0 {
		k := min(n, l.packetBurst)
		l.packets.ReserveN(now, k) // never cancelled: the packets were sent
		n -= k
	}
}

// ctxErr prefers the context's own error to the limiter's wording of it.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
