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

// omittable are the keys JSON leaves out when empty (omitempty in Row's tags).
func omittable(name string) bool {
	rt := reflect.TypeFor[Row]()
	for i := range rt.NumField() {
		tag := rt.Field(i).Tag.Get("json")
		if key, opts, _ := strings.Cut(tag, ","); key == name {
			return strings.Contains(opts, "omitempty")
		}
	}
	return false
}
