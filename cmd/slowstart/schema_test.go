package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/slowstart/slowstart/demo"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/labserver"
)

// schemaDir holds the JSON Schema of every --json format.
const schemaDir = "../../docs/schemas"

// schemaBase is the base of the schemas' $id.
const schemaBase = "https://github.com/slowstart/slowstart/docs/schemas/"

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	schemasErr  error
)

// loadSchemas compiles every schema in schemaDir, by format name ("report").
func loadSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	schemasOnce.Do(func() {
		files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
		if err != nil || len(files) == 0 {
			schemasErr = fmt.Errorf("no schemas in %s: %v", schemaDir, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		names := []string{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				schemasErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
			if err != nil {
				schemasErr = fmt.Errorf("%s: %w", f, err)
				return
			}
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			id, _ := doc.(map[string]any)["$id"].(string)
			if id != schemaBase+name+".json" {
				schemasErr = fmt.Errorf("%s: $id %q, want %q", f, id, schemaBase+name+".json")
				return
			}
			if err := c.AddResource(id, doc); err != nil {
				schemasErr = err
				return
			}
			names = append(names, name)
		}
		schemas = map[string]*jsonschema.Schema{}
		for _, name := range names {
			s, err := c.Compile(schemaBase + name + ".json")
			if err != nil {
				schemasErr = fmt.Errorf("compiling %s.json: %w", name, err)
				return
			}
			schemas[name] = s
		}
	})
	if schemasErr != nil {
		t.Fatal(schemasErr)
	}
	return schemas
}

// checkSchema validates a verb's JSON output against its format's schema, and
// checks that it names the format in its schema field.
func checkSchema(t *testing.T, format, what, out string) {
	t.Helper()
	s, ok := loadSchemas(t)[format]
	if !ok {
		t.Fatalf("no schema docs/schemas/%s.json", format)
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal([]byte(out), &head); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
	}
	if head.Schema != "slowstart."+format+"/v1" {
		t.Errorf("%s: schema field %q, want slowstart.%s/v1", what, head.Schema, format)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s does not follow docs/schemas/%s.json:\n%v", what, format, err)
	}
}

// TestSchemasRejectWrongOutputs: the schemas can fail: a field renamed, a wrong
// type, a missing schema field.
func TestSchemasRejectWrongOutputs(t *testing.T) {
	s := loadSchemas(t)
	code, out, _ := runCLI(t, "model", "--size", "42KB", "--rtt", "70ms", "--iw", "10", "--json")
	if code != exitOK {
		t.Fatal(code)
	}
	for name, broken := range map[string]string{
		"renamed field": strings.Replace(out, `"rtt_ms"`, `"rtt"`, 1),
		"wrong type":    strings.Replace(out, `"iw": 10`, `"iw": "10"`, 1),
		"no schema":     strings.Replace(out, `"schema": "slowstart.model/v1",`, ``, 1),
		"other schema":  strings.Replace(out, `slowstart.model/v1`, `slowstart.model/v2`, 1),
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(broken))
		if err != nil {
			t.Fatal(err)
		}
		if s["model"].Validate(inst) == nil {
			t.Errorf("%s: the model schema accepts a broken output", name)
		}
	}
}

