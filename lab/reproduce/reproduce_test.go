package reproduce

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/model"
)

func TestBodyForSegmentsFillsWholeSegments(t *testing.T) {
	for _, segs := range []int{1, 3, 4, 29, 100, 300} {
		body := BodyForSegments(segs)
		total := body + model.LabHeaderBytes(body)
		if total > int64(segs)*model.DefaultMSS || total <= int64(segs-1)*model.DefaultMSS {
			t.Errorf("%d segments: body %d + headers = %d bytes, not in (%d, %d]", segs, body, total, (segs-1)*model.DefaultMSS, segs*model.DefaultMSS)
		}
	}
}

func TestExperimentsCoverTheIssue(t *testing.T) {
	for _, quick := range []bool{false, true} {
		exps := Experiments(quick)
		names := map[string]Experiment{}
		for _, e := range exps {
			names[e.Name] = e
			if e.Trials < 3 {
				t.Errorf("%s: %d trials, too few for a confidence interval", e.Name, e.Trials)
			}
			for _, s := range e.Specs {
				if err := s.Normalize(); err != nil {
					t.Errorf("%s: %s: %v", e.Name, s.Label(), err)
				}
			}
		}
		for _, want := range []string{ExpIWSweep, ExpBuckets, ExpRTT, ExpBandwidth, ExpBDP, ExpLoss, ExpTCPvsQUIC} {
			if _, ok := names[want]; !ok {
				t.Errorf("quick=%v: experiment %s missing", quick, want)
			}
		}
		if n := len(names[ExpBuckets].Specs); n != 2*len(BucketSegments) {
			t.Errorf("quick=%v: %d bucket points, want IW 3 and 10 for each of %d buckets", quick, n, len(BucketSegments))
		}
		iws := map[int]bool{}
		for _, s := range names[ExpIWSweep].Specs {
			iws[s.IW] = true
			if s.RTTNs != 140e6 {
				t.Errorf("IW sweep at RTT %d ns, want 140 ms", s.RTTNs)
			}
		}
		for _, iw := range []int{3, 6, 10, 16, 26, 42} {
			if !iws[iw] {
				t.Errorf("IW sweep lacks IW %d", iw)
			}
		}
	}
	if full, quick := len(Jobs(Experiments(false))), len(Jobs(Experiments(true))); quick*3 > full {
		t.Errorf("quick runs %d trials against %d for the full run", quick, full)
	}
}

// TestTCPvsQUICSection: every TCP point of the experiment has its HTTP/3 twin, its
// jobs count round trips, and the section sets the two side by side with the
// medians of the rows it is given and findings that quote them.
func TestTCPvsQUICSection(t *testing.T) {
	var e Experiment
	for _, x := range Experiments(true) {
		if x.Name == ExpTCPvsQUIC {
			e = x
		}
	}
	labels := map[string]lab.Spec{}
	for _, s := range e.Specs {
		if _, dup := labels[s.Label()]; dup {
			t.Fatalf("two points labelled %s", s.Label())
		}
		labels[s.Label()] = s
	}
	points := map[string]Point{}
	tcpPoints := 0
	for _, s := range e.Specs {
		if s.HTTP3 {
			continue
		}
		tcpPoints++
		twin, err := s.HTTP3Twin()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := labels[twin.Label()]; !ok {
			t.Fatalf("%s has no HTTP/3 twin in the experiment", s.Label())
		}
		// Made-up trials: TCP 2 + 3 round trips, QUIC 1 + 2 with the small chain and
		// 2 + 2 with the large one, QUIC faster by 70 ms a round trip saved.
		quicHandshake := 1
		if s.ChainBytes > 3*1280 {
			quicHandshake = 2
		}
		var tcpRows, quicRows []lab.Row
		for trial := 1; trial <= 3; trial++ {
			tcpRows = append(tcpRows, lab.NewRow(s, lab.TrialResult{Trial: trial, FCTUserMs: 500, FCTPaperMs: 300, RoundTrips: &lab.TrialRoundTrips{Handshake: 2, Data: 3, Total: 5}}))
			saved := float64(5-quicHandshake-2) * 70
			quicRows = append(quicRows, lab.NewRow(twin, lab.TrialResult{Trial: trial, FCTUserMs: 500 - saved, FCTPaperMs: 250, RoundTrips: &lab.TrialRoundTrips{Handshake: quicHandshake, Data: 2, Total: quicHandshake + 2}}))
		}
		points[s.Label()], points[twin.Label()] = summarize(s, tcpRows), summarize(twin, quicRows)
	}
	for _, j := range Jobs([]Experiment{e}) {
		if !j.RoundTrips {
			t.Fatalf("%s: a job without round trips", j.Spec.Label())
		}
	}
	sec := analyzeTCPvsQUIC(e, points, Section{})
	if len(sec.Rows) != tcpPoints {
		t.Fatalf("%d rows, want one per TCP point (%d)", len(sec.Rows), tcpPoints)
	}
	text := strings.Join(sec.Findings, " ")
	for _, want := range []string{"with the 1.5 KB chain, TCP and TLS took 2 and QUIC 1", "with the 6 KB chain, TCP and TLS took 2 and QUIC 2", "TCP 3, QUIC 2", "QUIC saved from 70.0 to 140.0 ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("the findings do not say %q:\n%s", want, text)
		}
	}
	// What lab reproduce prints of the experiment: its result with its numbers.
	if want := "QUIC saved 70.0 to 140.0 ms of the user's wait across the points"; !strings.HasPrefix(sec.Headline, want) {
		t.Errorf("headline %q, want it to start with %q", sec.Headline, want)
	}
	if row := strings.Join(sec.Rows[0], " | "); !strings.Contains(row, "2 + 3 = 5") || !strings.Contains(row, "1 + 2 = 3") {
		t.Errorf("first row %q", row)
	}
}

