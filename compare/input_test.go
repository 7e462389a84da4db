package compare

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/report"
)

// labRows makes rows as a sweep writes them (the real writers, made-up numbers:
// the lab itself runs in the command's tests).
func labRows() []lab.Row {
	var rows []lab.Row
	for _, iw := range []int{3, 10} {
		s := lab.Spec{RTTNs: 150e6, IW: iw, SizeBytes: 60000}
		for trial := 1; trial <= 4; trial++ {
			r := lab.NewRow(s, lab.TrialResult{Trial: trial, FCTUserMs: float64(1000/iw + trial), FCTPaperMs: float64(500/iw + trial)})
			if trial == 4 {
				r.Error = "connection refused"
			}
			rows = append(rows, r)
		}
	}
	return rows
}

func TestLoadLabFormats(t *testing.T) {
	dir := t.TempDir()
	rows := labRows()
	jsonl := filepath.Join(dir, "results.jsonl")
	w, err := lab.OpenJSONL(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// An interrupted sweep leaves a cut last line.
	f, _ := os.OpenFile(jsonl, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"point":"rtt150-iw3-size60000","iw":3,"tri`)
	f.Close()
	var csvBuf bytes.Buffer
	if err := lab.WriteCSV(&csvBuf, rows); err != nil {
		t.Fatal(err)
	}
	csvPath := filepath.Join(dir, "results.csv")
	os.WriteFile(csvPath, csvBuf.Bytes(), 0o644)
	runJSON, _ := json.MarshalIndent(map[string]any{"summary": map[string]any{"point": "x"}, "trials": rows[:4]}, "", "  ")
	runPath := filepath.Join(dir, "run.json")
	os.WriteFile(runPath, runJSON, 0o644)

	for _, path := range []string{jsonl, csvPath} {
		s, err := Load(path+"@iw=3", "")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if s.Metric != "fct_user" || len(s.Values) != 3 || s.Values[0] != 334 || s.Skipped != 1 {
			t.Errorf("%s@iw=3: %s %v skipped %d", path, s.Metric, s.Values, s.Skipped)
		}
		s, err = Load(path+"@iw=10,rtt_ms=150", "fct-paper")
		if err != nil || s.Metric != "fct_paper" || len(s.Values) != 3 || s.Values[2] != 53 {
			t.Errorf("%s@iw=10 fct_paper: %+v %v", path, s, err)
		}
		if _, err := Load(path, ""); err == nil || !strings.Contains(err.Error(), "2 lab points") {
			t.Errorf("%s without a filter: %v", path, err)
		}
	}
	s, err := Load(runPath, "fct")
	if err != nil || s.Kind != KindLab || len(s.Values) != 3 {
		t.Errorf("lab run --json: %+v %v", s, err)
	}
}

func TestLoadProbeReports(t *testing.T) {
	ms := func(v float64) *float64 { return &v }
	conn := func(run, hop int, last float64) report.Connection {
		return report.Connection{HandshakeRTTMs: ms(100), RoundTrips: report.RoundTrips{Total: 5},
			InitialWindow: &report.InitialWindow{Segments: 10, Verdict: report.VerdictExact},
			ClientTiming:  &report.ClientTiming{Run: run, Hop: hop, URL: "https://example.com/", FirstByteAtMs: last / 2, LastByteAtMs: last, TLSMs: ms(90)}}
	}
	rep := &report.Report{Schema: report.Schema, Connections: []report.Connection{
		conn(1, 1, 50), conn(1, 2, 700), // a redirect, then the page
		conn(2, 1, 40), conn(2, 2, 650),
		conn(3, 1, 45), conn(3, 2, 690),
	}, Runs: &report.RunSummary{Runs: 3}}
	data := reportJSON(t, rep)
	s, err := Parse(data, "probe.json", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindProbe || s.Metric != "last_byte" || len(s.Values) != 3 || s.Values[0] != 700 || s.Values[1] != 650 {
		t.Errorf("%+v", s)
	}
	for metric, want := range map[string]float64{"first_byte": 350, "tls": 90, "handshake_rtt": 100, "rounds": 5, "iw": 10, "ttfb": 350} {
		s, err := Parse(data, "probe.json", metric, nil)
		if err != nil || len(s.Values) != 3 || s.Values[0] != want {
			t.Errorf("%s: %+v %v", metric, s, err)
		}
	}
	// A Report from a capture has no client timing.
	rep.Connections[0].ClientTiming = nil
	rep.Connections = rep.Connections[:1]
	if _, err := Parse(reportJSON(t, rep), "a.json", "", nil); err == nil || !strings.Contains(err.Error(), "no client timings") {
		t.Errorf("capture Report: %v", err)
	}
}

// FuzzParse: no input makes the parser panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schema":"slowstart.report/v1","connections":[{"client_timing":{"run":1,"hop":1,"last_byte_at_ms":5}}]}`))
	f.Add([]byte(`{"point":"p","iw":3,"fct_user_ms":4}` + "\n" + `{"point":"p","iw":3,"fct_user_ms":5}`))
	f.Add([]byte("point,iw,fct_user_ms,error\np,3,5,\n"))
	f.Add([]byte(`{"summary":{},"trials":[{"point":"p","fct_user_ms":1}]}`))
	f.Add([]byte(`[[[{"point":"x"}]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []string{"", "first_byte", "iw"} {
			s, err := Parse(data, "fuzz", m, nil)
			if err == nil && s == nil {
				t.Fatal("no sample and no error")
			}
		}
	})
}

// TestProbeIWOnlyExact: the iw metric takes a run's window only when its verdict
// is exact; a bound, a range or an ambiguous reading is left out and counted.
func TestProbeIWOnlyExact(t *testing.T) {
	conn := func(run int, iw report.InitialWindow) report.Connection {
		return report.Connection{InitialWindow: &iw,
			ClientTiming: &report.ClientTiming{Run: run, Hop: 1, URL: "https://example.com/", Status: 200, LastByteAtMs: 100}}
	}
	rep := &report.Report{Schema: report.Schema, Connections: []report.Connection{
		conn(1, report.InitialWindow{Segments: 10, Verdict: report.VerdictExact}),
		conn(2, report.InitialWindow{Segments: 4, Verdict: report.VerdictLowerBound}),
		conn(3, report.InitialWindow{Segments: 4, SegmentsMax: 10, Verdict: report.VerdictRange}),
		conn(4, report.InitialWindow{Segments: 7, Verdict: report.VerdictAmbiguous}),
		conn(5, report.InitialWindow{Segments: 12, Verdict: report.VerdictExact}),
	}}
	data := reportJSON(t, rep)
	s, err := Parse(data, "probe.json", "iw", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Values) != 2 || s.Values[0] != 10 || s.Values[1] != 12 || s.Skipped != 3 {
		t.Errorf("values %v, skipped %d: want [10 12] and 3 left out", s.Values, s.Skipped)
	}
}

// reportJSON renders rep as the JSON a probe or analyze writes.
func reportJSON(t *testing.T, rep *report.Report) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
