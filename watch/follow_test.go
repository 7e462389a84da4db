package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/report"
)

// TestFormatRowIW: each probe's line shows the window as its verdict allows.
func TestFormatRowIW(t *testing.T) {
	for want, iw := range map[string]report.IWReading{
		"IW 10 (exact)":                      {Segments: ptr(10), Verdict: "exact"},
		"IW 4-10 (range)":                    {Segments: ptr(4), SegmentsMax: ptr(10), Verdict: "range"},
		"IW ≥ 3 (lower_bound)":               {Segments: ptr(3), Verdict: "lower_bound"},
		"IW ? (ambiguous)":                   {Verdict: "ambiguous"},
		"https://a.example/  HTTP 200  IW ?": {},
	} {
		row := Row{Time: time.Unix(0, 0), URL: "https://a.example/", SummaryRow: report.SummaryRow{IW: iw, Status: ptr(200)}}
		if line := FormatRow(row); !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
}
