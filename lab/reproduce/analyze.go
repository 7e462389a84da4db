package reproduce

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/units"
)

// Section is one experiment in the report.
type Section struct {
	Name     string
	Title    string
	Setup    string
	Header   []string
	Rows     [][]string
	Figures  []string // file stems of the figures (NAME.svg, NAME.png)
	Findings []string // paragraphs: what matches the published numbers, what does not and why
	// Headline is the experiment's result in one sentence, with its number
	// (empty when the run gave none): what lab reproduce prints.
	Headline string
}

// Published numbers (references: Dukkipati et al. 2010; Stanford CS244 2012).
var (
	paperIWSweepMs = map[int]float64{3: 490, 6: 474.5, 10: 467.3, 16: 465.8, 26: 466.7, 42: 468.2}
	cs244IWSweepMs = map[int]float64{3: 808, 6: 681, 10: 665, 16: 641, 26: 641, 42: 642}
	// Fig. 7 (read off the plot, ±5%), per bucket of BucketLabels.
	paperBucketMs  = []float64{8, 45, 69, 79, 87, 109, 200, 15}
	paperBucketPct = []float64{2.6, 8.9, 11.8, 12.9, 11.0, 12.8, 15.6, 0.7}
	cs244RTT       = map[int64][2]float64{20: {0, 0}, 50: {29, 7}, 100: {88, 16}, 200: {204, 22}, 500: {507, 24}, 1000: {1016, 24}, 3000: {3011, 24}}
	cs244Bandwidth = map[int64][2]float64{56: {8, 0}, 256: {3, 0}, 512: {20, 2}, 1000: {45, 9}, 2000: {72, 20}, 3000: {80, 24}, 5000: {77, 25}, 10000: {70, 23}}
)

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f0(x float64) string { return fmt.Sprintf("%.0f", x) }

func ciText(median, ci float64) string { return fmt.Sprintf("%.1f ± %.1f", median, ci) }

func orDash(ok bool, s string) string {
	if !ok {
		return "–"
	}
	return s
}

// pairs finds, for every point with IW 3, the point with IW 10 and otherwise the same
// parameters.
func pairs(e Experiment, points map[string]Point) []Improvement {
	var out []Improvement
	for _, s := range e.Specs {
		if s.IW != 3 {
			continue
		}
		t := s
		t.IW = 10
		exp, ok := points[t.Label()]
		if !ok {
			continue
		}
		out = append(out, improvement(points[s.Label()], exp))
	}
	return out
}

func analyze(e Experiment, points map[string]Point) (Section, []figure) {
	sec := Section{Name: e.Name, Title: e.Title}
	switch e.Name {
	case ExpIWSweep:
		return analyzeIWSweep(e, points, sec)
	case ExpBuckets:
		return analyzeBuckets(e, points, sec)
	case ExpRTT:
		return analyzeRTT(e, points, sec)
	case ExpBandwidth:
		return analyzeBandwidth(e, points, sec)
	case ExpBDP:
		return analyzeBDP(e, points, sec)
	case ExpLoss:
		return analyzeLoss(e, points, sec)
	case ExpTCPvsQUIC:
		return analyzeTCPvsQUIC(e, points, sec), nil
	}
	return sec, nil
}

func segmentsOf(s lab.Spec) int {
	return int(math.Round(float64(s.SizeBytes+int64(len(fmt.Sprint(s.SizeBytes)))+139) / 1448))
}