// TestJSONOutputsFollowTheirSchemas runs every verb with --json as a user would
// and validates what it prints against docs/schemas. The formats that need no
// privileges run everywhere; the others as root.
func TestJSONOutputsFollowTheirSchemas(t *testing.T) {
	covered := map[string]bool{}
	check := func(format, what string, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, args...)
		if code != exitOK && code != exitFailure {
			t.Fatalf("%s: exit %d: %s", what, code, errOut)
		}
		checkSchema(t, format, what, out)
		covered[format] = true
		return out
	}
	check("report", "analyze --json", "analyze", "--json", iw3Capture)
	check("report", "analyze --json of two files", "analyze", "--json", iw3Capture, "../../testdata/captures/rtt150-iw10-h1-100000.client.pcap")
	code, out, errOut := runCLI(t, "analyze", "--jsonl", "../../testdata/realworld/pp__tls2.pcap")
	if code != exitOK {
		t.Fatalf("analyze --jsonl: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 100 {
		t.Fatalf("analyze --jsonl printed %d lines, want one per connection", len(lines))
	}
	for i, line := range lines {
		checkSchema(t, "connection", fmt.Sprintf("analyze --jsonl line %d", i+1), line)
	}
	covered["connection"] = true
	check("pageload", "analyze --har --json", "analyze", "--json", "--har", browserCapture+".har", "--keylog", browserCapture+".keys", browserCapture+".pcap")
	check("model", "model --json", "model", "--size", "160KB", "--rtt", "130ms", "--rate", "15mbit", "--iw", "3,10,32", "--tls", "1.3", "--json")

	testroot.Require(t, "the other formats need namespaces, captures and nftables")
	dir := t.TempDir()

	// lab run, and compare of two lab runs.
	labOut := check("lab", "lab run --json", "lab", "run", "--rtt", "70ms", "--rate", "1.2mbit", "--iw", "10", "--size", "42KB", "--runs", "3", "--json")
	deepOut := check("lab", "lab run --queue 100p --json", "lab", "run", "--rtt", "70ms", "--rate", "1.2mbit", "--iw", "10", "--size", "42KB", "--runs", "3", "--queue", "100p", "--json")
	h3Out := check("lab", "lab run --http3 --json", "lab", "run", "--rtt", "40ms", "--rate", "10mbit", "--size", "60KB", "--runs", "1", "--http3", "--json")
	if !strings.Contains(h3Out, `"comparison"`) || !strings.Contains(h3Out, `"http3": true`) {
		t.Errorf("lab run --http3 --json has no comparison or no HTTP/3 trial:\n%s", h3Out)
	}
	before, after := filepath.Join(dir, "deep.json"), filepath.Join(dir, "shallow.json")
	if err := os.WriteFile(before, []byte(deepOut), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(after, []byte(labOut), 0o644); err != nil {
		t.Fatal(err)
	}
	check("compare", "compare --json of lab runs", "compare", "--json", before, after)

	// A server on loopback for probe, survey and watch.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 30000))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/page"
	probeOut := check("report", "probe --runs 2 --json", "probe", url, "--runs", "2", "--json")
	probePath := filepath.Join(dir, "probe.json")
	if err := os.WriteFile(probePath, []byte(probeOut), 0o644); err != nil {
		t.Fatal(err)
	}
	check("compare", "compare --json of probes", "compare", "--json", probePath, probePath)
	store := filepath.Join(dir, "w.db")
	if code, _, errOut := runCLI(t, "watch", url, "--store", store, "--runs", "2", "--every", "10ms", "--label", "page"); code != exitOK {
		t.Fatalf("watch: exit %d: %s", code, errOut)
	}
	check("watch", "watch --list --json", "watch", "--store", store, "--list", "--json")

	// field, following the loopback server's port, and its store's reports.
	for format, outs := range fieldOutputs(t, ln.Addr().(*net.TCPAddr).Port, url) {
		for i, out := range outs {
			checkSchema(t, format, fmt.Sprintf("field's %s output %d", format, i+1), out)
		}
		covered[format] = true
	}

	// survey and probe --exact against an emulated server (the exact probe needs
	// a namespace of its own for its firewall).
	s := startSurveyLab(t, labserver.Config{RTT: 20 * time.Millisecond, IW: 10, TLSVersion: "1.3", Keys: surveyKeys})
	resolve := fmt.Sprintf("%s:%d:%s", labserver.ServerName, s.Addr.Port(), s.Addr.Addr())
	list := writeSurveyList(t, "lab "+s.URL("/bytes/100000"), "closed http://"+s.Addr.Addr().String()+":81/")
	check("survey", "survey --json", "survey", "--json", "--exact-runs", "1", "--insecure", "--netns", s.Netns, "--resolve", resolve, list)
	surveyStore := filepath.Join(dir, "survey.db")
	check("survey-summary", "survey --store --json", "survey", "--json", "--exact-runs", "1", "--insecure", "--netns", s.Netns, "--resolve", resolve, "--store", surveyStore, list)
	check("survey-summary", "survey report --json", "survey", "report", "--json", surveyStore)
	check("exact", "probe --exact --json", "probe", "--exact", "--exact-runs", "2", "--netns", s.Netns, "--resolve", resolve, "--json", s.URL("/bytes/100000"))

	// tune show, apply and revert in a namespace of the test's.
	ns := tuneNamespace(t)
	check("tune", "tune show --json", "tune", "show", "--netns", ns, "--json")
	check("tune", "tune apply --dry-run --json", "tune", "apply", "--netns", ns, "--initcwnd", "32", "--dry-run", "--json", "--backup-dir", dir)
	check("tune", "tune apply --json", "tune", "apply", "--netns", ns, "--initcwnd", "32", "--route", "all", "--json", "--backup-dir", dir)
	check("tune", "tune revert --json", "tune", "revert", "--netns", ns, "--json", "--backup-dir", dir)

	// The demo: one object labelled by IW with the exact readings, which view reads.
	demoOut := check("demo", "probe --json (the demo)", "probe", "--json")
	var parsed demo.Output
	if err := json.Unmarshal([]byte(demoOut), &parsed); err != nil {
		t.Fatal(err)
	}
	for i, iw := range []int{3, 10, 32} {
		if len(parsed.Columns) != 3 || parsed.Columns[i].IW != iw || parsed.Columns[i].Exact == nil || parsed.Columns[i].Report == nil {
			t.Fatalf("the demo's columns are not IW 3, 10, 32 each with a Report and an exact reading: %+v", parsed.Columns)
		}
	}
	demoPath := filepath.Join(dir, "demo.json")
	if err := os.WriteFile(demoPath, []byte(demoOut), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "demo.html")
	if code, _, errOut := runCLI(t, "view", "--html", page, demoPath); code != exitOK {
		t.Errorf("view of the demo's JSON: exit %d: %s", code, errOut)
	}

	for format := range loadSchemas(t) {
		if !covered[format] {
			t.Errorf("no real output was checked against docs/schemas/%s.json", format)
		}
	}
}
