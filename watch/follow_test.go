package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/report"
)

// TestFormatRowIW: each probe's line shows the window as its verdict allows.
func TestFormatRowIW(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, c := range []struct {
		row  Row
		want string
	}{
		{Row{SummaryRow: report.SummaryRow{IW: report.IWReading{Segments: n(10), Verdict: "exact"}}}, "IW 10 (exact)"},
		{Row{SummaryRow: report.SummaryRow{IW: report.IWReading{Segments: n(4), SegmentsMax: n(10), Verdict: "range"}}}, "IW 4-10 (range)"},
		{Row{SummaryRow: report.SummaryRow{IW: report.IWReading{Segments: n(3), Verdict: "lower_bound"}}}, "IW ≥ 3 (lower_bound)"},
		{Row{SummaryRow: report.SummaryRow{IW: report.IWReading{Verdict: "ambiguous"}}}, "IW ? (ambiguous)"},
		{Row{}, "IW ?"},
	} {
		c.row.Time, c.row.URL, c.row.Status = time.Unix(0, 0), "https://a.example/", n(200)
		if line := FormatRow(c.row); !strings.Contains(line, c.want) {
			t.Errorf("%q lacks %q", line, c.want)
		}
	}
}
