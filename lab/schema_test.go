package lab

import (
	"testing"

	"github.com/slowstart/slowstart/compare"
	"github.com/slowstart/slowstart/stats"
)

// TestCompareKnowsTheLabSchema: compare names the lab's schema itself, so that it
// reads lab results without importing the lab; the two names must agree.
func TestCompareKnowsTheLabSchema(t *testing.T) {
	if compare.LabSchema != Schema {
		t.Errorf("compare.LabSchema = %q, lab.Schema = %q", compare.LabSchema, Schema)
	}
}

// TestSummarizeIsStats: the lab's point statistics are package stats' numbers,
// and Summarize leaves its sample sorted as it always did.
func TestSummarizeIsStats(t *testing.T) {
	xs := []float64{30, 10, 20, 40}
	want := stats.Summarize(xs)
	got := Summarize(xs)
	if got != want || got.Median != 25 || got.P10 != 13 || got.Stddev == 0 {
		t.Errorf("lab.Summarize = %+v, stats.Summarize = %+v", got, want)
	}
	if xs[0] != 10 || xs[3] != 40 {
		t.Errorf("sample left as %v, want sorted", xs)
	}
}
