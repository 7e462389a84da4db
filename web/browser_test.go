package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

const chromiumPath = "/usr/bin/chromium"

// browserCase is one page the browser script opens; see test/browser.mjs.
type browserCase struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	HTML   string `json:"html"`
	Report string `json:"report"`
	Large  bool   `json:"large"`
	// Page is the page load's JSON, for a page load's view.
	Page string `json:"page,omitempty"`
}

// TestBrowser opens the view of real captures (and of a large synthetic Report) in
// headless Chromium and checks what is drawn against the Report. It needs
// node_modules (npm ci in web/) and Debian's chromium; without them it is skipped,
// except under CI=true, where it fails.
func TestBrowser(t *testing.T) {
	node := requireBrowser(t)

	dir := t.TempDir()
	var cases []browserCase
	add := func(name string, rep *report.Report, large bool, page *pageload.Page) {
		h, err := NewHandler(rep, HandlerOptions{})
		if page != nil {
			h, err = NewPageHandler(rep, page, HandlerOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		reportPath := filepath.Join(dir, name+".json")
		data, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(reportPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var html bytes.Buffer
		if page != nil {
			err = WritePageHTML(&html, rep, page)
		} else {
			err = WriteHTML(&html, rep)
		}
		if err != nil {
			t.Fatal(err)
		}
		htmlPath := filepath.Join(dir, name+".html")
		if err := os.WriteFile(htmlPath, html.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		c := browserCase{Name: name, URL: srv.URL + "/", HTML: htmlPath, Report: reportPath, Large: large}
		if page != nil {
			c.Page = filepath.Join(dir, name+".page.json")
			data, err := json.Marshal(page)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.Page, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases, c)
	}
	for _, c := range []struct {
		capture string
		packets bool // false: a Report as analyze --json writes it, without packets
	}{
		{"rtt40-iw3-h1-100000.client", true},
		{"rtt40-iw10-tls13h2-200000.client", true},
		{"rtt150-iw3-tls12-100000.server", true},
		{"rtt40-iw20-h1-6000.client", false},
	} {
		rep, err := analysis.File(context.Background(), filepath.Join("..", "testdata", "captures", c.capture+".pcap"),
			analysis.Options{Packets: c.packets, Tool: "slowstart test"})
		if err != nil {
			t.Fatalf("analyzing %s: %v", c.capture, err)
		}
		if len(rep.Connections) == 0 || c.packets != (len(rep.Connections[0].Packets) > 0) {
			t.Fatalf("%s: %d connections, packets asked for: %v", c.capture, len(rep.Connections), c.packets)
		}
		name := c.capture
		if !c.packets {
			name += "-nopackets"
		}
		add(name, rep, false, nil)
	}
	add("synthetic-100k", syntheticReport(4, 25000), true, nil)
	page := browserPageLoad(t)
	add("pageload-chromium-h2", page.Report, false, page)

	configPath := filepath.Join(dir, "cases.json")
	config, err := json.Marshal(map[string]any{
		"chromium":  chromiumPath,
		"artifacts": mustAbs(t, filepath.Join("test", "artifacts")),
		"cases":     cases,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("test", "browser.mjs"), configPath)
	out, err := cmd.CombinedOutput()
	t.Logf("test/browser.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("browser checks failed: %v (screenshots in web/test/artifacts)", err)
	}
}

// browserPageLoad is the page load of testdata/browser: Chromium's capture with
// its key log and the HAR of the load.
func browserPageLoad(t *testing.T) *pageload.Page {
	t.Helper()
	base := filepath.Join("..", "testdata", "browser", "tiny-h2-second-host")
	keys, err := keylog.ParseFile(base + ".keys")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analysis.File(context.Background(), base+".pcap", analysis.Options{Packets: true, KeyLog: keys, Tool: "slowstart test"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := har.ReadFile(base + ".har")
	if err != nil {
		t.Fatal(err)
	}
	in, err := har.ToInput(h)
	if err != nil {
		t.Fatal(err)
	}
	page := pageload.Build(rep, in)
	if len(page.Requests) == 0 || page.CriticalPath.RoundTrips == 0 {
		t.Fatalf("the page load of %s has %d requests and a critical path of %d round trips", base, len(page.Requests), page.CriticalPath.RoundTrips)
	}
	return page
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// syntheticReport makes a Report of n connections with packetsEach packets each,
// spread over two servers, to check that a large capture is decimated.
func syntheticReport(n, packetsEach int) *report.Report {
	const mss = 1448
	rep := &report.Report{Schema: report.Schema, Tool: "slowstart test", Source: report.Source{Kind: "file", Path: "synthetic.pcap"}}
	for i := range n {
		rtt := 30.0 + 10*float64(i)
		c := report.Connection{
			Index: i + 1, Client: fmt.Sprintf("10.0.0.2:%d", 40000+i), Server: fmt.Sprintf("10.0.0.%d:443", 1+i%2),
			Vantage: "client", StartMs: 5 * float64(i), HandshakeRTTMs: &rtt, MinRTTMs: rtt, MSS: mss, Closed: "fin",
			InitialWindow: &report.InitialWindow{Segments: 10, Bytes: 10 * mss, Verdict: "exact", Source: "http", Reason: "synthetic"},
		}
		c.Packets = append(c.Packets,
			report.Packet{TimeMs: 0, Dir: "c2s", Flags: "S", Ack: -1, Win: 64240},
			report.Packet{TimeMs: rtt, Dir: "s2c", Flags: "SA", Ack: 0, Win: 65160},
			report.Packet{TimeMs: rtt + 0.1, Dir: "c2s", Flags: "A", Ack: 0, Win: 64512})
		var seq int64
		window, inRound, round := 10, 0, 1
		t := rtt * 2
		roundStart := t
		var cumulative int64
		for len(c.Packets) < packetsEach {
			retx := len(c.Packets)%997 == 0
			c.Packets = append(c.Packets, report.Packet{TimeMs: t, Dir: "s2c", Seq: seq, Len: mss, Ack: 100, Win: 65160, Flags: "A", Retx: retx, Round: round})
			seq += mss
			inRound++
			if inRound%2 == 0 {
				c.Packets = append(c.Packets, report.Packet{TimeMs: t + rtt, Dir: "c2s", Seq: 100, Ack: seq, Win: 1 << 20, Flags: "A"})
			}
			t += 0.05
			if inRound == window {
				cumulative += int64(inRound * mss)
				c.Rounds = append(c.Rounds, report.Round{Index: round, StartMs: roundStart, EndMs: t, StartRTTs: roundStart / rtt,
					Segments: inRound, Bytes: inRound * mss, CumulativeBytes: cumulative, Packets: inRound, Limit: "cwnd", Phase: "http"})
				round++
				t = roundStart + rtt
				roundStart = t
				inRound = 0
				window = min(window*2, 400)
			}
		}
		c.Packets = append(c.Packets, report.Packet{TimeMs: t + rtt, Dir: "c2s", Flags: "FA", Seq: 100, Ack: seq, Win: 1 << 20})
		c.DurationMs = t + rtt
		c.BytesToClient = seq
		c.RoundTrips = report.RoundTrips{TCP: 1, HTTP: len(c.Rounds), Total: 1 + len(c.Rounds)}
		c.RoundMethod = "ack_clock"
		rep.Connections = append(rep.Connections, c)
	}
	return rep
}

// requireBrowser returns node's path when the browser tests can run: not in
// -short, with node, web/node_modules (playwright-core) and Debian's chromium.
// Otherwise it skips t, or fails it under CI=true, where they must run.
func requireBrowser(t *testing.T) (node string) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	case !exists("node_modules/playwright-core/package.json"):
		missing = "web/node_modules is missing (run: cd web && npm ci)"
	case !exists(chromiumPath):
		missing = chromiumPath + " is missing (apt-get install chromium)"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests can't run: %s", missing)
		}
		t.Skipf("browser tests skipped: %s", missing)
	}
	return node
}