func TestImprovementDefinitions(t *testing.T) {
	base := Point{Paper: lab.Stats{N: 3, Median: 200}, User: lab.Stats{N: 3, Median: 400}}
	exp := Point{Paper: lab.Stats{N: 3, Median: 150}, User: lab.Stats{N: 3, Median: 350}}
	im := improvement(base, exp)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"absolute", im.AbsMs, 50},
		{"paper percent (base-exp)/base", im.Percent, 25},
		{"CS244 percent base/exp-1", im.CS244Percent, 100.0 / 3},
		{"user-felt percent", im.UserPercent, 12.5},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %g, want %g", c.name, c.got, c.want)
		}
	}
}

func TestCI95(t *testing.T) {
	s := lab.Summarize([]float64{10, 12, 14})
	// sd 2, n 3, t(2) = 4.303: 4.303*2/sqrt(3)
	if got, want := ci95(s), 4.303*2/math.Sqrt(3); math.Abs(got-want) > 1e-9 {
		t.Errorf("ci95 %g, want %g", got, want)
	}
	if ci95(lab.Summarize([]float64{5})) != 0 {
		t.Error("one sample has no interval")
	}
}

// TestReportRendering renders a section with a figure and checks the files: the PNG
// and SVG exist, the HTML holds the SVG inline and the Markdown links the PNG.
func TestReportRendering(t *testing.T) {
	dir := t.TempDir()
	fig := figure{Name: "demo", Title: "demo", XLabel: "size (segments)", YLabel: "ms", LogX: true, Series: []series{
		{Name: "a", Kind: kindLab, Points: []xyPoint{{3, 10, 1}, {10, 20, 2}, {100, 30, 1}}},
		{Name: "a", Kind: kindModel, Points: []xyPoint{{X: 3, Y: 11}, {X: 10, Y: 19}, {X: 100, Y: 31}}},
		{Name: "paper", Kind: kindPublished, Points: []xyPoint{{X: 3, Y: 8}, {X: 10, Y: 25}}},
	}}
	notes, err := fig.render(dir)
	if err != nil || len(notes) != 0 {
		t.Fatalf("render: %v, notes %q", err, notes)
	}
	res := &Result{Trials: 6, Elapsed: 3 * time.Second, Sections: []Section{{Name: "demo", Title: "Demo <experiment>", Setup: "setup",
		Header: []string{"x", "y"}, Rows: [][]string{{"1", "2"}}, Figures: []string{"demo"}, Findings: []string{"a finding"}}}}
	md, html, err := writeReport(dir, res, true)
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(dir, "demo.png"))
	if err != nil || len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("demo.png is not a PNG (%v)", err)
	}
	h, _ := os.ReadFile(html)
	if !strings.Contains(string(h), "<svg") || strings.Contains(string(h), "<?xml") {
		t.Error("the HTML report should hold the SVG inline, without its XML prolog")
	}
	if !strings.Contains(string(h), "Demo &lt;experiment&gt;") {
		t.Error("the HTML report should escape titles")
	}
	m, _ := os.ReadFile(md)
	if !strings.Contains(string(m), "![demo](demo.png)") || !strings.Contains(string(m), "| 1 | 2 |") {
		t.Errorf("the Markdown report lacks the figure or the table:\n%s", m)
	}
}