func analyzeIWSweep(e Experiment, points map[string]Point, sec Section) (Section, []figure) {
	sec.Setup = fmt.Sprintf("RTT 140 ms, 1.2 Mbit/s each way, drop-tail queue of 1000 packets (CS244's netem limit), responses of 27 and 29 full segments, %d trials per point. CS244 timed `wget` (connect to last byte: our user-felt FCT) for 27 segments; the paper's numbers are production averages (first byte to last ACK) over many paths, not a lab point.", e.Trials)
	sec.Header = []string{"IW", "segments", "FCT paper, ms (median ± 95% CI)", "model", "FCT user, ms", "model", "HTTP rounds (model)", "paper (prod. avg)", "CS244 (27 seg, wget)"}
	figUser := figure{Name: "iw_sweep_user", Title: "IW sweep, user-felt FCT (connect to last byte): RTT 140 ms, 1.2 Mbit/s", XLabel: "initial window (segments, log scale)", YLabel: "flow completion time (ms)", LogX: true}
	figPaper := figure{Name: "iw_sweep_paper", Title: "IW sweep, paper's FCT (first to last response byte): RTT 140 ms, 1.2 Mbit/s", XLabel: "initial window (segments, log scale)", YLabel: "flow completion time (ms)", LogX: true}
	byIW := map[int]map[int]Point{}
	for _, s := range e.Specs {
		segs := segmentsOf(s)
		if byIW[segs] == nil {
			byIW[segs] = map[int]Point{}
		}
		byIW[segs][s.IW] = points[s.Label()]
	}
	segList := sortedKeys(byIW)
	for _, segs := range segList {
		var labUser, labPaper, modUser, modPaper series
		name := fmt.Sprintf("%d segments", segs)
		labUser, labPaper = series{Name: name, Kind: kindLab}, series{Name: name, Kind: kindLab}
		modUser, modPaper = series{Name: name, Kind: kindModel}, series{Name: name, Kind: kindModel}
		for _, iw := range sortedKeys(byIW[segs]) {
			p := byIW[segs][iw]
			paper, okP := paperIWSweepMs[iw]
			cs, okC := cs244IWSweepMs[iw]
			sec.Rows = append(sec.Rows, []string{fmt.Sprint(iw), fmt.Sprint(segs), ciText(p.Paper.Median, p.PaperCI), f1(p.Model.FCTPaperMs),
				ciText(p.User.Median, p.UserCI), f1(p.Model.FCTUserMs), fmt.Sprint(p.Model.RoundTrips.HTTP), orDash(okP, f1(paper)), orDash(okC && segs == 27, f0(cs))})
			labUser.Points = append(labUser.Points, xyPoint{float64(iw), p.User.Median, p.UserCI})
			labPaper.Points = append(labPaper.Points, xyPoint{float64(iw), p.Paper.Median, p.PaperCI})
			modUser.Points = append(modUser.Points, xyPoint{X: float64(iw), Y: p.Model.FCTUserMs})
			modPaper.Points = append(modPaper.Points, xyPoint{X: float64(iw), Y: p.Model.FCTPaperMs})
		}
		figUser.Series = append(figUser.Series, labUser, modUser)
		figPaper.Series = append(figPaper.Series, labPaper, modPaper)
	}
	var cs series
	cs.Name, cs.Kind = "CS244 (27 seg, wget)", kindPublished
	var pp series
	pp.Name, pp.Kind = "paper (production average)", kindPublished
	for _, iw := range []int{3, 6, 10, 16, 26, 42} {
		cs.Points = append(cs.Points, xyPoint{X: float64(iw), Y: cs244IWSweepMs[iw]})
		pp.Points = append(pp.Points, xyPoint{X: float64(iw), Y: paperIWSweepMs[iw]})
	}
	figUser.Series = append(figUser.Series, cs)
	figPaper.Series = append(figPaper.Series, pp)
	sec.Figures = []string{figUser.Name, figPaper.Name}

	p27 := byIW[27]
	if a, b := p27[3], p27[10]; a.User.N > 0 && b.User.N > 0 {
		sec.Headline = fmt.Sprintf("IW 3 → 10 saves %.0f ms of the user's wait for 27 segments over 140 ms and 1.2 Mbit/s (%.0f → %.0f ms; CS244: 808 → 665 ms)",
			a.User.Median-b.User.Median, a.User.Median, b.User.Median)
		sec.Findings = append(sec.Findings, fmt.Sprintf("IW 3 → 10 saves %.0f ms user-felt for 27 segments here (CS244: %.0f ms, 808 → 665). Both show the same staircase: the saving comes in whole round trips (%d → %d HTTP rounds in the model), and beyond IW 16 nothing changes because 27 segments at 1.2 Mbit/s take %.0f ms to serialize, longer than the round trips slow start still needs: the link, not the window, is the limit.",
			a.User.Median-b.User.Median, 808.0-665.0, a.Model.RoundTrips.HTTP, b.Model.RoundTrips.HTTP, a.Model.SerializationMs))
		plateau := p27[42]
		sec.Findings = append(sec.Findings, fmt.Sprintf("Absolute times: close to CS244's at IW 3 (%.0f against 808 ms), lower at the plateau (%.0f against 641 ms). `time wget` adds process start-up and name resolution to every run, and CS244's plateau sits about one RTT above ours, consistent with one more round trip in their transfers (see the RTT sweep). The paper's 490 → 467 ms are production averages over paths where most responses are small, hence a much flatter curve (−4.6%%) than any single lab point.", a.User.Median, plateau.User.Median))
	}
	return sec, []figure{figUser, figPaper}
}

