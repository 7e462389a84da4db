package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/report"
)

// TestLiveBrowser drives the live page from a Feed in headless Chromium: the
// waiting page, a connection added, the oldest dropped past the Feed's bound (and
// said so), an update replacing a connection, the stop. Real traffic through
// `view --live` is tested in cmd/slowstart (view_live_test.go).
func TestLiveBrowser(t *testing.T) {
	node := requireBrowser(t)
	conn := func(name string, index int) report.Connection {
		rep, err := analysis.File(context.Background(), filepath.Join("..", "testdata", "captures", name+".pcap"), analysis.Options{Packets: true})
		if err != nil || len(rep.Connections) != 1 {
			t.Fatalf("%s: %v (%d connections)", name, err, len(rep.Connections))
		}
		c := rep.Connections[0]
		c.Index = index
		return c
	}
	c1 := conn("rtt40-iw3-h1-100000.client", 1)
	c2 := conn("rtt40-iw10-tls13h2-200000.client", 2)
	c3 := conn("rtt40-iw20-h1-6000.client", 3)
	c3updated := conn("rtt150-iw3-tls12-100000.server", 3)
	if len(c3.Rounds) == len(c3updated.Rounds) {
		t.Fatalf("the update must change the rounds shown (%d both)", len(c3.Rounds))
	}

	feed := NewFeed(2)
	status := FeedStatus{Capturing: true, Interface: "lo", Filter: "tcp"}
	feed.SetStatus(status)
	h, err := NewLiveHandler(&report.Report{Schema: report.Schema, Tool: "slowstart test", Source: report.Source{Kind: "live", Path: "lo"}}, feed, HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	configPath := filepath.Join(dir, "live-feed.json")
	config, _ := json.Marshal(map[string]any{
		"chromium": chromiumPath, "artifacts": mustAbs(t, filepath.Join("test", "artifacts")),
		"url": srv.URL + "/", "updated_rounds": len(c3updated.Rounds),
	})
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("test", "live-feed.mjs"), configPath)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	put := func(c report.Connection) {
		if err := feed.Put(c); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		var n int
		if _, err := fmt.Sscanf(line, "step %d", &n); err != nil {
			continue
		}
		switch n {
		case 1:
			put(c1)
		case 2:
			put(c2)
			put(c3)
		case 3:
			put(c3updated)
		case 4:
			status.Capturing, status.Message = false, "the capture stopped"
			feed.SetStatus(status)
		}
		fmt.Fprintf(stdin, "done %d\n", n)
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	t.Logf("test/live-feed.mjs:\n%s%s", log.String(), stderr.String())
	if err != nil {
		t.Fatalf("live page checks failed: %v (screenshots in web/test/artifacts)", err)
	}
}
