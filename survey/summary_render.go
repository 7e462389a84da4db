package survey

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/plotfile"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/report"
)

// fullSegmentBytes is a full-sized segment's payload over Ethernet with TCP
// timestamps: what an IW in segments carries in a normal page load.
const fullSegmentBytes = 1448

// histogramWidth is the longest bar of the text histogram, in characters.
const histogramWidth = 40

// WriteSummaryJSON writes the summary as one indented JSON document.
func WriteSummaryJSON(w io.Writer, s Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteSummaryText writes the summary for people: the exact initial windows
// as a histogram, the page loads' readings, why rows gave no answer, and the
// providers' table (by label or ASN), as the published surveys lay it out.
func WriteSummaryText(w io.Writer, s Summary) error {
	ew := &report.ErrWriter{W: w}
	vantages := ""
	if len(s.Vantages) > 0 {
		vantages = " from " + textsafe.Escape(strings.Join(s.Vantages, ", "))
	}
	ew.Printf("%d targets%s, %d with an error.\n", s.Rows, vantages, s.Failed)
	if m := s.Exact; m != nil {
		ew.Printf("\nExact initial window (segments; ≥: a lower bound): %d of %d measured gave a reading (%s), %d none (%s).\n",
			m.Answered, m.Measured, percent(m.Answered, m.Measured), m.NoAnswer, percent(m.NoAnswer, m.Measured))
		writeHistogram(ew, m.IW)
		if len(m.Retries) > 0 {
			var parts []string
			for _, c := range m.Retries {
				parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Count))
			}
			ew.Printf("Readings that took a retry: %s.\n", strings.Join(parts, ", "))
		}
		writeWhy(ew, "No exact reading", m)
	}
	if m := s.Passive; m != nil {
		ew.Printf("\nPage load's own reading (segments; ≥: a lower bound; a-b: a range, either end possible): %d of %d (%s).\n",
			m.Answered, m.Measured, percent(m.Answered, m.Measured))
		writeHistogram(ew, m.IW)
		writeWhy(ew, "No page-load reading", m)
	}
	if len(s.Errors) > 0 {
		var parts []string
		for _, c := range s.Errors {
			parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Count))
		}
		ew.Printf("\nErrors by kind: %s.\n", strings.Join(parts, ", "))
	}
	if len(s.Groups) > 0 {
		ew.Printf("\nBy %s:\n", s.GroupBy)
		method := "exact"
		for _, g := range s.Groups {
			if g.Method == MethodPageLoad {
				method = "page load"
			}
		}
		tb := texttable.New("  ", texttable.L(s.GroupBy), texttable.R("targets"), texttable.R("answered"), texttable.L("IW segments ("+method+")"),
			texttable.R("first round at 1448 B"), texttable.R("TLS flight"), texttable.L("no answer"))
		for _, g := range s.Groups {
			iw, firstRound := "-", "-"
			if len(g.IW) > 0 {
				var parts []string
				for i, c := range g.IW {
					if i == 3 {
						parts = append(parts, "…")
						break
					}
					parts = append(parts, fmt.Sprintf("%s (%s)", c.Text(), percent(c.Count, g.Rows)))
				}
				iw = strings.Join(parts, ", ")
				top := g.IW[0]
				firstRound = report.Size(int64(top.Segments * fullSegmentBytes))
				if top.Verdict != report.VerdictExact {
					firstRound = "≥ " + firstRound
				}
			}
			tls := "-"
			if g.TLSFlightBytesMedian != nil {
				tls = report.Size(int64(*g.TLSFlightBytesMedian))
			}
			noAnswer := strconv.Itoa(g.Rows - g.Answered)
			if len(g.NoAnswerWhy) > 0 {
				var parts []string
				for _, c := range g.NoAnswerWhy {
					parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Count))
				}
				noAnswer += " (" + strings.Join(parts, ", ") + ")"
			}
			tb.Row(textsafe.Escape(g.Name), strconv.Itoa(g.Rows), fmt.Sprintf("%d (%s)", g.Answered, percent(g.Answered, g.Rows)),
				iw, firstRound, tls, noAnswer)
		}
		ew.Printf("%s", tb.String())
		if method == "exact" {
			ew.Printf("IW: the exact measurement's readings, most frequent first (share of the group's targets); first round: the most\n" +
				"frequent IW in full-sized segments; TLS flight: the median server flight of the page loads.\n")
		} else {
			ew.Printf("IW: the page loads' own readings (no exact measurement: --no-exact), most frequent first (share of the group's\n" +
				"targets); first round: the most frequent IW in full-sized segments; TLS flight: the median server flight of the page loads.\n")
		}
	}
	return ew.Err
}

// writeHistogram draws the readings as bars, in window order.
func writeHistogram(ew *report.ErrWriter, iw []IWCount) {
	if len(iw) == 0 {
		return
	}
	sorted := slices.Clone(iw)
	slices.SortFunc(sorted, func(a, b IWCount) int {
		if a.Segments != b.Segments {
			return a.Segments - b.Segments
		}
		if a.SegmentsMax != b.SegmentsMax {
			return a.SegmentsMax - b.SegmentsMax
		}
		return strings.Compare(a.Verdict, b.Verdict)
	})
	most := 0
	for _, c := range sorted {
		most = max(most, c.Count)
	}
	tb := texttable.New("  ", texttable.R("IW"), texttable.R("targets"), texttable.R("share"), texttable.L(""))
	for _, c := range sorted {
		bar := strings.Repeat("█", max(1, c.Count*histogramWidth/most))
		tb.Row(c.Text(), strconv.Itoa(c.Count), percent1(c.Share), bar)
	}
	ew.Printf("%s", tb.String())
}