func analyzeBuckets(e Experiment, points map[string]Point, sec Section) (Section, []figure) {
	sec.Setup = fmt.Sprintf("RTT 70 ms, 1.2 Mbit/s each way (the paper's AvgDC medians), drop-tail queue of 1000 packets, IW 3 against IW 10, responses of 3, 4, 7, 10, 15, 30, 50 and 100 full segments standing for the paper's buckets, %d trials per point. Improvement = (base − exp) / base on the paper's latency (first response byte to the last byte at the client).", e.Trials)
	sec.Header = []string{"bucket (segments)", "IW 3 FCT, ms", "IW 10 FCT, ms", "improvement, ms", "%", "model ms", "model %", "user-felt ms", "user-felt %", "paper ms", "paper %"}
	fms := figure{Name: "size_buckets_ms", Title: "IW 3 → 10 by response size: RTT 70 ms, 1.2 Mbit/s", XLabel: "response size (segments, log scale)", YLabel: "improvement (ms)", LogX: true}
	fpct := figure{Name: "size_buckets_pct", Title: "IW 3 → 10 by response size: RTT 70 ms, 1.2 Mbit/s", XLabel: "response size (segments, log scale)", YLabel: "improvement (%)", LogX: true}
	labMs, modMs, pubMs := series{Name: "first byte to last byte", Kind: kindLab}, series{Name: "first byte to last byte", Kind: kindModel}, series{Name: "paper, Fig. 7", Kind: kindPublished}
	userMs := series{Name: "user-felt", Kind: kindLab}
	labPct, modPct, pubPct := series{Name: "first byte to last byte", Kind: kindLab}, series{Name: "first byte to last byte", Kind: kindModel}, series{Name: "paper, Fig. 7", Kind: kindPublished}
	ims := pairs(e, points)
	sort.Slice(ims, func(i, j int) bool { return ims[i].Base.Spec.SizeBytes < ims[j].Base.Spec.SizeBytes })
	for i, im := range ims {
		x := float64(BucketSegments[i])
		sec.Rows = append(sec.Rows, []string{BucketLabels[i], ciText(im.Base.Paper.Median, im.Base.PaperCI), ciText(im.Exp.Paper.Median, im.Exp.PaperCI),
			ciText(im.AbsMs, im.AbsCIMs), f1(im.Percent), f1(im.ModelAbsMs), f1(im.ModelPercent), f1(im.UserAbsMs), f1(im.UserPercent), f0(paperBucketMs[i]), f1(paperBucketPct[i])})
		labMs.Points = append(labMs.Points, xyPoint{x, im.AbsMs, im.AbsCIMs})
		userMs.Points = append(userMs.Points, xyPoint{x, im.UserAbsMs, math.Hypot(im.Base.UserCI, im.Exp.UserCI)})
		modMs.Points = append(modMs.Points, xyPoint{X: x, Y: im.ModelAbsMs})
		pubMs.Points = append(pubMs.Points, xyPoint{X: x, Y: paperBucketMs[i]})
		labPct.Points = append(labPct.Points, xyPoint{X: x, Y: im.Percent})
		modPct.Points = append(modPct.Points, xyPoint{X: x, Y: im.ModelPercent})
		pubPct.Points = append(pubPct.Points, xyPoint{X: x, Y: paperBucketPct[i]})
	}
	fms.Series = []series{labMs, modMs, userMs, pubMs}
	fpct.Series = []series{labPct, modPct, pubPct}
	sec.Figures = []string{fms.Name, fpct.Name}
	if len(ims) == len(BucketSegments) {
		small, mid, big := ims[0], ims[3], ims[len(ims)-1]
		sec.Headline = fmt.Sprintf("IW 3 → 10 shortens a 10-segment response by %.0f ms (%.1f%%) over 70 ms and 1.2 Mbit/s, and a 3-segment one by %.0f ms (paper's Fig. 7: 79 ms, 12.9%%)",
			mid.AbsMs, mid.Percent, small.AbsMs)
		sec.Findings = append(sec.Findings,
			fmt.Sprintf("Shape: no gain at ≤3 segments (%.1f ms, %.1f%%: both windows carry the response in the first round), then gains growing with the size through 10 segments (4 segments: %.0f ms, 10 segments: %.0f ms) as in the paper's Fig. 7 (8, 45 and 79 ms). In percent the gain rises from nothing, peaks and falls for the largest responses, as in the paper (2.6, 12.9, 0.7%%), but higher and earlier (lab: %.1f%% at 4 segments, %.1f%% at 10, %.1f%% at >50) because a single slow path makes every round trip a large share of a short transfer.", small.AbsMs, small.Percent, ims[1].AbsMs, mid.AbsMs, ims[1].Percent, mid.Percent, big.Percent),
			fmt.Sprintf("Size of the gains: at 1.2 Mbit/s and 70 ms the path holds only %.1f segments (BDP), so IW 10 fills the link from the first round and IW 3 loses at most the one or two round trips its slow start needs to reach the BDP: the lab's gain levels off at about %.0f ms from 15 segments on, where the paper's grows to 200 ms at 50 segments. The paper's buckets mix RTTs and bandwidths (the median is 70 ms / 1.2 Mbit/s, the mean is pulled up by long, fast paths where IW 10 saves more rounds), which CS244 already pointed out.", 0.070*1.2e6/8/1500, big.AbsMs),
			fmt.Sprintf("The >50 bucket: the paper measured 0.7%% because its large responses were dominated by bandwidth and by connections already past slow start; a 100-segment response in the lab still gains %.0f ms (%.1f%%), which is the round trip IW 3 needs to fill this small pipe.", big.AbsMs, big.Percent),
			"Definitions: the paper measures at the server from the first response byte to the last ACK; the lab's client measures first to last byte, the same span shifted by half an RTT at both ends. The user-felt gain (connect to last byte) is the same in milliseconds, since the handshake and request cost the same with both windows, and smaller in percent.")
	}
	return sec, []figure{fms, fpct}
}

