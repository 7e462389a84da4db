//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/report"
)

// needRoot skips a test that needs root, except under CI=true, where it fails.
func liveNeedRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root (live capture) and CI runs as root")
	}
	t.Skip("needs root (live capture)")
}

// liveBuildBinary builds slowstart into a directory anyone may read and run.
func liveBuildBinary(t *testing.T) string {
	t.Helper()
	// Not t.TempDir: its parent is private to root.
	dir, err := os.MkdirTemp("", "slowstart-view-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "slowstart")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestViewLiveUsage(t *testing.T) {
	for _, args := range [][]string{
		{"view"},
		{"view", "--live", "lo", "x.pcap"},
		{"view", "--live", "lo", "--html", "x.html"},
		{"view", "--live", "lo", "--server", "not-an-address"},
		{"view", "--live", "lo", "--keep", "0"},
		{"view", iw3Capture, "--pcap", "x.pcap"},
		{"view", "--listen", "127.0.0.1:99999", iw3Capture},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "slowstart: ") {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, errOut)
		}
	}
}

// TestViewLiveExitCodes: an unknown interface is a usage error (2); capturing
// without CAP_NET_RAW is exit 4 with a message that says what is missing.
func TestViewLiveExitCodes(t *testing.T) {
	liveNeedRoot(t)
	code, _, errOut := runCLI(t, "view", "--live", "nosuchif0")
	if code != exitUsage || !strings.Contains(errOut, "no such network interface") {
		t.Errorf("unknown interface: exit %d, want %d; stderr %q", code, exitUsage, errOut)
	}

	bin := liveBuildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "view", "--live", "lo", "--listen", "127.0.0.1:0")
	// nobody, with no capabilities: as a user without the privilege would run it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitPermission {
		t.Fatalf("without CAP_NET_RAW: %v, want exit %d\n%s", err, exitPermission, out)
	}
	if !strings.Contains(string(out), "CAP_NET_RAW") {
		t.Errorf("without CAP_NET_RAW: the message does not say what is missing: %s", out)
	}
}

// liveLines collects a process's output lines and lets a test wait for one.
type liveLines struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func liveWatchLines(r io.Reader) *liveLines {
	w := &liveLines{added: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
			select {
			case w.added <- struct{}{}:
			default:
			}
		}
		close(w.added)
	}()
	return w
}

// wait returns the lines once pred holds for them, or fails after timeout.
func (w *liveLines) wait(t *testing.T, what string, timeout time.Duration, pred func([]string) bool) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		lines := append([]string(nil), w.lines...)
		w.mu.Unlock()
		if pred(lines) {
			return lines
		}
		select {
		case _, ok := <-w.added:
			if !ok {
				w.mu.Lock()
				lines = append([]string(nil), w.lines...)
				w.mu.Unlock()
				if pred(lines) {
					return lines
				}
				t.Fatalf("waiting for %s: the output ended:\n%s", what, strings.Join(lines, "\n"))
			}
		case <-deadline:
			t.Fatalf("waiting for %s: timed out after %v:\n%s", what, timeout, strings.Join(lines, "\n"))
		}
	}
}

func liveCountPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// liveReadEvents reads the live view's event stream until it has n connections.
func liveReadEvents(t *testing.T, url string, n int) []report.Connection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("api/events: Content-Type %q", ct)
	}
	byIndex := map[int]report.Connection{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	event := ""
	for len(byIndex) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "conn":
			var c report.Connection
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil {
				t.Fatalf("api/events: %v", err)
			}
			byIndex[c.Index] = c
		}
	}
	if len(byIndex) < n {
		t.Fatalf("api/events: %d connections, want %d (%v)", len(byIndex), n, sc.Err())
	}
	var out []report.Connection
	for _, c := range byIndex {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// TestViewLiveBrowser runs `view --live lo` against real HTTP traffic (curl and
// Go's client to Go's server on loopback), with the page open in headless
// Chromium: the page must show every connection made, with the rounds and IW
// that analyzing a pcap of the same traffic gives, and no console errors.
func TestViewLiveBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	liveNeedRoot(t)
	webDir, err := filepath.Abs(filepath.Join("..", "..", "web"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	case !liveFileExists(filepath.Join(webDir, "node_modules", "playwright-core", "package.json")):
		missing = "web/node_modules is missing (run: cd web && npm ci)"
	case !liveFileExists("/usr/bin/chromium"):
		missing = "/usr/bin/chromium is missing (apt-get install chromium)"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests can't run: %s", missing)
		}
		t.Skipf("browser tests skipped: %s", missing)
	}
	bin := liveBuildBinary(t)
	dir := t.TempDir()

	// The site: Go's HTTP server on loopback, one response large enough for
	// several rounds, one small.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("slowstart live view test body\n", 20000) // 600 KB
	site := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			fmt.Fprintln(w, "small")
			return
		}
		_, _ = io.WriteString(w, body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = site.Serve(ln) }()
	t.Cleanup(func() { site.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	siteURL := fmt.Sprintf("http://127.0.0.1:%d", port)

	pcap := filepath.Join(dir, "seen.pcap")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	view := exec.CommandContext(ctx, bin, "view", "--live", "lo", "--server", fmt.Sprintf("127.0.0.1:%d", port), "--listen", "127.0.0.1:0", "--pcap", pcap)
	viewOut, err := view.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var viewErr strings.Builder
	view.Stderr = &viewErr
	if err := view.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if view.ProcessState == nil {
			_ = view.Process.Kill()
			_ = view.Wait()
		}
	})
	lines := liveWatchLines(viewOut)
	first := lines.wait(t, "the view's URL", 30*time.Second, func(l []string) bool { return len(l) > 0 })
	i := strings.Index(first[0], "http://")
	if i < 0 {
		t.Fatalf("no URL in %q", first[0])
	}
	viewURL := strings.Fields(first[0][i:])[0]

	curl, _ := exec.LookPath("curl")
	fetch := func(path string, useCurl bool) {
		t.Helper()
		if useCurl && curl != "" {
			out, err := exec.CommandContext(ctx, curl, "-sS", "--max-time", "20", "-o", "/dev/null", siteURL+path).CombinedOutput()
			if err != nil {
				t.Fatalf("curl %s: %v %s", path, err, out)
			}
			return
		}
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
		res, err := client.Get(siteURL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	const prefix = "slowstart: connection #"

	// Two connections before the page opens, two while it is open.
	fetch("/big", true)
	fetch("/small", true)
	lines.wait(t, "2 connections reported", 30*time.Second, func(l []string) bool { return liveCountPrefix(l, prefix) >= 2 })

	config := filepath.Join(dir, "live.json")
	shownPath := filepath.Join(dir, "shown.json")
	data, _ := json.Marshal(map[string]any{
		"chromium": "/usr/bin/chromium", "artifacts": filepath.Join(webDir, "test", "artifacts"),
		"url": viewURL, "first": 2, "total": 4, "out": shownPath,
	})
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	browser := exec.CommandContext(ctx, node, filepath.Join("test", "live.mjs"), config)
	browser.Dir = webDir
	toBrowser, err := browser.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	browserOut, err := browser.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var browserErr strings.Builder
	browser.Stderr = &browserErr
	if err := browser.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if browser.ProcessState == nil {
			_ = browser.Process.Kill()
			_ = browser.Wait()
		}
	})
	script := liveWatchLines(browserOut)
	has := func(s string) func([]string) bool {
		return func(l []string) bool {
			for _, x := range l {
				if x == s {
					return true
				}
			}
			return false
		}
	}
	script.wait(t, "the page to show 2 connections", 60*time.Second, has("ready 2"))
	fetch("/big", false)
	fetch("/big", true)
	lines.wait(t, "4 connections reported", 30*time.Second, func(l []string) bool { return liveCountPrefix(l, prefix) >= 4 })
	fmt.Fprintln(toBrowser, "more")
	script.wait(t, "the page to show 4 connections", 60*time.Second, has("shown"))

	live := liveReadEvents(t, viewURL, 4)

	// Ctrl-C: a clean stop, exit 130 and one line, the pcap written.
	if err := view.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	waitErr := view.Wait()
	fmt.Fprintln(toBrowser, "stopped")
	browserWait := browser.Wait()
	t.Logf("test/live.mjs:\n%s%s", strings.Join(script.wait(t, "the browser checks", 10*time.Second, func([]string) bool { return true }), "\n"), browserErr.String())
	var exitErr *exec.ExitError
	if !errors.As(waitErr, &exitErr) || exitErr.ExitCode() != exitInterrupted || !strings.Contains(viewErr.String(), "slowstart: interrupted; wrote "+pcap) {
		t.Fatalf("view --live after Ctrl-C: %v, want exit %d and one line naming the pcap\n%s", waitErr, exitInterrupted, viewErr.String())
	}
	if browserWait != nil {
		t.Fatalf("browser checks failed: %v (screenshots in web/test/artifacts)", browserWait)
	}

	// The same packets, analyzed from the pcap as 'analyze' would.
	want, err := analysis.File(context.Background(), pcap, analysis.Options{Packets: true, Server: flow.ServerHint{Port: uint16(port)}, Tool: "slowstart " + version})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Connections) != 4 || len(live) != 4 {
		t.Fatalf("the pcap holds %d connections, the live view %d; 4 were made", len(want.Connections), len(live))
	}
	var shown []struct {
		Index  int    `json:"index"`
		Rounds int    `json:"rounds"`
		IW     string `json:"iw"`
	}
	data, err = os.ReadFile(shownPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &shown); err != nil || len(shown) != 4 {
		t.Fatalf("what the page showed: %v (%d connections)", err, len(shown))
	}
	for k, w := range want.Connections {
		got := live[k]
		// Compare as the page receives them: through JSON (nil and empty lists alike).
		var norm report.Connection
		if b, err := json.Marshal(w); err != nil || json.Unmarshal(b, &norm) != nil {
			t.Fatalf("connection %d: can't encode: %v", w.Index, err)
		}
		if !reflect.DeepEqual(got, norm) {
			t.Errorf("connection %d: the live view's analysis differs from the pcap's: live %d rounds, IW %+v; pcap %d rounds, IW %+v",
				w.Index, len(got.Rounds), got.InitialWindow, len(w.Rounds), w.InitialWindow)
		}
		s := shown[k]
		if s.Index != w.Index || s.Rounds != len(w.Rounds) {
			t.Errorf("connection %d: the page showed #%d with %d rounds, the pcap's analysis has %d", w.Index, s.Index, s.Rounds, len(w.Rounds))
		}
		// The page says the reading as the Report's own short form does: a number
		// where the verdict gives one, a dash where it gives none (ambiguous: a
		// loopback path's rounds can't be told apart).
		if iw := w.InitialWindow; iw != nil {
			want := "–"
			if report.Summary(&w).IW.Text() != "" {
				want = fmt.Sprint(iw.Segments)
			}
			if !strings.Contains(s.IW, want) {
				t.Errorf("connection %d: the page's IW %q, the pcap's analysis %s (%q)", w.Index, s.IW, iw.Short(), want)
			}
		}
		t.Logf("connection %d: %s → %s, %d rounds, IW %v, %d packets", w.Index, w.Client, w.Server, len(w.Rounds), w.InitialWindow, len(w.Packets))
	}
}

func liveFileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