// TestSizeBucketsHaveThePapersShape runs the response-size experiment (the paper's
// Fig. 7: IW 3 against IW 10 at 70 ms and 1.2 Mbit/s) in the lab and checks the
// shape the paper found: no gain when the response fits in 3 segments, and gains
// that grow with the size through tens of segments.
func TestSizeBucketsHaveThePapersShape(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 48 lab trials")
	}
	testroot.Require(t, "network namespaces")
	var e Experiment
	for _, x := range Experiments(true) {
		if x.Name == ExpBuckets {
			e = x
		}
	}
	if e.Name == "" {
		t.Fatal("no size_buckets experiment")
	}
	// The checks are of times: a run that misses is run again once, and what still
	// misses while the hypervisor took more than hoststeal.NoisyShare of the machine
	// is not checkable here. A failed trial is a failure whatever the host did.
	meter := hoststeal.Start()
	problems := sizeBucketProblems(t, e)
	if len(problems) > 0 {
		t.Logf("missed (run again): %s", strings.Join(problems, "; "))
		problems = sizeBucketProblems(t, e)
	}
	steal := meter.Read()
	steal.SkipIfNotCheckable(t, steal.Check(t, problems))
}

// sizeBucketProblems runs the size experiment once and says where its gains miss the
// paper's shape.
func sizeBucketProblems(t *testing.T, e Experiment) (problems []string) {
	t.Helper()
	jobs := Jobs([]Experiment{e})
	rows, err := lab.NewEnv().RunJobs(t.Context(), jobs, lab.RunOptions{Parallel: 6})
	if err != nil {
		t.Fatal(err)
	}
	byPoint := map[string][]lab.Row{}
	for i, j := range jobs {
		if rows[i].Error != "" {
			t.Fatalf("%s trial %d: %s", j.Spec.Label(), j.Trial, rows[i].Error)
		}
		byPoint[j.Spec.Label()] = append(byPoint[j.Spec.Label()], rows[i])
	}
	points := map[string]Point{}
	for _, s := range e.Specs {
		points[s.Label()] = summarize(s, byPoint[s.Label()])
	}
	imps := pairs(e, points)
	if len(imps) != len(BucketSegments) {
		t.Fatalf("%d IW 3/IW 10 pairs, want %d", len(imps), len(BucketSegments))
	}
	gain := map[int]float64{}
	for i, im := range imps {
		gain[BucketSegments[i]] = im.AbsMs
		t.Logf("%3s segments: IW 3 %.1f ms, IW 10 %.1f ms: %.1f ms (%.1f%%)", BucketLabels[i], im.Base.Paper.Median, im.Exp.Paper.Median, im.AbsMs, im.Percent)
	}
	rtt := 70.0
	if math.Abs(gain[3]) > 2 {
		problems = append(problems, fmt.Sprintf("3 segments: IW 10 gains %.1f ms; both windows carry it in one round, want none", gain[3]))
	}
	if gain[4] < rtt/2 {
		problems = append(problems, fmt.Sprintf("4 segments: IW 10 gains %.1f ms, want at least half a round trip (IW 3 needs a second round)", gain[4]))
	}
	for _, pair := range [][2]int{{4, 10}, {10, 30}} {
		if gain[pair[1]] < gain[pair[0]]-2 {
			problems = append(problems, fmt.Sprintf("the gain falls from %d segments (%.1f ms) to %d (%.1f ms); the paper's grows through tens of segments", pair[0], gain[pair[0]], pair[1], gain[pair[1]]))
		}
	}
	if gain[10] <= gain[4]+rtt/8 {
		problems = append(problems, fmt.Sprintf("the gain at 10 segments (%.1f ms) is not above the gain at 4 (%.1f ms)", gain[10], gain[4]))
	}
	return problems
}

// TestLogAxisSaysWhatItLeavesOut: a point a log axis can't show (0 or less) is
// left out of the plot and named in a note, never dropped silently.
func TestLogAxisSaysWhatItLeavesOut(t *testing.T) {
	fig := figure{Name: "gain", Title: "gain", XLabel: "size (segments)", YLabel: "gain (%)", LogX: true, LogY: true, Series: []series{
		{Name: "user-felt", Kind: kindLab, Points: []xyPoint{{3, 0, 1}, {10, 20, 2}, {100, 30, 1}}},
		{Name: "CS244", Kind: kindPublished, Points: []xyPoint{{X: 3, Y: 8}, {X: 10, Y: -2}}},
	}}
	notes, err := fig.render(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], `1 point(s) of "user-felt"`) || !strings.Contains(notes[0], "(3, 0)") ||
		!strings.Contains(notes[1], `"CS244"`) || !strings.Contains(notes[1], "(10, -2)") {
		t.Errorf("notes %q", notes)
	}
}