func analyzeRTT(e Experiment, points map[string]Point, sec Section) (Section, []figure) {
	sec.Setup = fmt.Sprintf("1.2 Mbit/s each way, 29 segments, IW 3 against IW 10, RTT from 20 ms to 3 s, drop-tail queue of 1000 packets, %d trials per point. CS244 computed percent as base/exp − 1 on `time wget`; we give theirs beside both of our definitions.", e.Trials)
	sec.Header = []string{"RTT, ms", "IW 3 user FCT, ms", "IW 10 user FCT, ms", "saving, ms", "base/exp−1 %", "(base−exp)/base %", "model saving, ms", "CS244 saving, ms", "CS244 %"}
	f := figure{Name: "rtt_sweep", Title: "IW 3 → 10 saving against RTT: 1.2 Mbit/s, 29 segments", XLabel: "round-trip time (ms, log scale)", YLabel: "saving (ms, log scale)", LogX: true, LogY: true}
	labS, modS, pubS := series{Name: "user-felt", Kind: kindLab}, series{Name: "user-felt", Kind: kindModel}, series{Name: "CS244", Kind: kindPublished}
	for _, im := range pairs(e, points) {
		rtt := im.Base.Spec.RTTNs / 1e6
		saving := im.UserAbsMs
		ci := math.Hypot(im.Base.UserCI, im.Exp.UserCI)
		cs, ok := cs244RTT[rtt]
		sec.Rows = append(sec.Rows, []string{fmt.Sprint(rtt), ciText(im.Base.User.Median, im.Base.UserCI), ciText(im.Exp.User.Median, im.Exp.UserCI), ciText(saving, ci),
			f1((im.Base.User.Median/im.Exp.User.Median - 1) * 100), f1(im.UserPercent), f1(im.Base.Model.FCTUserMs - im.Exp.Model.FCTUserMs), orDash(ok, f0(cs[0])), orDash(ok, f0(cs[1]))})
		labS.Points = append(labS.Points, xyPoint{float64(rtt), saving, ci})
		modS.Points = append(modS.Points, xyPoint{X: float64(rtt), Y: im.Base.Model.FCTUserMs - im.Exp.Model.FCTUserMs})
		if ok && cs[0] > 0 {
			pubS.Points = append(pubS.Points, xyPoint{X: float64(rtt), Y: cs[0]})
		}
	}
	f.Series = []series{labS, modS, pubS}
	sec.Figures = []string{f.Name}
	if ims := pairs(e, points); len(ims) > 0 {
		last := ims[len(ims)-1]
		rtt := float64(last.Base.Spec.RTTNs) / 1e6
		sec.Headline = fmt.Sprintf("the saving of IW 3 → 10 grows with the RTT: %.0f ms at %.0f ms (%.1f round trips; CS244: about one at every RTT)",
			last.UserAbsMs, rtt, last.UserAbsMs/rtt)
		sec.Findings = append(sec.Findings,
			"With the bandwidth fixed, the saving grows with the RTT: at 20 ms the 29 segments take longer to serialize (about 290 ms) than the round trips IW 3 adds, so nothing is saved (CS244: 0 ms); from there on the saving grows with the RTT, as CS244 found.",
			fmt.Sprintf("Where we differ: at %.0f ms the lab saves %.0f ms, %.1f round trips (IW 3: %d HTTP rounds, IW 10: %d in the model), which is what Equation 1 predicts for 29 segments once the path is window-limited; CS244 saved about one round trip at every RTT (507 ms at 500 ms). Our captures show IW 10 sending 10 then 19-20 segments; a client receive window of about 10 segments (the default of the 2012 kernels before the initrwnd change), route metrics cached between their three runs (tcp_no_metrics_save was not set), or their response of 29×1448 bytes plus headers (30 segments) would each cost IW 10 a round, but we cannot check their captures. The model agrees with the lab at every RTT (dashed line).", rtt, last.UserAbsMs, last.UserAbsMs/rtt, last.Base.Model.RoundTrips.HTTP, last.Exp.Model.RoundTrips.HTTP))
	}
	return sec, []figure{f}
}

