package link

import (
	"math"
	"slices"
	"testing"
)

// lossPattern runs count packets through a Loss stage and returns which were dropped.
func lossPattern(config LossConfig, seed uint64, count int) []bool {
	loss := NewLoss(config, seed)
	packet := &Packet{Data: make([]byte, 100)}
	lost := make([]bool, count)
	var dropped []*Packet
	for i := range lost {
		dropped = loss.Enqueue(packet, int64(i), dropped[:0])
		lost[i] = len(dropped) == 1
		if !lost[i] && loss.Dequeue(int64(i)) != packet {
			panic("a packet that was not lost did not pass at once")
		}
	}
	return lost
}

func countTrue(values []bool) int {
	n := 0
	for _, v := range values {
		if v {
			n++
		}
	}
	return n
}

func TestBernoulliLossCountIsBinomial(t *testing.T) {
	const packets = 100_000
	for _, probability := range []float64{0.001, 0.01, 0.1} {
		config := LossConfig{Model: LossBernoulli, Probability: probability}
		mean := packets * probability
		// The 99% interval of a binomial count, by the normal approximation: ±2.576 σ.
		halfWidth := 2.576 * math.Sqrt(packets*probability*(1-probability))
		for seed := range uint64(3) {
			lost := countTrue(lossPattern(config, seed, packets))
			if math.Abs(float64(lost)-mean) > halfWidth {
				t.Errorf("p=%g seed %d: lost %d of %d, outside the 99%% interval %.0f ± %.0f",
					probability, seed, lost, packets, mean, halfWidth)
			}
		}
	}
}

func TestLossIsReproducibleBySeed(t *testing.T) {
	for _, config := range []LossConfig{
		{Model: LossBernoulli, Probability: 0.05},
		{Model: LossGilbertElliott, GoodToBad: 0.02, BadToGood: 0.3, LossInBad: 0.6},
	} {
		t.Run(config.Model.String(), func(t *testing.T) {
			first := lossPattern(config, 42, 10_000)
			if countTrue(first) == 0 {
				t.Fatal("nothing was lost")
			}
			if again := lossPattern(config, 42, 10_000); !slices.Equal(first, again) {
				t.Error("the same seed lost different packets")
			}
			if other := lossPattern(config, 43, 10_000); slices.Equal(first, other) {
				t.Error("another seed lost the same packets")
			}
		})
	}
}

func TestGilbertElliottMatchesItsStationaryRate(t *testing.T) {
	const packets = 400_000
	tests := []struct {
		name   string
		config LossConfig
	}{
		{"bursty, lossless good state", LossConfig{Model: LossGilbertElliott, GoodToBad: 0.01, BadToGood: 0.3, LossInBad: 0.5}},
		{"lossy good state", LossConfig{Model: LossGilbertElliott, GoodToBad: 0.05, BadToGood: 0.5, LossInBad: 0.8, LossInGood: 0.01}},
		{"Gilbert (bad loses all)", LossConfig{Model: LossGilbertElliott, GoodToBad: 0.002, BadToGood: 0.5, LossInBad: 1}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			c := test.config
			stationary := (c.BadToGood*c.LossInGood + c.GoodToBad*c.LossInBad) / (c.GoodToBad + c.BadToGood)
			if got := c.AverageLossRate(); math.Abs(got-stationary) > 1e-12 {
				t.Fatalf("AverageLossRate = %g, want %g", got, stationary)
			}
			lost := lossPattern(c, 1, packets)
			rate := float64(countTrue(lost)) / packets
			// Losses are correlated, so allow 10% of the mean: several standard deviations
			// of the count for these parameters.
			if math.Abs(rate-stationary) > 0.1*stationary {
				t.Errorf("lost %.4f%% of packets, want %.4f%% ± 10%%", 100*rate, 100*stationary)
			}
			// The point of the model: a loss makes the next one likelier than average.
			var lossAfterLoss, afterLoss int
			for i := 1; i < len(lost); i++ {
				if lost[i-1] {
					afterLoss++
					if lost[i] {
						lossAfterLoss++
					}
				}
			}
			if conditional := float64(lossAfterLoss) / float64(afterLoss); conditional < 3*stationary {
				t.Errorf("P(loss | previous lost) = %.3f, not clearly above the average %.3f: losses are not bursty", conditional, stationary)
			}
		})
	}
}

func TestLossConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		config  LossConfig
		wantErr bool
	}{
		{"none", LossConfig{}, false},
		{"bernoulli 1%", LossConfig{Model: LossBernoulli, Probability: 0.01}, false},
		{"bernoulli 0", LossConfig{Model: LossBernoulli}, false},
		{"bernoulli 1 loses everything", LossConfig{Model: LossBernoulli, Probability: 1}, true},
		{"bernoulli negative", LossConfig{Model: LossBernoulli, Probability: -0.1}, true},
		{"bernoulli NaN", LossConfig{Model: LossBernoulli, Probability: math.NaN()}, true},
		{"gilbert-elliott", LossConfig{Model: LossGilbertElliott, GoodToBad: 0.01, BadToGood: 0.3, LossInBad: 1}, false},
		{"gilbert-elliott above 1", LossConfig{Model: LossGilbertElliott, GoodToBad: 1.5, BadToGood: 0.3}, true},
		{"gilbert-elliott stuck in a lossy bad state", LossConfig{Model: LossGilbertElliott, GoodToBad: 0.1, LossInBad: 1}, true},
		{"unknown model", LossConfig{Model: LossModel(9)}, true},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if err := test.config.Validate(); (err != nil) != test.wantErr {
				t.Errorf("Validate() = %v, want error: %v", err, test.wantErr)
			}
		})
	}
}
