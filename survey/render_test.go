package survey

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleResult is a survey of three rows: a TLS site measured both ways, a
// cleartext site with lower bounds, and a failure.
func sampleResult() *Result {
	rtt := 130.25
	return &Result{Schema: Schema, Tool: "slowstart test", StartedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Settings: Settings{Concurrency: 4, Exact: true, Passive: true, ExactRuns: 3, MSS: 64, TimeoutMs: 30000},
		Total:    3, Failed: 1,
		Rows: []Row{
			{Index: 1, Line: 2, Label: "provider-a", URL: "https://a.example/",
				ExactPhase: "tls", ExactVerdict: "exact", ExactIWSegments: ptr(10), ExactIWBytes: ptr(520),
				ExactOutcomes: []string{"success", "success", "success"}, ExactReason: "3 of 3 runs agree",
				PassiveVerdict: "lower_bound", PassiveIWSegments: ptr(4), FirstRoundBytes: ptr(14480), TLSFlightBytes: ptr(4321),
				TLSRoundTrips: ptr(2), RoundTrips: ptr(6), HandshakeRTTMs: &rtt, MSS: ptr(1448), Status: ptr(200),
				Protocol: "HTTP/2", BodyBytes: ptr(int64(160000)), LastByteMs: ptr(812.5), DurationMs: 2500},
			{Index: 2, Line: 3, URL: "http://b.example/x",
				ExactPhase: "http", ExactVerdict: "lower_bound", ExactIWSegments: ptr(7), ExactIWBytes: ptr(364),
				ExactOutcomes:  []string{"too_short"},
				PassiveVerdict: "exact", PassiveIWSegments: ptr(10), FirstRoundBytes: ptr(14480),
				TLSRoundTrips: ptr(0), RoundTrips: ptr(3), MSS: ptr(1448), Status: ptr(301), FinalURL: "https://b.example/x", DurationMs: 900},
			{Index: 3, Line: 5, Label: "broken, \"quoted\"", URL: "https://c.example/",
				ExactError: "look up c.example: no such host", PassiveError: "the name c.example does not resolve",
				Error:    "exact: look up c.example: no such host; passive: the name c.example does not resolve",
				ExactErr: errors.New("x"), DurationMs: 12},
		}}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, sampleResult()); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v\n%s", err, b.String())
	}
	if len(records) != 4 {
		t.Fatalf("%d records, want a header and 3 rows", len(records))
	}
	if !reflect.DeepEqual(records[0], CSVHeader()) {
		t.Errorf("header %v", records[0])
	}
	col := map[string]int{}
	for i, name := range records[0] {
		col[name] = i
	}
	cell := func(row int, name string) string {
		i, ok := col[name]
		if !ok {
			t.Fatalf("no column %q", name)
		}
		return records[row][i]
	}
	for _, c := range []struct {
		row        int
		name, want string
	}{
		{1, "label", "provider-a"},
		{1, "exact_iw_segments", "10"},
		{1, "exact_iw_bytes", "520"},
		{1, "exact_verdict", "exact"},
		{1, "exact_outcomes", "success success success"},
		{1, "passive_verdict", "lower_bound"},
		{1, "first_round_bytes", "14480"},
		{1, "tls_flight_bytes", "4321"},
		{1, "round_trips", "6"},
		{1, "handshake_rtt_ms", "130.25"},
		{1, "body_bytes", "160000"},
		{1, "error", ""},
		{2, "label", ""},
		{2, "tls_flight_bytes", ""}, // unknown: empty, not 0
		{2, "tls_round_trips", "0"},
		{2, "handshake_rtt_ms", ""},
		{2, "final_url", "https://b.example/x"},
		{2, "status", "301"},
		{3, "label", "broken, \"quoted\""},
		{3, "exact_iw_segments", ""},
		{3, "error", "exact: look up c.example: no such host; passive: the name c.example does not resolve"},
		{3, "line", "5"},
	} {
		if got := cell(c.row, c.name); got != c.want {
			t.Errorf("row %d %s = %q, want %q", c.row, c.name, got, c.want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleResult()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema   string           `json:"schema"`
		Total    int              `json:"total"`
		Failed   int              `json:"failed"`
		Settings map[string]any   `json:"settings"`
		Rows     []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("the JSON does not parse: %v", err)
	}
	if doc.Schema != "slowstart.survey/v1" || doc.Total != 3 || doc.Failed != 1 || len(doc.Rows) != 3 {
		t.Fatalf("schema %q, total %d, failed %d, %d rows", doc.Schema, doc.Total, doc.Failed, len(doc.Rows))
	}
	if doc.Settings["mss"] != 64.0 || doc.Settings["exact"] != true {
		t.Errorf("settings %v", doc.Settings)
	}
	// Every CSV column is a key of every row, with the same name.
	for _, name := range CSVHeader() {
		for i, row := range doc.Rows {
			if _, ok := row[name]; !ok && !omittable(name) {
				t.Errorf("row %d has no key %q", i+1, name)
			}
		}
	}
	r1, r2, r3 := doc.Rows[0], doc.Rows[1], doc.Rows[2]
	if r1["exact_iw_segments"] != 10.0 || r1["handshake_rtt_ms"] != 130.25 || r1["first_round_bytes"] != 14480.0 {
		t.Errorf("row 1: %v", r1)
	}
	if v, ok := r2["tls_flight_bytes"]; !ok || v != nil {
		t.Errorf("row 2 tls_flight_bytes = %v (present %v), want null", v, ok)
	}
	if r3["error"] == "" || r3["exact_iw_segments"] != nil {
		t.Errorf("row 3: %v", r3)
	}
	if _, ok := r3["ExactErr"]; ok {
		t.Error("the Go error is rendered")
	}
}

// omittable are the string keys JSON leaves out when empty.
func omittable(name string) bool {
	switch name {
	case "line", "exact_phase", "exact_verdict", "exact_outcomes", "passive_verdict", "protocol", "final_url", "error":
		return true
	}
	return false
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	if err := WriteText(&b, sampleResult()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "LABEL") || !strings.Contains(lines[0], "IW (EXACT)") || !strings.Contains(lines[0], "ERROR") {
		t.Errorf("header %q", lines[0])
	}
	for _, c := range []struct {
		line  int
		cells []string
	}{
		{1, []string{"provider-a", "https://a.example/", "10", "520 B", "exact", "≥ 4", "14.5 KB", "4.3 KB", "6 (2)", "130.2 ms"}},
		{2, []string{"-", "http://b.example/x", "≥ 7", "364 B", "lower_bound", "10", "3"}},
		{3, []string{"broken", "https://c.example/", "exact: look up c.example"}},
	} {
		for _, cell := range c.cells {
			if !strings.Contains(lines[c.line], cell) {
				t.Errorf("line %d lacks %q: %q", c.line, cell, lines[c.line])
			}
		}
	}
	// The columns line up: every row's URL starts where the header's does.
	at := strings.Index(lines[0], "URL")
	for i := 1; i <= 3; i++ {
		if got := strings.Index(lines[i], "://") - len("https"); got != at && got+1 != at {
			t.Errorf("line %d: URL at %d, header at %d", i, got, at)
		}
	}
	if !strings.Contains(out, "3 URLs measured, 1 with errors.") {
		t.Errorf("no summary line:\n%s", out)
	}

	// Without the exact measurement, its columns are gone.
	res := sampleResult()
	res.Settings.Exact = false
	b.Reset()
	if err := WriteText(&b, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "IW (EXACT)") || !strings.Contains(b.String(), "IW (PAGE LOAD)") {
		t.Errorf("--no-exact table:\n%s", b.String())
	}
}

// TestWriteTextEscapesControls: a label, URL or error holding control characters
// (a list's, a server's) reaches the terminal as visible escapes, never as
// sequences that move the cursor or fake a line; CSV keeps the data as it was.
func TestWriteTextEscapesControls(t *testing.T) {
	res := sampleResult()
	res.Rows[0].Label = "evil\x1b[2J\x1b[H"
	res.Rows[0].Error = "passive: server said \x1b]0;pwned\x07\nIW 100"
	var b bytes.Buffer
	if err := WriteText(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, c := range []string{"\x1b", "\x07", "\nIW 100"} {
		if strings.Contains(out, c) {
			t.Errorf("the table holds %q raw:\n%s", c, out)
		}
	}
	if !strings.Contains(out, `evil\x1b[2J\x1b[H`) || !strings.Contains(out, `\x1b]0;pwned\x07\nIW 100`) {
		t.Errorf("the escapes are not shown:\n%s", out)
	}
	b.Reset()
	if err := WriteCSV(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "evil\x1b[2J") {
		t.Errorf("CSV does not keep the label as it was")
	}
}