func analyzeBandwidth(e Experiment, points map[string]Point, sec Section) (Section, []figure) {
	sec.Setup = fmt.Sprintf("RTT 70 ms, 29 segments, IW 3 against IW 10, rate from 56 kbit/s to 10 Mbit/s, drop-tail queue of 1000 packets, %d trials per point.", e.Trials)
	sec.Header = []string{"rate, kbit/s", "IW 3 user FCT, ms", "IW 10 user FCT, ms", "saving, ms", "base/exp−1 %", "(base−exp)/base %", "model %", "CS244 saving, ms", "CS244 %"}
	f := figure{Name: "bandwidth_sweep", Title: "IW 3 → 10 improvement against bandwidth: RTT 70 ms, 29 segments", XLabel: "bottleneck rate (kbit/s, log scale)", YLabel: "improvement, base/exp − 1 (%)", LogX: true}
	labS, modS, pubS := series{Name: "user-felt", Kind: kindLab}, series{Name: "user-felt", Kind: kindModel}, series{Name: "CS244", Kind: kindPublished}
	for _, im := range pairs(e, points) {
		kbps := im.Base.Spec.RateBitsPerSecond / 1000
		pct := (im.Base.User.Median/im.Exp.User.Median - 1) * 100
		mpct := (im.Base.Model.FCTUserMs/im.Exp.Model.FCTUserMs - 1) * 100
		cs, ok := cs244Bandwidth[kbps]
		sec.Rows = append(sec.Rows, []string{fmt.Sprint(kbps), ciText(im.Base.User.Median, im.Base.UserCI), ciText(im.Exp.User.Median, im.Exp.UserCI), f1(im.UserAbsMs),
			f1(pct), f1(im.UserPercent), f1(mpct), orDash(ok, f0(cs[0])), orDash(ok, f0(cs[1]))})
		ci := math.Hypot(im.Base.UserCI, im.Exp.UserCI) / im.Exp.User.Median * 100
		labS.Points = append(labS.Points, xyPoint{float64(kbps), pct, ci})
		modS.Points = append(modS.Points, xyPoint{X: float64(kbps), Y: mpct})
		if ok {
			pubS.Points = append(pubS.Points, xyPoint{X: float64(kbps), Y: cs[1]})
		}
	}
	f.Series = []series{labS, modS, pubS}
	sec.Figures = []string{f.Name}
	if ims := pairs(e, points); len(ims) > 0 {
		slow, fast := ims[0], ims[len(ims)-1]
		sec.Headline = fmt.Sprintf("IW 3 → 10 saves %.0f ms at %s and %.0f ms at %s over 70 ms (CS244: 8 and 70 ms)",
			slow.UserAbsMs, describeRate(slow.Base.Spec.RateBitsPerSecond), fast.UserAbsMs, describeRate(fast.Base.Spec.RateBitsPerSecond))
	}
	sec.Findings = append(sec.Findings,
		"Low-bandwidth links gain nothing: below about 1 Mbit/s the 70 ms path holds fewer segments than IW 3, so the link is the bottleneck from the first round with either window (CS244: 0% at 56 and 256 kbit/s). The gain rises once the BDP exceeds IW 3. At the fast end the lab saves two round trips (IW 3 needs 4 HTTP rounds for 29 segments, IW 10 needs 2) where CS244 saved one (70 ms at 10 Mbit/s, 23%): the same gap as in the RTT sweep, with the same candidate causes.",
		"With a shallow buffer (the lab's default, one BDP and at least 10 packets, e.g. slowstart lab sweep without --queue) the picture changes at low rates: IW 10 overflows a 10-packet queue at 1.2 Mbit/s and pays a retransmission timeout, which can make it slower than IW 3. Like CS244 (netem's 1000 packets), these experiments use a deep queue to isolate the window's effect.")
	return sec, []figure{f}
}

