package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/pageload"
)

// TestProbeBrowserFlags: the flags of a browser page load are refused where they
// mean nothing, before any work.
func TestProbeBrowserFlags(t *testing.T) {
	for _, args := range [][]string{
		{"probe", "--browser"},
		{"probe", "--browser", "--runs", "3", "https://example.com/"},
		{"probe", "--browser", "--exact", "https://example.com/"},
		{"probe", "--browser", "--tls", "1.2", "https://example.com/"},
		{"probe", "--har", "x.har", "https://example.com/"},
		{"probe", "--wait", "2s", "https://example.com/"},
		{"probe", "--browser", "--wait", "-1s", "https://example.com/"},
		{"lab", "page", "--page", "css=20KB"},
		{"lab", "page", "--iw", "0"},
		{"lab", "page", "--server", "caddy"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d (%s)", strings.Join(args, " "), code, exitUsage, errOut)
		}
	}
}

// TestProbeBrowserCommand runs probe --browser as a user would, from a lab
// client namespace against the built-in server's test page (names by --resolve,
// its certificate accepted with -k): the page load's JSON follows its schema,
// every file of the page is on a connection, the HAR opens with an entry per
// request, and nothing of Chromium is left behind.
func TestProbeBrowserCommand(t *testing.T) {
	testroot.Require(t, "network namespaces, a live capture and Chromium as root")
	if _, err := os.Stat(browser.DefaultChromium); err != nil {
		t.Skipf("%s is missing (Debian package chromium)", browser.DefaultChromium)
	}
	page, err := server.ParsePage("html=8KB,css@2=6KB,js=5KB,img=9KB")
	if err != nil {
		t.Fatal(err)
	}
	s := startSurveyLab(t, labserver.Config{RTT: 40 * time.Millisecond, IW: 10, TLSVersion: "1.3", HTTP2: true, Page: &page, Keys: surveyKeys})
	dir := t.TempDir()
	harPath := filepath.Join(dir, "load.har")
	args := []string{"probe", "--browser", "--json", "-k", "--netns", s.Netns, "--har", harPath, "--wait", "200ms"}
	for hostPort, addr := range s.Resolve() {
		args = append(args, "--resolve", hostPort+":"+addr.String())
	}
	code, out, errOut := runCLI(t, append(args, s.PageURL())...)
	if code != exitOK {
		t.Fatalf("probe --browser: exit %d: %s", code, errOut)
	}
	checkSchema(t, "pageload", "probe --browser --json", out)
	var p pageload.Page
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	want := []string{server.PageIndexPath}
	for i := range s.Page.Resources {
		want = append(want, s.Page.ResourcePath(i))
	}
	for _, path := range want {
		found := false
		for _, r := range p.Requests {
			found = found || (r.Path == path && r.Connection > 0 && r.Status == 200 && len(r.Rounds) > 0)
		}
		if !found {
			t.Errorf("%s: not found on a connection with its rounds", path)
		}
	}
	if p.Source != pageload.SourceChromium || !strings.HasPrefix(p.Browser, "Chrome") || p.CriticalPath.RoundTrips == 0 {
		t.Errorf("source %q, browser %q, critical path %d round trips", p.Source, p.Browser, p.CriticalPath.RoundTrips)
	}
	h, err := har.ReadFile(harPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Log.Entries) != len(p.Requests) {
		t.Errorf("the HAR has %d entries, the page load %d requests", len(h.Log.Entries), len(p.Requests))
	}
	// This process's Chromium profiles are slowstart-PID-browser-N (other tests may
	// run their own Chromium at the same time).
	if out, err := exec.Command("pgrep", "-f", "--", fmt.Sprintf("--user-data-dir=%s/slowstart-%d-browser-", os.TempDir(), os.Getpid())).Output(); err == nil && len(out) > 0 {
		t.Errorf("Chromium processes left behind: %s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("slowstart-%d-browser-*", os.Getpid()))); len(left) > 0 {
		t.Errorf("Chromium's profiles left behind: %v", left)
	}
}
