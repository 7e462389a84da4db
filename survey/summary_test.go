package survey

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// summaryRows: 10 rows by hand. Exact readings: 10 (4 rows), 3 (1), ≥ 5 (1,
// lower bound); none: timeout ×1 (runs), inconsistent ×1, refused ×2 (not
// measured). Page loads: 10 exact ×2, 12-16 range ×2, ≥ 4 ×1.
func summaryRows() []Row {
	exactRow := func(label, addr string, iw int, verdict string) Row {
		return Row{Label: label, Address: addr, ExactVerdict: verdict, ExactIWSegments: ptr(iw)}
	}
	rows := []Row{
		exactRow("cdn-a", "192.0.2.1", 10, "exact"), exactRow("cdn-a", "192.0.2.2", 10, "exact"),
		exactRow("cdn-a", "192.0.2.3", 10, "exact"), exactRow("cdn-b", "198.51.100.1", 10, "exact"),
		exactRow("cdn-b", "198.51.100.2", 3, "exact"), exactRow("cdn-b", "198.51.100.3", 5, "lower_bound"),
		{Label: "cdn-b", ExactVerdict: "none", ExactOutcomes: []string{"timeout", "timeout", "rst"}},
		{Label: "cdn-c", ExactVerdict: "inconsistent", ExactOutcomes: []string{"success", "success"}},
		{Label: "cdn-c", ExactError: "not measured", PassiveError: "refused", Error: "x", ErrorKind: "refused"},
		{Label: "", ExactError: "not measured", PassiveError: "refused", Error: "x", ErrorKind: "refused"},
	}
	rows[0].PassiveVerdict, rows[0].PassiveIWSegments = "exact", ptr(10)
	rows[1].PassiveVerdict, rows[1].PassiveIWSegments = "exact", ptr(10)
	rows[2].PassiveVerdict, rows[2].PassiveIWSegments, rows[2].PassiveIWSegmentsMax = "range", ptr(12), ptr(16)
	rows[3].PassiveVerdict, rows[3].PassiveIWSegments, rows[3].PassiveIWSegmentsMax = "range", ptr(12), ptr(16)
	rows[4].PassiveVerdict, rows[4].PassiveIWSegments = "lower_bound", ptr(4)
	rows[0].ExactRetry = "long_path"
	rows[0].FirstRoundBytes, rows[1].FirstRoundBytes, rows[2].FirstRoundBytes = ptr(14480), ptr(14480), ptr(10000)
	return rows
}