func analyzeBDP(e Experiment, points map[string]Point, sec Section) (Section, []figure) {
	sec.Setup = fmt.Sprintf("29 segments, IW 3 against IW 10, every RTT × rate of the grid, %d trials per point; BDP in segments of 1500 bytes; drop-tail queue of 1000 packets.", e.Trials)
	sec.Header = []string{"RTT, ms", "rate", "BDP, segments", "saving, ms", "(base−exp)/base %", "model saving, ms", "model %"}
	f := figure{Name: "bdp_sweep", Title: "IW 3 → 10 improvement against the bandwidth-delay product (29 segments)", XLabel: "BDP (segments of 1500 bytes, log scale)", YLabel: "improvement, (base − exp)/base (%)", LogX: true}
	labS, modS := series{Name: "first byte to last byte", Kind: kindLab}, series{Name: "first byte to last byte", Kind: kindModel}
	ims := pairs(e, points)
	bdp := func(s lab.Spec) float64 { return float64(s.RTTNs) / 1e9 * float64(s.RateBitsPerSecond) / 8 / 1500 }
	sort.Slice(ims, func(i, j int) bool { return bdp(ims[i].Base.Spec) < bdp(ims[j].Base.Spec) })
	for _, im := range ims {
		b := bdp(im.Base.Spec)
		sec.Rows = append(sec.Rows, []string{fmt.Sprint(im.Base.Spec.RTTNs / 1e6), describeRate(im.Base.Spec.RateBitsPerSecond), f1(b), ciText(im.AbsMs, im.AbsCIMs), f1(im.Percent), f1(im.ModelAbsMs), f1(im.ModelPercent)})
		labS.Points = append(labS.Points, xyPoint{b, im.Percent, im.AbsCIMs / math.Max(im.Base.Paper.Median, 1) * 100})
		modS.Points = append(modS.Points, xyPoint{X: b, Y: im.ModelPercent})
	}
	f.Series = []series{labS, modS}
	sec.Figures = []string{f.Name}
	if len(ims) > 0 {
		lo, hi := ims[0], ims[len(ims)-1]
		sec.Headline = fmt.Sprintf("the bandwidth-delay product decides the gain of IW 3 → 10: %.1f%% at a BDP of %.1f segments, %.1f%% at %.0f",
			lo.Percent, bdp(lo.Base.Spec), hi.Percent, bdp(hi.Base.Spec))
	}
	sec.Findings = append(sec.Findings,
		"The BDP, not RTT or bandwidth alone, decides the gain: below about 3 segments (IW 3 already fills the pipe) there is none; between 3 and 29 segments IW 10 saves the round trips IW 3 needs to reach the BDP; above 29 segments (the response itself) both are window-limited and IW 10 saves the rounds Eq. 1 predicts. Neither the paper nor CS244 plotted this; it explains why the paper's buckets, which mix paths, show larger gains than the 70 ms / 1.2 Mbit/s lab point.")
	return sec, []figure{f}
}

