// Package reproduce re-runs, in the lab, the experiments of "An Argument for Increasing
// TCP's Initial Congestion Window" (Dukkipati et al., CCR 2010) and of the Stanford CS244
// Mininet reproduction (2012): the IW sweep, the improvement by response size (the
// paper's Fig. 7), RTT, bandwidth and BDP sweeps, and IW 3/10/32 under random loss. It
// writes a CSV per experiment, plots (SVG and PNG) with the model's prediction beside
// the measurements, and a report (Markdown and HTML) that sets the published numbers
// beside the lab's and explains each difference.
//
// It drives the lab through lab.Env.RunJobs and the model through model.Simulate; it
// neither emulates links nor analyzes captures itself.
package reproduce

import (
	"fmt"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/model"
)

// Experiment names, also the stem of each experiment's files.
const (
	ExpIWSweep   = "iw_sweep"
	ExpBuckets   = "size_buckets"
	ExpRTT       = "rtt_sweep"
	ExpBandwidth = "bandwidth_sweep"
	ExpBDP       = "bdp_sweep"
	ExpLoss      = "loss"
	ExpTCPvsQUIC = "tcp_vs_quic"
)

// Experiment is one set of lab points with its trials.
type Experiment struct {
	Name   string
	Title  string
	Specs  []lab.Spec
	Trials int
}

const (
	ms   = int64(1e6)
	mbit = int64(1e6)
	kbit = int64(1e3)
)

// BodyForSegments returns the body size whose response (the lab server's headers and
// body) fills exactly segments full segments.
func BodyForSegments(segments int) int64 {
	total := int64(segments) * model.DefaultMSS
	return total - model.LabHeaderBytes(total)
}

// Experiments lists the experiments; quick trims points and trials so that the whole
// set runs in under two minutes.
func Experiments(quick bool) []Experiment {
	trials, lossTrials := 20, 40
	if quick {
		trials, lossTrials = 3, 6
	}
	base := func(rttMs int64, rateBps int64, iw, segments int) lab.Spec {
		return lab.Spec{RTTNs: rttMs * ms, RateBitsPerSecond: rateBps, QueuePackets: QueuePackets, IW: iw, SizeBytes: BodyForSegments(segments), Seed: 1}
	}
	var out []Experiment

	// 1. IW sweep: RTT 140 ms, 27 and 29 segments, 1.2 Mbit/s (CS244's link).
	iws := []int{3, 6, 10, 16, 26, 42}
	var sweep []lab.Spec
	for _, segs := range []int{27, 29} {
		for _, iw := range iws {
			sweep = append(sweep, base(140, 1_200*kbit, iw, segs))
		}
	}
	out = append(out, Experiment{Name: ExpIWSweep, Title: "Initial window sweep (RTT 140 ms, 1.2 Mbit/s, 27 and 29 segments)", Specs: sweep, Trials: trials})

	// 2. Fig. 7: response size buckets at 70 ms and 1.2 Mbit/s, IW 3 and 10.
	var buckets []lab.Spec
	for _, segs := range BucketSegments {
		for _, iw := range []int{3, 10} {
			buckets = append(buckets, base(70, 1_200*kbit, iw, segs))
		}
	}
	out = append(out, Experiment{Name: ExpBuckets, Title: "Improvement by response size (RTT 70 ms, 1.2 Mbit/s; the paper's Fig. 7)", Specs: buckets, Trials: trials})

	// 3. RTT sweep at 1.2 Mbit/s, 29 segments.
	rtts := []int64{20, 50, 100, 200, 500, 1000, 3000}
	if quick {
		rtts = []int64{20, 50, 100, 200, 500}
	}
	var rttSpecs []lab.Spec
	for _, r := range rtts {
		for _, iw := range []int{3, 10} {
			rttSpecs = append(rttSpecs, base(r, 1_200*kbit, iw, 29))
		}
	}
	out = append(out, Experiment{Name: ExpRTT, Title: "RTT sweep (1.2 Mbit/s, 29 segments)", Specs: rttSpecs, Trials: trials})

	// 4. Bandwidth sweep at RTT 70 ms, 29 segments.
	rates := []int64{56, 256, 512, 1000, 2000, 3000, 5000, 10000}
	if quick {
		rates = []int64{256, 1000, 3000, 10000}
	}
	var rateSpecs []lab.Spec
	for _, r := range rates {
		for _, iw := range []int{3, 10} {
			rateSpecs = append(rateSpecs, base(70, r*kbit, iw, 29))
		}
	}
	out = append(out, Experiment{Name: ExpBandwidth, Title: "Bandwidth sweep (RTT 70 ms, 29 segments)", Specs: rateSpecs, Trials: trials})

	// 5. BDP sweep: RTT × rate from about one segment to a few hundred, 29 segments.
	var bdpSpecs []lab.Spec
	bdpRTTs, bdpRates := []int64{20, 70, 200}, []int64{1_200, 5_000, 20_000}
	if quick {
		bdpRTTs, bdpRates = []int64{20, 200}, []int64{1_200, 20_000}
	}
	for _, r := range bdpRTTs {
		for _, c := range bdpRates {
			for _, iw := range []int{3, 10} {
				bdpSpecs = append(bdpSpecs, base(r, c*kbit, iw, 29))
			}
		}
	}
	out = append(out, Experiment{Name: ExpBDP, Title: "Bandwidth-delay product sweep (29 segments)", Specs: bdpSpecs, Trials: trials})

	// 6. Loss: IW 3, 10, 32 under 0-5% random loss, RTT 70 ms, 5 Mbit/s, 70 segments.
	losses := []float64{0, 0.01, 0.02, 0.03, 0.05}
	if quick {
		losses = []float64{0, 0.02, 0.05}
	}
	var lossSpecs []lab.Spec
	for _, l := range losses {
		for _, iw := range []int{3, 10, 32} {
			s := base(70, 5*mbit, iw, 70)
			s.LossRate = l
			lossSpecs = append(lossSpecs, s)
		}
	}
	out = append(out, Experiment{Name: ExpLoss, Title: "Random loss (RTT 70 ms, 5 Mbit/s, 70 segments): IW 3, 10 and 32", Specs: lossSpecs, Trials: lossTrials})

	// 7. TCP and QUIC: the same page on the same path, HTTP/2 over TLS 1.3 (Linux,
	// IW 10) against HTTP/3 (quic-go), a chain that fits in QUIC's amplification
	// budget and one that does not.
	quicRTTs, quicSizes := []int64{70, 150}, []int64{14_000, 50_000, 160_000}
	quicTrials := 10
	if quick {
		quicRTTs, quicSizes, quicTrials = []int64{70}, []int64{14_000, 160_000}, 3
	}
	var quicSpecs []lab.Spec
	for _, r := range quicRTTs {
		for _, size := range quicSizes {
			for _, chain := range QUICChains {
				s := lab.Spec{RTTNs: r * ms, RateBitsPerSecond: 10 * mbit, QueuePackets: QueuePackets, IW: 10, SizeBytes: size,
					TLS: "1.3", HTTP2: true, ChainBytes: chain, Seed: 1}
				if err := s.Normalize(); err != nil {
					panic(err)
				}
				twin, err := s.HTTP3Twin()
				if err != nil {
					panic(err)
				}
				quicSpecs = append(quicSpecs, s, twin)
			}
		}
	}
	out = append(out, Experiment{Name: ExpTCPvsQUIC, Title: "TCP and QUIC: the same page on the same path (10 Mbit/s), HTTP/2 over TLS 1.3 against HTTP/3", Specs: quicSpecs, Trials: quicTrials})
	return out
}

