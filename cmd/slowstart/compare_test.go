package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/report"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/watch"
)

// compareResult is the part of compare --json the tests read.
type compareResult struct {
	Metric string `json:"metric"`
	Before struct {
		N      int     `json:"n"`
		Median float64 `json:"median"`
	} `json:"before"`
	After struct {
		N      int     `json:"n"`
		Median float64 `json:"median"`
	} `json:"after"`
	MedianDiff float64 `json:"median_diff"`
	CI         struct {
		Low  float64 `json:"low"`
		High float64 `json:"high"`
	} `json:"ci"`
	Test struct {
		P float64 `json:"p"`
	} `json:"mann_whitney"`
	Significant bool   `json:"significant"`
	Verdict     string `json:"verdict"`
	Sentence    string `json:"sentence"`
}

// runCompareJSON runs compare --json with args and decodes its output.
func runCompareJSON(t *testing.T, args ...string) compareResult {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"compare", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("compare %v: exit %d, stderr %q", args, code, errOut)
	}
	var r compareResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("compare %v --json: %v\n%s", args, err, out)
	}
	t.Logf("compare %s: %s", strings.Join(args, " "), r.Sentence)
	return r
}

func compareNeedsRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces")
}

// TestCompareLab runs the lab at RTT 150 ms, 20 Mbit/s, a 60 KB response: 10
// trials with IW 3 and 20 with IW 10, interleaved (so that a slower or busier
// moment of the machine falls on both alike), writes them as lab sweep does
// (results.jsonl through lab.JSONLWriter, results.csv through lab.WriteCSV),
// then checks that compare finds IW 10 faster (CI below 0, p < 0.05) from either
// file, and that it finds no significant difference between two halves of the
// IW 10 trials.
func TestCompareLab(t *testing.T) {
	compareNeedsRoot(t)
	t.Cleanup(func() { netlab.CloseAll() })
	spec := func(iw int) lab.Spec {
		s := lab.Spec{RTTNs: int64(150 * time.Millisecond), RateBitsPerSecond: 20_000_000, IW: iw, SizeBytes: 60_000}
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	const trials = 10
	var jobs []lab.Job
	for trial := 1; trial <= trials; trial++ {
		jobs = append(jobs, lab.Job{Spec: spec(3), Trial: trial}, lab.Job{Spec: spec(10), Trial: trial}, lab.Job{Spec: spec(10), Trial: trials + trial})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, err := lab.NewEnv().RunJobs(ctx, jobs, lab.RunOptions{Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sweep := filepath.Join(dir, "sweep", "results.jsonl")
	w, err := lab.OpenJSONL(sweep)
	if err != nil {
		t.Fatal(err)
	}
	// The two halves of IW 10 go to files of their own: trials 1 to 10 and 11
	// to 20. Trials t and 10+t run at the same time (the jobs go three at a
	// time: IW 3 #t, IW 10 #t, IW 10 #10+t), so each half has one trial of
	// every moment the machine was in. Halves of odd and even trials put both
	// of a moment's trials in one half, and a busy moment in one half only:
	// twice, in CI, they differed at p 0.023 and 0.009.
	halves := [2]string{filepath.Join(dir, "iw10-first.jsonl"), filepath.Join(dir, "iw10-second.jsonl")}
	var halfWriters [2]*lab.JSONLWriter
	for i, p := range halves {
		if halfWriters[i], err = lab.OpenJSONL(p); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for _, r := range rows {
		if r.Error != "" {
			failed++
			t.Logf("trial %s #%d failed: %s", r.Point, r.Trial, r.Error)
		}
		if r.IW == 3 || r.Trial <= trials {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if r.IW == 10 {
			half := 0
			if r.Trial > trials {
				half = 1
			}
			if err := halfWriters[half].Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, hw := range append(halfWriters[:], w) {
		if err := hw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if failed > 2 {
		t.Fatalf("%d of %d trials failed", failed, len(rows))
	}
	csvPath := filepath.Join(dir, "sweep", "results.csv")
	cf, err := os.Create(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	sweepRows, err := lab.ReadRows(sweep)
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.WriteCSV(cf, lab.LatestRows(sweepRows)); err != nil {
		t.Fatal(err)
	}
	if err := cf.Close(); err != nil {
		t.Fatal(err)
	}

	// IW 3 before, IW 10 after: a real improvement, from the JSONL and the CSV alike.
	plotPNG, plotSVG := filepath.Join(dir, "cdf.png"), filepath.Join(dir, "cdf.svg")
	fromJSONL := runCompareJSON(t, sweep+"@iw=3", sweep+"@iw=10", "--plot", plotPNG)
	fromCSV := runCompareJSON(t, csvPath+"@iw=3", csvPath+"@iw=10", "--plot", plotSVG)
	for _, r := range []compareResult{fromJSONL, fromCSV} {
		if r.Verdict != compare.VerdictImprovement || !r.Significant || r.MedianDiff >= 0 || r.CI.High >= 0 || r.Test.P >= 0.05 {
			t.Errorf("IW 3 → IW 10: verdict %s, median diff %.1f ms, CI [%.1f, %.1f], p %.4g; want an improvement with the CI below 0 and p < 0.05",
				r.Verdict, r.MedianDiff, r.CI.Low, r.CI.High, r.Test.P)
		}
		if r.Before.N+r.After.N < 2*trials-failed || r.Metric != "fct_user" {
			t.Errorf("n %d + %d, metric %s", r.Before.N, r.After.N, r.Metric)
		}
		if !strings.HasPrefix(r.Sentence, "AFTER is faster by ") {
			t.Errorf("sentence %q", r.Sentence)
		}
	}
	if fromJSONL.Before != fromCSV.Before || fromJSONL.After != fromCSV.After || fromJSONL.Test.P != fromCSV.Test.P {
		t.Errorf("the JSONL and the CSV of the same rows compare differently: %+v vs %+v", fromJSONL, fromCSV)
	}
	// The other way round it is a regression; fct_paper sees the same.
	if r := runCompareJSON(t, sweep+"@iw=10", sweep+"@iw=3", "--metric", "fct_paper"); r.Verdict != compare.VerdictRegression || r.Metric != "fct_paper" {
		t.Errorf("IW 10 → IW 3, fct_paper: verdict %s", r.Verdict)
	}
	checkPlot(t, plotPNG, []byte("\x89PNG"))
	checkPlot(t, plotSVG, []byte("<svg"))
	svg, _ := os.ReadFile(plotSVG)
	for _, want := range []string{"BEFORE (n=", "AFTER (n=", "flow completion time", "(ms)", "fraction of samples"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the SVG plot lacks %q", want)
		}
	}

	// Two halves of the same setting: no difference claimed. The verdict's
	// false-positive rate at alpha 0.05 is measured in package compare (about
	// 3%); here alpha 0.01 keeps this one real pair from failing by chance.
	// "Inconclusive" (p above alpha, but an interval that just misses zero:
	// p 0.023 and [0.0, 0.8] ms in one run of CI) claims no difference
	// either: it asks for more samples.
	same := runCompareJSON(t, halves[1], halves[0], "--alpha", "0.01")
	t.Logf("IW 10 against IW 10: verdict %s, median diff %.1f ms, p %.4g", same.Verdict, same.MedianDiff, same.Test.P)
	if same.Significant || (same.Verdict != compare.VerdictNoDifference && same.Verdict != compare.VerdictInconclusive) {
		t.Errorf("IW 10 against IW 10: verdict %s, p %.4g, CI [%.1f, %.1f]; want no significant difference",
			same.Verdict, same.Test.P, same.CI.Low, same.CI.High)
	}
	if same.Before.N < trials/2-1 || same.After.N < trials/2-1 {
		t.Errorf("halves of %d and %d", same.Before.N, same.After.N)
	}

	// The text output.
	code, out, _ := runCLI(t, "compare", sweep+"@iw=3", sweep+"@iw=10")
	for _, want := range []string{"fct_user (ms)", "BEFORE", "AFTER", "median", "p90", "p99", "95% CI", "Mann-Whitney U", "a real improvement"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("text output (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	// A file with two points needs a filter.
	code, _, errOut := runCLI(t, "compare", sweep, sweep+"@iw=10")
	if code != exitFile || !strings.Contains(errOut, "@iw=") {
		t.Errorf("two points without a filter: exit %d, stderr %q", code, errOut)
	}
}

func checkPlot(t *testing.T, path string, magic []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	if !bytes.Contains(b[:min(len(b), 200)], magic) || len(b) < 2000 {
		t.Errorf("%s: %d bytes, not a plot", path, len(b))
	}
}

// TestCompareRealOutputs reads what the real commands write: lab run --json and
// probe --runs N --json against two emulated servers that differ only in their
// initial window (IW 3 and IW 10, RTT 100 ms, a 100 KB page over HTTP), as an operator probes
// before and after raising initcwnd.
func TestCompareRealOutputs(t *testing.T) {
	compareNeedsRoot(t)
	t.Cleanup(func() { netlab.CloseAll() })
	dir := t.TempDir()

	// lab run --json: the summary and every trial.
	code, out, errOut := runCLI(t, "lab", "run", "--rtt", "100ms", "--rate", "20mbit", "--iw", "10", "--size", "60KB", "--runs", "3", "--parallel", "3", "--json")
	if code != exitOK {
		t.Fatalf("lab run: exit %d, stderr %q", code, errOut)
	}
	runJSON := filepath.Join(dir, "run.json")
	writeFile(t, runJSON, out)
	s, err := compare.Load(runJSON, "")
	if err != nil {
		t.Fatalf("lab run --json: %v", err)
	}
	var parsed struct {
		Trials []lab.Row `json:"trials"`
	}
	if err := json.Unmarshal([]byte(out), &parsed); err != nil {
		t.Fatal(err)
	}
	var want []float64
	for _, r := range parsed.Trials {
		if r.Error == "" {
			want = append(want, r.FCTUserMs)
		}
	}
	if s.Kind != compare.KindLab || s.Metric != "fct_user" || len(s.Values) != len(want) || len(want) == 0 {
		t.Fatalf("lab run --json read as %s %s with %d values, want %d", s.Kind, s.Metric, len(s.Values), len(want))
	}
	for i := range want {
		if s.Values[i] != want[i] {
			t.Errorf("value %d: %v, want %v", i, s.Values[i], want[i])
		}
	}

	// lab sweep: results.jsonl and results.csv as the command writes them.
	sweepDir := filepath.Join(dir, "sweep")
	code, _, errOut = runCLI(t, "lab", "sweep", "--rtt", "100ms", "--rate", "20mbit", "--iw", "3,10", "--size", "60KB", "--runs", "2", "--parallel", "2", "--out", sweepDir)
	if code != exitOK {
		t.Fatalf("lab sweep: exit %d, stderr %q", code, errOut)
	}
	sweepRows, err := lab.ReadRows(filepath.Join(sweepDir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, iw := range []int{3, 10} {
		var want []float64
		for _, r := range sweepRows {
			if r.IW == iw && r.Error == "" {
				want = append(want, r.FCTPaperMs)
			}
		}
		for _, name := range []string{"results.jsonl", "results.csv"} {
			s, err := compare.Load(fmt.Sprintf("%s@iw=%d", filepath.Join(sweepDir, name), iw), "fct_paper")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(s.Values) != len(want) || len(want) == 0 {
				t.Fatalf("%s@iw=%d: %d values, want %d", name, iw, len(s.Values), len(want))
			}
			for i := range want {
				if s.Values[i] != want[i] {
					t.Errorf("%s@iw=%d value %d: %v, want %v", name, iw, i, s.Values[i], want[i])
				}
			}
		}
	}

	// probe --runs 5 --json against IW 3 and IW 10.
	const runs = 5
	probeFiles := map[int]string{}
	for _, iw := range []int{3, 10} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		srv, err := labserver.Start(ctx, labserver.Config{RTT: 100 * time.Millisecond, RateBitsPerSecond: 20_000_000, IW: iw})
		cancel()
		if err != nil {
			t.Fatalf("starting the lab server: %v", err)
		}
		t.Cleanup(func() {
			if err := srv.Close(); err != nil {
				t.Errorf("closing the lab server: %v", err)
			}
		})
		code, out, errOut := runCLI(t, "probe", srv.URL("/bytes/100000"), "--runs", fmt.Sprint(runs), "--json", "--netns", srv.Netns)
		if code != exitOK {
			t.Fatalf("probe IW %d: exit %d, stderr %q", iw, code, errOut)
		}
		probeFiles[iw] = filepath.Join(dir, fmt.Sprintf("probe-iw%d.json", iw))
		writeFile(t, probeFiles[iw], out)
	}
	r := runCompareJSON(t, probeFiles[3], probeFiles[10], "--plot", filepath.Join(dir, "probe.png"))
	if r.Before.N != runs || r.After.N != runs || r.Metric != "last_byte" {
		t.Fatalf("probe files read as n %d and %d of %s, want %d each of last_byte", r.Before.N, r.After.N, r.Metric, runs)
	}
	if r.Verdict != compare.VerdictImprovement || r.Test.P >= 0.05 || r.CI.High >= 0 {
		t.Errorf("probe IW 3 → IW 10: verdict %s, diff %.1f ms, CI [%.1f, %.1f], p %.4g", r.Verdict, r.MedianDiff, r.CI.Low, r.CI.High, r.Test.P)
	}
	// The IW readings themselves differ too.
	if r := runCompareJSON(t, probeFiles[3], probeFiles[10], "--metric", "iw"); r.Before.Median != 3 || r.After.Median != 10 || r.Verdict != compare.VerdictDifferent {
		t.Errorf("--metric iw: medians %v and %v, verdict %s; want 3 and 10, different", r.Before.Median, r.After.Median, r.Verdict)
	}
	// Two probe outputs appended to one file are one sample.
	both := filepath.Join(dir, "both.json")
	a, _ := os.ReadFile(probeFiles[3])
	b, _ := os.ReadFile(probeFiles[10])
	writeFile(t, both, string(a)+string(b))
	if s, err := compare.Load(both, "first_byte"); err != nil || len(s.Values) != 2*runs {
		t.Errorf("appended Reports: %v values, err %v", len(s.Values), err)
	}
	// Probe against lab data: compared, with a note.
	code, out, _ = runCLI(t, "compare", probeFiles[10], runJSON)
	if code != exitOK || !strings.Contains(out, "make sure they measure the same thing") {
		t.Errorf("probe against lab: exit %d\n%s", code, out)
	}
	// A metric the input does not have is a usage error.
	if code, _, errOut := runCLI(t, "compare", probeFiles[3], probeFiles[10], "--metric", "fct_paper"); code != exitUsage {
		t.Errorf("--metric fct_paper on probes: exit %d, stderr %q", code, errOut)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompareErrors checks the usage and input errors, without the lab.
func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	writeFile(t, text, "hello\n")
	empty := filepath.Join(dir, "empty.json")
	writeFile(t, empty, "")
	analyzeOut := filepath.Join(dir, "analyze.json")
	code, out, _ := runCLI(t, "analyze", "--json", iw3Capture)
	if code != exitOK {
		t.Fatal("analyze failed")
	}
	writeFile(t, analyzeOut, out)
	allFailed := filepath.Join(dir, "failed.jsonl")
	writeFile(t, allFailed, `{"point":"p","iw":3,"trial":1,"fct_user_ms":0,"error":"boom"}`+"\n")
	good := filepath.Join(dir, "good.jsonl")
	writeFile(t, good, `{"point":"p","iw":3,"trial":1,"fct_user_ms":500}`+"\n"+`{"point":"p","iw":3,"trial":2,"fct_user_ms":510}`+"\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"one input", []string{good}, exitUsage, "two inputs"},
		{"missing file", []string{filepath.Join(dir, "nope.json"), good}, exitFile, "no such file"},
		{"not a format", []string{text, good}, exitFile, "not a slowstart"},
		{"empty", []string{empty, good}, exitFile, "empty"},
		{"a capture's Report", []string{analyzeOut, good}, exitFile, "no client timings"},
		{"all trials failed", []string{allFailed, good}, exitFile, "no fct_user values"},
		{"unknown metric", []string{good, good, "--metric", "speed"}, exitUsage, "not known"},
		{"store without windows", []string{"--store", filepath.Join(dir, "x.db")}, exitUsage, "--before and --after"},
		{"store and files", []string{good, good, "--store", "x.db", "--before", "2026-01-01", "--after", "2026-01-02"}, exitUsage, "not both"},
		{"bad window", []string{"--store", "x.db", "--before", "yesterday", "--after", "2026-01-02"}, exitUsage, "not a time"},
		{"missing store", []string{"--store", filepath.Join(dir, "x.db"), "--before", "2026-01-01", "--after", "2026-01-02"}, exitFile, "no such file"},
		{"bad plot name", []string{good, good, "--plot", filepath.Join(dir, "x.gif")}, exitUsage, ".png or .svg"},
		{"unwritable plot", []string{good, good, "--plot", "/proc/no/x.png"}, exitFile, "can't write there"},
		{"filter matches nothing", []string{good + "@iw=10", good}, exitFile, "no row matches"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, append([]string{"compare"}, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, c.code, c.want)
			}
		})
	}
	// The same file twice: compared, no difference.
	code, out, _ = runCLI(t, "compare", good, good)
	if code != exitOK || !strings.Contains(out, "No significant difference") || !strings.Contains(out, "fewer than 5 values") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestCompareHelp: the help teaches what an IW is and shows examples.
func TestCompareHelp(t *testing.T) {
	code, out, _ := runCLI(t, "compare", "--help")
	for _, want := range []string{"initial window", "Mann-Whitney", "bootstrap", "--store", "Exit codes", "results.jsonl@iw=10"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestCompareStoreWindows fills a watch store through the store's own API with
// rows of known values (the probing itself is tested with the watch command) and
// compares windows of it: a split at one time, ranges, --url and --metric.
func TestCompareStoreWindows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "site.db")
	st, err := watch.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	change := time.Date(2026, 11, 8, 14, 0, 0, 0, time.UTC)
	const site, other = "https://example.com/", "https://other.example/"
	ctx := context.Background()
	insert := func(r watch.Row) {
		if _, err := st.Insert(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 24 {
		at := change.Add(time.Duration(i-12) * time.Hour)
		last, iw := 900.0+float64(i%5), 3
		if !at.Before(change) {
			last, iw = 700.0+float64(i%5), 10
		}
		rounds := 6
		// As watch stores a reading: the window with its verdict (iw counts exact ones only).
		insert(watch.Row{Time: at, URL: site, SummaryRow: report.SummaryRow{LastByteMs: &last, IW: report.IWReading{Segments: &iw, Verdict: "exact"}, RoundTrips: &rounds}})
		insert(watch.Row{Time: at, URL: other, SummaryRow: report.SummaryRow{LastByteMs: &last}})
	}
	insert(watch.Row{Time: change.Add(-30 * time.Minute), URL: site, Error: "dial tcp: connection refused"})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Two URLs: --url is needed.
	code, _, errOut := runCLI(t, "compare", "--store", path, "--before", change.Format(time.RFC3339), "--after", change.Format(time.RFC3339))
	if code != exitUsage || !strings.Contains(errOut, "--url") || !strings.Contains(errOut, other) {
		t.Errorf("two URLs without --url: exit %d, stderr %q", code, errOut)
	}
	split := change.Format(time.RFC3339)
	r := runCompareJSON(t, "--store", path, "--url", site, "--before", split, "--after", split)
	if r.Before.N != 12 || r.After.N != 12 || r.Before.Median != 901.5 || r.After.Median != 702 || r.Verdict != compare.VerdictImprovement {
		t.Errorf("split at the change: n %d/%d, medians %v/%v, verdict %s", r.Before.N, r.After.N, r.Before.Median, r.After.Median, r.Verdict)
	}
	// Ranges: the 6 hours before and the 3 hours after.
	r = runCompareJSON(t, "--store", path, "--url", site,
		"--before", change.Add(-6*time.Hour).Format(time.RFC3339)+".."+split,
		"--after", split+".."+change.Add(3*time.Hour).Format(time.RFC3339), "--metric", "iw")
	if r.Before.N != 6 || r.After.N != 3 || r.Before.Median != 3 || r.After.Median != 10 || r.Metric != "iw" {
		t.Errorf("ranges, iw: n %d/%d, medians %v/%v, metric %s", r.Before.N, r.After.N, r.Before.Median, r.After.Median, r.Metric)
	}
	// The failed probe is left out and said so.
	code, out, _ := runCLI(t, "compare", "--store", path, "--url", site, "--before", split, "--after", split)
	if code != exitOK || !strings.Contains(out, "1 failed probes left out") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// No rows in a window.
	code, _, errOut = runCLI(t, "compare", "--store", path, "--url", site, "--before", "2020-01-01", "--after", split)
	if code != exitFile || !strings.Contains(errOut, "no last_byte values") {
		t.Errorf("empty window: exit %d, stderr %q", code, errOut)
	}
	// Rounds are the same on both sides: no difference.
	r = runCompareJSON(t, "--store", path, "--url", site, "--before", split, "--after", split, "--metric", "rounds")
	if r.Verdict != compare.VerdictNoDifference {
		t.Errorf("rounds: verdict %s", r.Verdict)
	}
}