func analyzeLoss(e Experiment, points map[string]Point, sec Section) (Section, []figure) {
	sec.Setup = fmt.Sprintf("RTT 70 ms, 5 Mbit/s, 70 segments, random loss on the server→client path (seeded per trial), drop-tail queue of 1000 packets, IW 3, 10 and 32, %d trials per point. Retransmissions = data packets the emulator dropped (each is sent again).", e.Trials)
	sec.Header = []string{"loss %", "IW", "FCT paper, ms (median ± 95% CI)", "FCT user, ms", "p90 user, ms", "retransmissions per transfer", "model (no loss), ms"}
	f := figure{Name: "loss", Title: "Random loss: RTT 70 ms, 5 Mbit/s, 70 segments (model: without loss)", XLabel: "random loss on the data path (%)", YLabel: "user-felt flow completion time (ms)"}
	byIW := map[int]*series{}
	mod := map[int]*series{}
	var retx = map[int]map[float64]float64{}
	for _, s := range e.Specs {
		p := points[s.Label()]
		sec.Rows = append(sec.Rows, []string{f1(s.LossRate * 100), fmt.Sprint(s.IW), ciText(p.Paper.Median, p.PaperCI), ciText(p.User.Median, p.UserCI), f1(p.User.P90), fmt.Sprintf("%.2f", p.DataLostMean), f1(p.Model.FCTUserMs)})
		if byIW[s.IW] == nil {
			byIW[s.IW] = &series{Name: fmt.Sprintf("IW %d", s.IW), Kind: kindLab}
			mod[s.IW] = &series{Name: fmt.Sprintf("IW %d", s.IW), Kind: kindModel}
			retx[s.IW] = map[float64]float64{}
		}
		byIW[s.IW].Points = append(byIW[s.IW].Points, xyPoint{s.LossRate * 100, p.User.Median, p.UserCI})
		mod[s.IW].Points = append(mod[s.IW].Points, xyPoint{X: s.LossRate * 100, Y: p.Model.FCTUserMs})
		retx[s.IW][s.LossRate] = p.DataLostMean
	}
	for _, iw := range sortedKeys(byIW) {
		f.Series = append(f.Series, *byIW[iw], *mod[iw])
	}
	sec.Figures = []string{f.Name}
	var worst float64
	for _, s := range e.Specs {
		worst = max(worst, s.LossRate)
	}
	sec.Headline = fmt.Sprintf("at %.0f%% random loss IW 3, 10 and 32 lose %.2f, %.2f and %.2f packets per transfer: loss widens the spread of the times, not the gap between windows",
		worst*100, retx[3][worst], retx[10][worst], retx[32][worst])
	sec.Findings = append(sec.Findings,
		fmt.Sprintf("At %.0f%% loss IW 3, 10 and 32 lose %.2f, %.2f and %.2f packets per transfer. The emulator's loss is seeded per trial and draws per packet, so trial k of every IW loses the same packets by position: the comparison is paired, and the counts are nearly equal by construction (they differ only where a lost retransmission shifts the sequence; spurious timeouts can add retransmissions, visible only in captures). The paper saw the retransmission rate rise by 0.31 (AvgDC) and 0.67 points (SlowDC) with IW 10 because its losses were partly congestive, a larger burst into a shallow buffer; here the queue is deep (1000 packets), so every loss is random and none is caused by the burst.", worst*100, retx[3][worst], retx[10][worst], retx[32][worst]),
		"Loss makes the FCT spread widen (p90 column): a loss in the first rounds costs a retransmission timeout when there are too few packets after it for three duplicate ACKs, which hurts small windows most; a larger IW keeps enough packets in flight for fast recovery. The model predicts the no-loss time only (dashed lines).")
	return sec, []figure{f}
}

