package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/testroot"
)

// TestErrorStatusSameEverywhere: a page that answers 404 is handled the same way
// by probe, survey and watch: measured, its status shown, a warning, and not
// counted as a success.
func TestErrorStatusSameEverywhere(t *testing.T) {
	testroot.Require(t, "live captures on loopback")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			w.WriteHeader(http.StatusNotFound)
		}
		fmt.Fprint(w, strings.Repeat("body ", 2000))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	code, out, errOut := runCLI(t, "probe", base+"/missing")
	if code != exitFailure || !strings.Contains(out, "→ 404") || !strings.Contains(errOut, "HTTP status 404") || !strings.Contains(out, "Initial window") {
		t.Errorf("probe: exit %d, stdout %q, stderr %q; want 1, the measured 404 and a warning", code, out, errOut)
	}

	list := writeSurveyList(t, "ok "+base+"/ok", "missing "+base+"/missing")
	code, out, errOut = runCLI(t, "survey", "--no-exact", "--json", list)
	var doc struct {
		Failed int `json:"failed"`
		Rows   []struct {
			Label      string `json:"label"`
			Status     *int   `json:"status"`
			RoundTrips *int   `json:"round_trips"`
			Error      string `json:"error"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("survey JSON: %v\n%s", err, out)
	}
	if code != exitFailure || doc.Failed != 1 || len(doc.Rows) != 2 {
		t.Fatalf("survey: exit %d, %d failed of %d rows; stderr %q", code, doc.Failed, len(doc.Rows), errOut)
	}
	missing := doc.Rows[1]
	if missing.Status == nil || *missing.Status != 404 || missing.RoundTrips == nil || !strings.Contains(missing.Error, "HTTP status 404") {
		t.Errorf("survey's 404 row: %+v", missing)
	}
	if doc.Rows[0].Error != "" {
		t.Errorf("survey's 200 row has an error: %q", doc.Rows[0].Error)
	}

	store := filepath.Join(t.TempDir(), "w.db")
	code, out, errOut = runCLI(t, "watch", base+"/missing", "--store", store, "--runs", "1", "--every", "1s")
	if code != exitOK || !strings.Contains(out, "HTTP 404") || !strings.Contains(out, "error: ") || !strings.Contains(out, "last byte") {
		t.Errorf("watch: exit %d, stdout %q, stderr %q; want the measured 404 with its error", code, out, errOut)
	}
	code, out, _ = runCLI(t, "watch", "--store", store, "--list", "--json")
	if code != exitOK || !strings.Contains(out, `"status": 404`) || !strings.Contains(out, "HTTP status 404") {
		t.Errorf("watch --list: exit %d\n%s", code, out)
	}
}
