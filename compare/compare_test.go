package compare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func sample(values []float64) *Sample {
	return &Sample{Source: "test", Kind: KindLab, Metric: "fct_user", Unit: "ms", Values: values}
}

// TestFalsePositiveRate compares many pairs of samples drawn from the same skewed
// distribution and counts how often the comparison calls a difference: at
// alpha 0.05 it should be about 5% or less (the verdict also asks the bootstrap
// interval to exclude 0, which makes it more conservative than the test alone).
func TestFalsePositiveRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	draw := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			// A load time: a floor of round trips plus a lognormal tail, rounded to
			// 0.1 ms so that ties occur as in real measurements.
			xs[i] = math.Round((450+80*math.Exp(0.8*rng.NormFloat64()))*10) / 10
		}
		return xs
	}
	const pairs = 400
	var testRejects, verdictRejects int
	for i := range pairs {
		r := Compare(sample(draw(15)), sample(draw(15)), Options{Resamples: 2000, Seed: uint64(i + 1)})
		if r.Test.P < 0.05 {
			testRejects++
		}
		if r.Significant {
			verdictRejects++
		}
		if r.Verdict == VerdictImprovement || r.Verdict == VerdictRegression {
			if !r.Significant {
				t.Fatalf("verdict %s without significance", r.Verdict)
			}
		}
	}
	testRate, verdictRate := float64(testRejects)/pairs, float64(verdictRejects)/pairs
	t.Logf("same distribution, %d pairs of 15: Mann-Whitney p < 0.05 in %.1f%%, verdict 'real difference' in %.1f%%",
		pairs, 100*testRate, 100*verdictRate)
	if testRate > 0.10 || verdictRate > 0.10 {
		t.Errorf("false-positive rate too high: test %.3f, verdict %.3f (want about 0.05)", testRate, verdictRate)
	}
	if testRate < 0.01 {
		t.Errorf("the test never rejects (%.3f): it would miss real differences too", testRate)
	}
}

// TestPower: a real drop of 100 ms on a 500 ms median is found almost always.
func TestPower(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	draw := func(n int, base float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = base + 40*math.Exp(0.8*rng.NormFloat64())
		}
		return xs
	}
	found := 0
	const pairs = 100
	for i := range pairs {
		r := Compare(sample(draw(12, 500)), sample(draw(12, 400)), Options{Resamples: 2000, Seed: uint64(i + 1)})
		if r.Verdict == VerdictImprovement {
			found++
		}
	}
	t.Logf("a 100 ms drop with 12 values each: found in %d of %d", found, pairs)
	if found < 90 {
		t.Errorf("found %d of %d", found, pairs)
	}
}

func TestSentence(t *testing.T) {
	before := sample([]float64{520, 530, 515, 540, 525, 535, 510, 545, 528, 522})
	after := sample([]float64{310, 320, 305, 330, 315, 325, 300, 335, 318, 312})
	r := Compare(before, after, Options{})
	if r.Verdict != VerdictImprovement || !strings.HasPrefix(r.Sentence, "AFTER is faster by 210 ms") ||
		!strings.Contains(r.Sentence, "p < 0.001") || !strings.Contains(r.Sentence, "a real improvement") {
		t.Errorf("verdict %s: %q", r.Verdict, r.Sentence)
	}
	r = Compare(after, before, Options{})
	if r.Verdict != VerdictRegression || !strings.Contains(r.Sentence, "slower by 210 ms") {
		t.Errorf("verdict %s: %q", r.Verdict, r.Sentence)
	}
	r = Compare(before, sample(append([]float64{}, before.Values...)), Options{})
	if r.Verdict != VerdictNoDifference || !strings.HasPrefix(r.Sentence, "No significant difference") {
		t.Errorf("verdict %s: %q", r.Verdict, r.Sentence)
	}
	r = Compare(before, sample(nil), Options{})
	if r.Verdict != VerdictEmpty {
		t.Errorf("empty: %s", r.Verdict)
	}
	rounds := &Sample{Metric: "rounds", Unit: "round trips", Values: []float64{7, 7, 7, 8, 7, 7, 8, 7}}
	fewer := &Sample{Metric: "rounds", Unit: "round trips", Values: []float64{5, 5, 5, 5, 6, 5, 5, 5}}
	r = Compare(rounds, fewer, Options{})
	if r.Verdict != VerdictDifferent || !strings.Contains(r.Sentence, "lower by 2 round trips") {
		t.Errorf("verdict %s: %q", r.Verdict, r.Sentence)
	}
}

// TestDropsInTheVerdict: lab samples carry their drops into the comparison, and a
// difference that comes with one sample's drops says so.
func TestDropsInTheVerdict(t *testing.T) {
	rows := func(iw int, fct func(i int) float64, queueDrops func(i int) int) []byte {
		var b strings.Builder
		for i := 1; i <= 10; i++ {
			fmt.Fprintf(&b, `{"point":"rtt70-rate1.2mbit-iw%d-size42000","iw":%d,"trial":%d,"fct_user_ms":%g,"data_packets_lost":%d,"data_packets_dropped_queue":%d,"data_packets_dropped_loss":0}`+"\n",
				iw, iw, i, fct(i), queueDrops(i), queueDrops(i))
		}
		return []byte(b.String())
	}
	before, err := Parse(rows(3, func(i int) float64 { return 700 + float64(i) }, func(int) int { return 0 }), "iw3.jsonl", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Parse(rows(10, func(i int) float64 { return 1500 + 10*float64(i) }, func(i int) int { return 2 + i%3 }), "iw10.jsonl", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.Drops == nil || after.Drops.Queue != 30 || after.Drops.TrialsWithDrops != 10 || before.Drops.Total() != 0 {
		t.Fatalf("drops read: before %+v, after %+v", before.Drops, after.Drops)
	}
	res := Compare(before, after, Options{})
	if res.Verdict != VerdictRegression {
		t.Fatalf("verdict %s", res.Verdict)
	}
	for _, want := range []string{"AFTER lost data packets in 10 of 10 trials (3.0 per trial; 30 by the full bottleneck queue)",
		"AFTER lost clearly more than BEFORE: the difference comes with those drops", "--queue"} {
		if !strings.Contains(res.Sentence, want) {
			t.Errorf("the sentence lacks %q: %s", want, res.Sentence)
		}
	}
	if res.AfterDrops == nil || res.BeforeDrops == nil {
		t.Errorf("the result does not carry the drops")
	}
	// Without drops, nothing is said of them.
	quiet := Compare(before, before, Options{})
	if strings.Contains(quiet.Sentence, "Drops") || quiet.AfterDrops.Total() != 0 {
		t.Errorf("drops mentioned without any: %s", quiet.Sentence)
	}
}