// analyzeTCPvsQUIC sets each TCP point beside its HTTP/3 twin: the round trips (read
// from each trial's packets), the FCTs, what QUIC saved; its findings say what the
// numbers show and which window or limit explains them.
func analyzeTCPvsQUIC(e Experiment, points map[string]Point, sec Section) Section {
	sec.Setup = fmt.Sprintf("10 Mbit/s each way, drop-tail queue of 1000 packets; the built-in server over TCP (Linux CUBIC, IW 10, HTTP/2 over TLS 1.3, the lab's client) and over QUIC (quic-go: HTTP/3, TLS 1.3, its initial window of 32 packets of 1,280 bytes; the HTTP/3 probe as the client, whose first datagram is 1,280 bytes); the same page, certificate chain and emulated path; %d trials per point, TCP and QUIC alternating. Round trips are read from each trial's packets: over TCP from its client-side capture (TCP handshake + TLS handshake, then the response's data rounds), over QUIC from the probe's own datagrams (the QUIC handshake, then the data rounds). No published numbers: the paper and CS244 predate QUIC.", e.Trials)
	sec.Header = []string{"RTT, ms", "size", "chain", "TCP round trips (hs + data)", "QUIC round trips", "TCP FCT user, ms", "QUIC FCT user, ms", "QUIC saved, ms", "TCP FCT paper, ms", "QUIC FCT paper, ms"}
	type row struct {
		spec      lab.Spec
		cmp       lab.Comparison
		tcp, quic Point
	}
	var rows []row
	for _, s := range e.Specs {
		if s.HTTP3 {
			continue
		}
		twin, err := s.HTTP3Twin()
		if err != nil {
			continue
		}
		tp, qp := points[s.Label()], points[twin.Label()]
		sums := lab.SummarizePoints([]lab.Spec{s, twin}, append(append([]lab.Row{}, tp.Rows...), qp.Rows...))
		c := lab.Compare(sums[0], sums[1])
		rows = append(rows, row{s, c, tp, qp})
		rt := func(side lab.ComparisonSide) string {
			if side.Trials == 0 {
				return "–"
			}
			return fmt.Sprintf("%g + %g = %g", side.HandshakeRoundTrips, side.DataRoundTrips, side.RoundTrips)
		}
		sec.Rows = append(sec.Rows, []string{fmt.Sprint(s.RTTNs / 1e6), units.FormatSize(s.SizeBytes), units.FormatSize(int64(s.ChainBytes)),
			rt(c.TCP), rt(c.QUIC), ciText(tp.User.Median, tp.UserCI), ciText(qp.User.Median, qp.UserCI), f1(c.FCTUserSavedMs),
			ciText(tp.Paper.Median, tp.PaperCI), ciText(qp.Paper.Median, qp.PaperCI)})
	}
	if len(rows) == 0 {
		return sec
	}
	// Handshakes: by chain.
	handshakes := map[int][2][]float64{}
	for _, r := range rows {
		h := handshakes[r.spec.ChainBytes]
		h[0], h[1] = append(h[0], r.cmp.TCP.HandshakeRoundTrips), append(h[1], r.cmp.QUIC.HandshakeRoundTrips)
		handshakes[r.spec.ChainBytes] = h
	}
	var parts []string
	for _, chain := range QUICChains {
		h, ok := handshakes[chain]
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("with the %s chain, TCP and TLS took %s and QUIC %s", units.FormatSize(int64(chain)), rangeText(h[0]), rangeText(h[1])))
	}
	sec.Findings = append(sec.Findings, fmt.Sprintf("Handshakes (round trips before the request could be answered, medians over the points): %s. QUIC folds the transport handshake into TLS's, so it saves the TCP handshake's round trip unless its server's first flight does not fit in three times the client's first datagram (3 × 1,280 = 3,840 bytes here, RFC 9000 §8.1): then the amplification limit costs that round trip back, and both take two.", strings.Join(parts, "; ")))
	// Data rounds: by size.
	bySize := map[int64][2][]float64{}
	var sizes []int64
	for _, r := range rows {
		d, ok := bySize[r.spec.SizeBytes]
		if !ok {
			sizes = append(sizes, r.spec.SizeBytes)
		}
		d[0], d[1] = append(d[0], r.cmp.TCP.DataRoundTrips), append(d[1], r.cmp.QUIC.DataRoundTrips)
		bySize[r.spec.SizeBytes] = d
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	parts = nil
	for _, size := range sizes {
		d := bySize[size]
		parts = append(parts, fmt.Sprintf("%s: TCP %s, QUIC %s", units.FormatSize(size), rangeText(d[0]), rangeText(d[1])))
	}
	sec.Findings = append(sec.Findings, fmt.Sprintf("Data rounds of the response (medians): %s. The windows differ: Linux starts TCP at 10 segments (14.5 KB), quic-go at 40,960 bytes, so a response between the two takes TCP more rounds; both grow in slow start after that, and a large response on a fast path is bounded by the link, not the window.", strings.Join(parts, "; ")))
	var saved []float64
	for _, r := range rows {
		if r.cmp.TCP.Trials > 0 && r.cmp.QUIC.Trials > 0 {
			saved = append(saved, r.cmp.FCTUserSavedMs)
		}
	}
	if len(saved) > 0 {
		sort.Float64s(saved)
		sec.Headline = fmt.Sprintf("QUIC saved %.1f to %.1f ms of the user's wait across the points (negative: it took longer)", saved[0], saved[len(saved)-1])
		sec.Findings = append(sec.Findings, fmt.Sprintf("The user's wait (connect to last byte): QUIC saved from %.1f to %.1f ms across the points (negative: it took longer). A round trip saved is worth the RTT; what is left is the work of the two stacks (quic-go reads and decrypts every packet in user space, the kernel's TCP does not) and how each sends its window: quic-go paces it over the round trip, Linux's CUBIC sends it as the ACKs allow.", saved[0], saved[len(saved)-1]))
	}
	return sec
}

// rangeText says a set of medians: "2" when all are 2, "1 to 2" otherwise.
func rangeText(xs []float64) string {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo == hi {
		return fmt.Sprintf("%g", lo)
	}
	return fmt.Sprintf("%g to %g", lo, hi)
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
