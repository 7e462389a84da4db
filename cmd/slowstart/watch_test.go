package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/watch"
)

// execWatch runs the watch command with args under ctx (cancelling ctx is what
// Ctrl-C does to the command) and returns its output and error.
func execWatch(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := newWatchCommand()
	cmd.SetArgs(args)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func exitCodeOf(err error) int {
	if err != nil && !fault.Marked(err) {
		return exitFailure
	}
	return exitCode(err)
}

func needRootForTest(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces and a live capture")
}

// startWatchLab starts an emulated server over TLS 1.3 (RTT 40 ms, IW 2) that
// the test removes when it ends.
func startWatchLab(t *testing.T) *labserver.Server {
	t.Helper()
	t.Cleanup(func() { netlab.CloseAll() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := labserver.Start(ctx, labserver.Config{RTT: 40 * time.Millisecond, IW: 2, TLSVersion: "1.3"})
	if err != nil {
		t.Fatalf("starting the lab server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the lab server: %v", err)
		}
	})
	return srv
}

// TestWatchCommand watches a lab server through the command line (with --resolve,
// --netns and -k, as a user reaches a server by address with a self-signed
// certificate), --every 200ms --count 3; then lists the store; then watches
// without --count, reads the metrics endpoint while it runs, and stops it as
// Ctrl-C does.
func TestWatchCommand(t *testing.T) {
	needRootForTest(t)
	srv := startWatchLab(t)
	store := filepath.Join(t.TempDir(), "watch.db")
	url := srv.URL("/bytes/50000")
	resolve := fmt.Sprintf("%s:%d:%s", labserver.ServerName, srv.Addr.Port(), srv.Addr.Addr())
	common := []string{url, "--store", store, "--netns", srv.Netns, "--resolve", resolve, "-k", "--every", "200ms"}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := execWatch(ctx, append(common, "--runs", "3")...)
	if err != nil {
		t.Fatalf("watch --count 3: %v (stderr %q)", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines of output, want 3:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if !strings.Contains(l, "IW 2 (exact)") || strings.Contains(l, "error") {
			t.Errorf("probe line %q: want IW 2 (exact) and no error", l)
		}
	}
	if !strings.Contains(errOut, "3 probes stored") {
		t.Errorf("stderr %q", errOut)
	}

	out, _, err = execWatch(ctx, "--store", store, "--list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Schema string      `json:"schema"`
		Rows   []watch.Row `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("--list --json is not JSON: %v\n%s", err, out)
	}
	if len(listed.Rows) != 3 {
		t.Fatalf("--list --json: %d rows, want 3", len(listed.Rows))
	}
	for _, r := range listed.Rows {
		if r.Error != "" || r.URL != url || r.TLSMs == nil || *r.TLSMs < 40 || r.LastByteMs == nil || r.BodyBytes == nil || *r.BodyBytes != 50000 {
			t.Errorf("stored row %+v", r)
		}
	}
	// The same rows, read with plain SQL as another tool would.
	db, err := sql.Open("sqlite", store)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var lastByte float64
	if err := db.QueryRow("SELECT count(*), max(last_byte_ms) FROM probes WHERE url = ? AND error = ''", url).Scan(&n, &lastByte); err != nil || n != 3 || lastByte < 4*40 {
		t.Errorf("SQL: %d rows, max last byte %v ms, %v", n, lastByte, err)
	}
	db.Close()
	out, _, err = execWatch(ctx, "--store", store, "--list")
	if err != nil || strings.Count(out, url) != 3 || !strings.Contains(out, "exact") {
		t.Errorf("--list: %v\n%s", err, out)
	}

	// Without --count, with metrics; stopped by cancelling its context.
	port := freePort(t)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		o, e, err := execWatch(runCtx, append(common, "--metrics-listen", "127.0.0.1:"+port)...)
		done <- result{o, e, err}
	}()
	metricsURL := "http://127.0.0.1:" + port + "/metrics"
	label := fmt.Sprintf("{url=%q}", url)
	var scraped map[string]float64
	deadline := time.Now().Add(time.Minute)
	for {
		scraped = scrapeURL(metricsURL)
		if scraped["slowstart_watch_probes_total"+label] >= 2 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the watch ended by itself: %v (stderr %q)", r.err, r.errOut)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics endpoint never showed 2 probes: %v", scraped)
		}
	}
	stop()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not stop when its context was cancelled")
	}
	if exitCodeOf(r.err) != exitInterrupted || !strings.Contains(r.err.Error(), "probes stored in "+store) {
		t.Fatalf("stopping: %v, stderr %q", r.err, r.errOut)
	}
	if scraped["slowstart_watch_errors_total"+label] != 0 || scraped["slowstart_watch_initial_window_segments"+label] != 2 {
		t.Errorf("metrics: %v", scraped)
	}
	// The histogram holds every probe made before the scrape.
	count := scraped["slowstart_watch_last_byte_seconds_count"+label]
	lb := scraped["slowstart_watch_last_byte_seconds_sum"+label] / count
	if count != scraped["slowstart_watch_probes_total"+label] || lb < 4*0.040 || lb > 2 {
		t.Errorf("last byte histogram: %v probes, %v s on average", count, lb)
	}
	rows := listRows(t, store)
	probed := strings.Count(strings.TrimSpace(r.out), "\n") + 1
	if len(rows) != 3+probed || probed < 2 {
		t.Errorf("%d rows after the second watch printed %d probes; want %d", len(rows), probed, 3+probed)
	}
	// The interval is kept from start to start.
	for i := 4; i < len(rows); i++ {
		if gap := rows[i].Time.Sub(rows[i-1].Time); gap < 195*time.Millisecond {
			t.Errorf("rows %d and %d %v apart, want at least 200ms", i, i+1, gap)
		}
	}
	if _, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		t.Error("the metrics endpoint still listens after the watch ended")
	}

	// A server that refuses: every probe is stored with its error, and the watch
	// goes on to its count.
	refused := fmt.Sprintf("http://%s:81/", srv.Addr.Addr())
	out, errOut, err = execWatch(ctx, refused, "--store", store, "--netns", srv.Netns, "--every", "100ms", "--runs", "2")
	if err != nil {
		t.Fatalf("watching a closed port: %v (stderr %q)", err, errOut)
	}
	if strings.Count(out, "error: ") != 2 || !strings.Contains(out, "refused") {
		t.Errorf("watching a closed port printed:\n%s", out)
	}
	s, err := watch.OpenStore(store, true)
	if err != nil {
		t.Fatal(err)
	}
	failed, err := s.Rows(ctx, watch.Query{URL: refused})
	s.Close()
	if err != nil || len(failed) != 2 || failed[0].Error == "" || failed[0].LastByteMs != nil {
		t.Errorf("rows of the closed port: %+v, %v", failed, err)
	}

	// compare --store on the two watches of the page (the store holds two URLs now):
	// the first three rows against the rest.
	if len(rows) < 5 {
		return
	}
	split := rows[3].Time.Format(time.RFC3339Nano)
	cmp := newCompareCommand()
	var cmpOut, cmpErr bytes.Buffer
	cmp.SetOut(&cmpOut)
	cmp.SetErr(&cmpErr)
	cmp.SetArgs([]string{"--store", store, "--url", url, "--before", rows[0].Time.Format(time.RFC3339Nano) + ".." + split, "--after", split + "..", "--json"})
	if err := cmp.ExecuteContext(ctx); err != nil {
		t.Fatalf("compare --store: %v (stderr %q)", err, cmpErr.String())
	}
	var res struct {
		Before struct {
			N      int     `json:"n"`
			Median float64 `json:"median"`
		} `json:"before"`
		After struct {
			N      int     `json:"n"`
			Median float64 `json:"median"`
		} `json:"after"`
		Sentence string `json:"sentence"`
	}
	if err := json.Unmarshal(cmpOut.Bytes(), &res); err != nil {
		t.Fatalf("compare --store --json: %v\n%s", err, cmpOut.String())
	}
	lastBytes := func(rs []watch.Row) []float64 {
		var out []float64
		for _, r := range rs {
			out = append(out, *r.LastByteMs)
		}
		return out
	}
	wantBefore, wantAfter := median(lastBytes(rows[:3])), median(lastBytes(rows[3:]))
	if res.Before.N != 3 || res.After.N != len(rows)-3 || res.Before.Median != wantBefore || res.After.Median != wantAfter {
		t.Errorf("compare --store: before n=%d median %v, after n=%d median %v; want n=3 median %v, n=%d median %v",
			res.Before.N, res.Before.Median, res.After.N, res.After.Median, wantBefore, len(rows)-3, wantAfter)
	}
	t.Logf("compare --store: %s", res.Sentence)
}

// median of xs by the usual rule (the mean of the middle two of an even count).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func listRows(t *testing.T, store string) []watch.Row {
	t.Helper()
	s, err := watch.OpenStore(store, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Rows(context.Background(), watch.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// scrapeURL reads a Prometheus text endpoint into "name{labels}" -> value; empty
// when it can't be reached.
func scrapeURL(url string) map[string]float64 {
	out := map[string]float64{}
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func TestWatchCommandErrors(t *testing.T) {
	dir := t.TempDir()
	notStore := filepath.Join(dir, "notes.db")
	db, err := sql.Open("sqlite", notStore)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (text TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	store := filepath.Join(dir, "w.db")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no store", []string{"http://a.example/"}, exitUsage, "--store"},
		{"no URL", []string{"--store", store}, exitUsage, "URL"},
		{"zero interval", []string{"http://a.example/", "--store", store, "--every", "0s"}, exitUsage, "--every"},
		{"bad resolve", []string{"http://a.example/", "--store", store, "--resolve", "nonsense"}, exitUsage, "--resolve"},
		{"list a missing store", []string{"--store", filepath.Join(dir, "missing.db"), "--list"}, exitFile, "no such file"},
		{"list another database", []string{"--store", notStore, "--list"}, exitFile, "not a watch store"},
		{"watch into another database", []string{"http://a.example/", "--store", notStore}, exitFile, "not a watch store"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execWatch(context.Background(), tc.args...)
			if code := exitCodeOf(err); code != tc.code {
				t.Errorf("exit %d, want %d (%v)", code, tc.code, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v lacks %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(store); err == nil {
		t.Error("a store was made by a command that failed on its arguments")
	}
}