func writeWhy(ew *report.ErrWriter, what string, m *MethodSummary) {
	if len(m.NoAnswerWhy) == 0 {
		return
	}
	var parts []string
	for _, c := range m.NoAnswerWhy {
		parts = append(parts, fmt.Sprintf("%s %d (%s)", c.Name, c.Count, percent1(c.Share)))
	}
	ew.Printf("%s: %s.\n", what, strings.Join(parts, ", "))
}

func percent(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(total))
}

func percent1(share float64) string { return fmt.Sprintf("%.1f%%", 100*share) }

// SaveHistogram draws the exact measurement's readings as a bar chart into
// path (.svg or .png): exact windows and lower bounds side by side, per
// number of segments.
func SaveHistogram(path string, s Summary) error {
	if err := plotfile.CheckPath(path); err != nil {
		return err
	}
	if s.Exact == nil || len(s.Exact.IW) == 0 {
		return fmt.Errorf("no exact reading to plot")
	}
	segments := map[int]bool{}
	for _, c := range s.Exact.IW {
		segments[c.Segments] = true
	}
	var xs []int
	for n := range segments {
		xs = append(xs, n)
	}
	slices.Sort(xs)
	exactCounts := make(plotter.Values, len(xs))
	boundCounts := make(plotter.Values, len(xs))
	for _, c := range s.Exact.IW {
		i := slices.Index(xs, c.Segments)
		if c.Verdict == report.VerdictExact {
			exactCounts[i] += float64(c.Count)
		} else {
			boundCounts[i] += float64(c.Count)
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Initial windows of %d targets (%d with a reading)", s.Exact.Measured, s.Exact.Answered)
	p.X.Label.Text = "initial window (segments)"
	p.Y.Label.Text = "targets"
	width := vg.Points(10)
	exactBars, err := plotter.NewBarChart(exactCounts, width)
	if err != nil {
		return err
	}
	exactBars.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	exactBars.Offset = -width / 2
	boundBars, err := plotter.NewBarChart(boundCounts, width)
	if err != nil {
		return err
	}
	boundBars.Color = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	boundBars.Offset = width / 2
	p.Add(exactBars, boundBars)
	p.Legend.Add("exact", exactBars)
	p.Legend.Add("lower bound (at least)", boundBars)
	names := make([]string, len(xs))
	for i, n := range xs {
		names[i] = strconv.Itoa(n)
	}
	p.NominalX(names...)
	return plotfile.Save(p, vg.Length(max(12, len(xs)*2))*vg.Centimeter, 9*vg.Centimeter, path)
}

// Report prints the summary of the store at path (survey report).
func Report(path string, o SummaryOptions, asJSON bool, w io.Writer) error {
	sum, err := newSummarizer(o)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fault.Filef("reading the store: %w", err)
	}
	if _, err := ReadStore(path, func(r Row) error { sum.Add(r); return nil }); err != nil {
		return fault.Filef("reading %s: %w", path, err)
	}
	return WriteSummary(w, sum.Summary(), asJSON, o.Plot)
}

// newSummarizer makes the summary's counter from --by and --asn.
func newSummarizer(o SummaryOptions) (*Summarizer, error) {
	groupBy, asnFile, plotPath := o.GroupBy, o.ASNFile, o.Plot
	if plotPath != "" {
		if err := plotfile.CheckPath(plotPath); err != nil {
			return nil, fault.Mark(fault.Usage, fmt.Errorf("--plot: %w", err))
		}
	}
	var asns *PrefixTable
	if asnFile != "" {
		f, err := os.Open(asnFile)
		if err != nil {
			return nil, fault.Mark(fault.File, fmt.Errorf("--asn: %w", err))
		}
		defer f.Close()
		if asns, err = ReadPrefixTable(f); err != nil {
			return nil, fault.Mark(fault.File, fmt.Errorf("--asn %s: %w", asnFile, err))
		}
		if groupBy == "" {
			groupBy = "asn"
		}
	}
	if groupBy == "" {
		groupBy = "label"
	}
	sum, err := NewSummarizer(groupBy, asns)
	if err != nil {
		return nil, fault.Mark(fault.Usage, fmt.Errorf("--by: %w", err))
	}
	return sum, nil
}

// WriteSummary prints a store's summary (as JSON or a table) and draws its
// histogram into plotPath when set.
func WriteSummary(w io.Writer, s Summary, asJSON bool, plotPath string) error {
	var err error
	if asJSON {
		err = WriteSummaryJSON(w, s)
	} else {
		err = WriteSummaryText(w, s)
	}
	if err != nil {
		return err
	}
	if plotPath != "" {
		if err := SaveHistogram(plotPath, s); err != nil {
			return fault.Mark(fault.Failed, fmt.Errorf("--plot: %w", err))
		}
		if !asJSON {
			fmt.Fprintf(w, "histogram: %s\n", plotPath)
		}
	}
	return nil
}
