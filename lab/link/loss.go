package link

import (
	"fmt"
	"math/rand/v2"
)

// LossModel names a random loss process.
type LossModel int

const (
	// LossNone loses nothing.
	LossNone LossModel = iota
	// LossBernoulli loses each packet independently with LossConfig.Probability.
	LossBernoulli
	// LossGilbertElliott is the two-state Gilbert-Elliott model, as netem's "loss
	// gemodel p r 1-h 1-k": a Good and a Bad state, each with its own loss probability,
	// giving bursts of loss.
	LossGilbertElliott
)

func (m LossModel) String() string {
	switch m {
	case LossNone:
		return "none"
	case LossBernoulli:
		return "bernoulli"
	case LossGilbertElliott:
		return "gilbert-elliott"
	}
	return fmt.Sprintf("LossModel(%d)", int(m))
}

// LossConfig configures a Loss stage. Probabilities are fractions (0.01 is 1%).
type LossConfig struct {
	Model LossModel
	// Probability is the loss probability of LossBernoulli, in [0, 1).
	Probability float64
	// Gilbert-Elliott parameters, each in [0, 1], named as in the literature and netem:
	// GoodToBad is p, the chance of moving from Good to Bad after a packet; BadToGood is
	// r, from Bad to Good; LossInBad is 1-h, the loss probability in Bad; LossInGood is
	// 1-k, the loss probability in Good (usually 0). The chain starts in Good.
	GoodToBad, BadToGood, LossInBad, LossInGood float64
}

// AverageLossRate returns the long-run fraction of packets lost. For Gilbert-Elliott it is
// the stationary rate: (r·(1-k) + p·(1-h)) / (p + r).
func (c LossConfig) AverageLossRate() float64 {
	switch c.Model {
	case LossBernoulli:
		return c.Probability
	case LossGilbertElliott:
		if c.GoodToBad+c.BadToGood == 0 {
			return c.LossInGood // the chain never leaves Good
		}
		return (c.BadToGood*c.LossInGood + c.GoodToBad*c.LossInBad) / (c.GoodToBad + c.BadToGood)
	}
	return 0
}

// String describes the loss process for people.
func (c LossConfig) String() string {
	switch c.Model {
	case LossBernoulli:
		return fmt.Sprintf("bernoulli %.4g%%", 100*c.Probability)
	case LossGilbertElliott:
		return fmt.Sprintf("gilbert-elliott p=%.4g r=%.4g 1-h=%.4g 1-k=%.4g (average %.4g%%)",
			c.GoodToBad, c.BadToGood, c.LossInBad, c.LossInGood, 100*c.AverageLossRate())
	}
	return "none"
}

// Validate reports parameters outside their range, and a process that would lose
// everything (a link that carries nothing is a configuration mistake, not an experiment).
func (c LossConfig) Validate() error {
	switch c.Model {
	case LossNone:
		return nil
	case LossBernoulli:
		if !(c.Probability >= 0 && c.Probability < 1) {
			return fmt.Errorf("loss probability %g is outside [0, 1): give a fraction such as 0.01, or 1%%", c.Probability)
		}
		return nil
	case LossGilbertElliott:
		for _, parameter := range []struct {
			name  string
			value float64
		}{{"p (good to bad)", c.GoodToBad}, {"r (bad to good)", c.BadToGood},
			{"1-h (loss in bad)", c.LossInBad}, {"1-k (loss in good)", c.LossInGood}} {
			if !(parameter.value >= 0 && parameter.value <= 1) {
				return fmt.Errorf("gilbert-elliott %s = %g is outside [0, 1]", parameter.name, parameter.value)
			}
		}
		if c.AverageLossRate() >= 1 {
			return fmt.Errorf("gilbert-elliott parameters lose every packet in the long run (average loss %g): lower 1-h or 1-k, or raise r", c.AverageLossRate())
		}
		return nil
	}
	return fmt.Errorf("loss model %d: use LossNone, LossBernoulli or LossGilbertElliott", int(c.Model))
}

// Loss drops packets at random by its LossConfig and passes the rest on at once. The
// random source is a PCG generator seeded by the caller: the same seed and the same
// sequence of packets give the same drops.
type Loss struct {
	config  LossConfig
	random  *rand.Rand
	inBad   bool // Gilbert-Elliott state
	passing packetFIFO
}

// NewLoss returns a Loss stage; validate the config first.
func NewLoss(config LossConfig, seed uint64) *Loss {
	return &Loss{config: config, random: rand.New(rand.NewPCG(seed, seedStreamLoss))}
}

// lose decides the fate of the next packet.
func (l *Loss) lose() bool {
	switch l.config.Model {
	case LossBernoulli:
		return l.random.Float64() < l.config.Probability
	case LossGilbertElliott:
		lossProbability, leaveProbability := l.config.LossInGood, l.config.GoodToBad
		if l.inBad {
			lossProbability, leaveProbability = l.config.LossInBad, l.config.BadToGood
		}
		lost := l.random.Float64() < lossProbability
		if l.random.Float64() < leaveProbability {
			l.inBad = !l.inBad
		}
		return lost
	}
	return false
}

// Enqueue implements Stage.
func (l *Loss) Enqueue(p *Packet, nowNs int64, dropped []*Packet) []*Packet {
	if l.lose() {
		return append(dropped, p)
	}
	p.TimeNs = nowNs
	l.passing.push(p)
	return dropped
}

// Dequeue implements Stage.
func (l *Loss) Dequeue(nowNs int64) *Packet { return l.passing.popReady(nowNs) }

// NextReadyNs implements Stage.
func (l *Loss) NextReadyNs() (int64, bool) { return l.passing.frontTime() }