// QUICChains are the certificate chains of the TCP and QUIC experiment: one whose
// server flight fits in three times the client's 1,280-byte Initial, one that does not.
var QUICChains = []int{1500, 6000}

// QueuePackets is the bottleneck's drop-tail queue in every experiment: CS244's netem
// limit, deep enough that no window of these experiments overflows it, so that
// only the loss experiment loses packets (at random).
const QueuePackets = 1000

// BucketSegments are the response sizes standing for the paper's Fig. 7 buckets
// (≤3, 4, 7, 10, 15, 30, 50, >50 segments); ">50" is played by 100 segments.
var BucketSegments = []int{3, 4, 7, 10, 15, 30, 50, 100}

// BucketLabels name the buckets as the paper does.
var BucketLabels = []string{"≤3", "4", "7", "10", "15", "30", "50", ">50"}

// ModelParams maps a lab point to the model's parameters, with the lab's latencies.
func ModelParams(s lab.Spec) model.Params {
	return model.Params{
		RTTNs: s.RTTNs, RateBitsPerSecond: s.RateBitsPerSecond, IW: s.IW,
		SizeBytes:   s.SizeBytes + model.LabHeaderBytes(s.SizeBytes),
		TLS:         s.TLS,
		ChainBytes:  s.ChainBytes,
		HostDelayNs: model.LabHostDelayNs, ServerDelayNs: model.LabServerDelayNs,
	}
}

// Jobs expands the experiments into lab jobs, longest first (by the model's
// prediction) so that long trials do not trail at the end.
func Jobs(exps []Experiment) []lab.Job {
	var jobs []lab.Job
	for _, e := range exps {
		for _, s := range e.Specs {
			for t := 1; t <= e.Trials; t++ {
				jobs = append(jobs, lab.Job{Spec: s, Trial: t, RoundTrips: e.Name == ExpTCPvsQUIC})
			}
		}
	}
	cost := map[string]float64{}
	for _, j := range jobs {
		if _, ok := cost[j.Spec.Label()]; !ok {
			r, err := model.Simulate(ModelParams(j.Spec))
			if err == nil {
				cost[j.Spec.Label()] = r.FCTUserMs
			}
		}
	}
	sortStable(jobs, func(a, b lab.Job) bool { return cost[a.Spec.Label()] > cost[b.Spec.Label()] })
	return jobs
}

func describeRate(bps int64) string {
	if bps >= mbit {
		return fmt.Sprintf("%g Mbit/s", float64(bps)/1e6)
	}
	return fmt.Sprintf("%d kbit/s", bps/1000)
}