func TestSummary(t *testing.T) {
	s, err := NewSummarizer("label", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range summaryRows() {
		s.Add(r)
	}
	sum := s.Summary()
	if sum.Rows != 10 || sum.Failed != 2 || len(sum.Errors) != 1 || sum.Errors[0].Name != "refused" || sum.Errors[0].Count != 2 {
		t.Errorf("rows %d, failed %d, errors %+v", sum.Rows, sum.Failed, sum.Errors)
	}
	e := sum.Exact
	if e == nil || e.Measured != 10 || e.Answered != 6 || e.NoAnswer != 4 {
		t.Fatalf("exact: %+v", e)
	}
	if e.IW[0] != (IWCount{Segments: 10, Verdict: "exact", Count: 4, Share: 0.4}) {
		t.Errorf("most frequent exact reading %+v", e.IW[0])
	}
	why := map[string]int{}
	for _, c := range e.NoAnswerWhy {
		why[c.Name] = c.Count
	}
	if why["refused"] != 2 || why["timeout"] != 1 || why["inconsistent"] != 1 || len(why) != 3 {
		t.Errorf("no answer why: %v", why)
	}
	if len(e.Retries) != 1 || e.Retries[0].Name != "long_path" {
		t.Errorf("retries %+v", e.Retries)
	}
	p := sum.Passive
	if p == nil || p.Answered != 5 || len(p.IW) != 3 || p.IW[1].Text() != "12-16" || p.IW[1].Count != 2 || p.IW[2].Text() != "≥ 4" {
		t.Errorf("page loads: %+v", p)
	}
	if len(sum.Groups) != 4 || sum.Groups[0].Name != "cdn-b" || sum.Groups[0].Rows != 4 || sum.Groups[0].Answered != 3 {
		t.Fatalf("groups %+v", sum.Groups)
	}
	a := sum.Groups[1]
	if a.Name != "cdn-a" || a.Answered != 3 || a.FirstRoundBytesMedian == nil || *a.FirstRoundBytesMedian != 14480 {
		t.Errorf("cdn-a: %+v", a)
	}
	var text bytes.Buffer
	if err := WriteSummaryText(&text, sum); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"6 of 10 measured gave a reading (60%)", "≥ 5", "12-16", "refused 2 (20.0%)",
		"cdn-a", "10 (100%)", "14.5 KB", "(no label)", "long_path 1", "Errors by kind: refused 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// A range is never shown by one end alone.
	if strings.Contains(out, "  12  ") {
		t.Errorf("a range shown as one number:\n%s", out)
	}
	var js bytes.Buffer
	if err := WriteSummaryJSON(&js, sum); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc["schema"] != SummarySchema {
		t.Errorf("JSON: %v %v", err, doc["schema"])
	}
	plot := filepath.Join(t.TempDir(), "iw.svg")
	if err := SaveHistogram(plot, sum); err != nil {
		t.Errorf("histogram: %v", err)
	}
}

func TestSummaryByASN(t *testing.T) {
	table, err := ReadPrefixTable(strings.NewReader("# prefixes\n192.0.2.0/24 AS64500 Example\n192.0.2.128/25 64501\n198.51.100.0\t24\t64502\n"))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{"192.0.2.1": "AS64500 Example", "192.0.2.200": "AS64501", "198.51.100.9": "AS64502",
		"203.0.113.1": "(unknown ASN)", "": "(no address)", "::ffff:192.0.2.130": "AS64501"} {
		if got := table.NameOf(addr); got != want {
			t.Errorf("%q: %q, want %q", addr, got, want)
		}
	}
	s, err := NewSummarizer("asn", table)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range summaryRows() {
		s.Add(r)
	}
	sum := s.Summary()
	names := map[string]int{}
	for _, g := range sum.Groups {
		names[g.Name] = g.Rows
	}
	if names["AS64500 Example"] != 3 || names["AS64502"] != 3 || names["(no address)"] != 4 {
		t.Errorf("groups by ASN: %v", names)
	}
	if _, err := NewSummarizer("asn", nil); err == nil {
		t.Error("grouping by ASN without a table")
	}
	if _, err := ReadPrefixTable(strings.NewReader("nonsense\n")); err == nil {
		t.Error("a malformed prefix table was read")
	}
}

// TestSummaryWithoutExact: a survey without the exact method (--no-exact) has
// its groups read by the page loads' own readings, not shown as targets that
// gave no answer; the table says which reading it is.
func TestSummaryWithoutExact(t *testing.T) {
	s, err := NewSummarizer("label", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range summaryRows() {
		if r.ExactVerdict == "" && r.ExactError == "" && r.PassiveVerdict == "" {
			continue
		}
		r.ExactVerdict, r.ExactIWSegments, r.ExactError, r.ExactOutcomes, r.ExactRetry = "", nil, "", nil, ""
		s.Add(r)
	}
	sum := s.Summary()
	if sum.Exact != nil {
		t.Fatalf("exact: %+v", sum.Exact)
	}
	groups := map[string]GroupSummary{}
	for _, g := range sum.Groups {
		groups[g.Name] = g
		if g.Method != MethodPageLoad {
			t.Errorf("%s: method %q, want %q", g.Name, g.Method, MethodPageLoad)
		}
	}
	// cdn-a's three rows had page loads reading 10, 10 and 12-16; cdn-b's
	// first two 12-16 and ≥ 4, the others none.
	if a := groups["cdn-a"]; a.Answered != 3 || len(a.IW) != 2 || a.IW[0].Text() != "10" || a.IW[0].Count != 2 {
		t.Errorf("cdn-a: %+v", a)
	}
	if b := groups["cdn-b"]; b.Answered != 2 || b.Rows != 4 {
		t.Errorf("cdn-b: %+v", b)
	}
	var text bytes.Buffer
	if err := WriteSummaryText(&text, sum); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if !strings.Contains(out, "IW segments (page load)") || !strings.Contains(out, "3 (100%)") || strings.Contains(out, "the exact measurement's readings") {
		t.Errorf("the by-label table without the exact method:\n%s", out)
	}
}
