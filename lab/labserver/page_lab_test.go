//go:build linux

package labserver

import (
	"bufio"
	"context"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// The browser's page load, checked against parts slowstart did not make:
// Debian's Chromium loads the lab's test page from Debian's nginx through the
// emulated path (both started here, in the trial's namespaces), and the result
// must agree with nginx's access log (which logs each request's client port and
// $bytes_sent), with the initial window the lab set on the server's route, with
// tshark's decryption of the same capture with the same key log, and with what
// package model predicts for the page.

// browserLabCase is one page load.
type browserLabCase struct {
	name   string
	page   string
	h2     bool
	iw     int
	tls    string
	tshark bool // also compare the capture's decryption with tshark's
	// keep copies the capture, key log, access log and a HAR of the load to
	// $SLOWSTART_BROWSER_KEEP when set (to refresh testdata/browser).
	keep bool
}

// The pages are chosen away from the rounds' boundaries at their IW (the model's
// range over slightly smaller and larger responses is one value, checked below):
// a page on a boundary would test the headers' sizes, not the rounds.
var browserLabCases = []browserLabCase{
	{name: "h1-iw10", page: h1Page, iw: 10, tls: "1.3", tshark: true},
	{name: "h2-iw3-second-host", page: "html=20KB,css@2=12KB,js=50KB,img=20KB", h2: true, iw: 3, tls: "1.3", tshark: true},
	{name: "h2-iw32", page: "html=30KB,css=18KB,js=6KB,font=4KB,img=40KB", h2: true, iw: 32, tls: "1.3"},
	{name: "h1-iw3-second-host", page: "html=20KB,css@2=12KB,js=50KB,img=20KB", iw: 3, tls: "1.3"},
	{name: "h1-iw10-tls12", page: h1Page, iw: 10, tls: "1.2"},
	// Small: kept in testdata/browser for the tests without root (see its README).
	{name: "tiny-h2-second-host", page: tinyPage, h2: true, iw: 10, tls: "1.3", tshark: true, keep: true},
}

// h1Page's document ends in the round that names its stylesheet and script, so
// over HTTP/1.1 the document's connection (its window grown) and the preconnect
// (IW) are free at the same moment, and which of the two Chromium binds first
// is a race (the stylesheet took the preconnect in about 1 load of 20). Both
// are too large for the IW: one of them takes two rounds either way.
const h1Page = "html=30KB,css=18KB,js=18KB,font=4KB,img=40KB"

// tinyPage is the page of testdata/browser: a font and a stylesheet on the second
// host, the font in its own stylesheet's chain.
const tinyPage = "html=4KB,css@2=3KB,js=2KB,font@2=2KB,img=5KB"

var labKeys = server.NewKeyCache()

// browserLabRTT is long beside what the browser takes to parse and ask: its
// processing then moves no request into another round.
const browserLabRTT = 200 * time.Millisecond

func TestBrowserPageLoadLab(t *testing.T) {
	testroot.Require(t, "network namespaces and a live capture")
	for _, tool := range []string{"nginx", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian packages nginx, util-linux)", tool)
		}
	}
	if _, err := os.Stat(browser.DefaultChromium); err != nil {
		t.Skipf("%s is missing (Debian package chromium)", browser.DefaultChromium)
	}
	t.Cleanup(func() { CloseAll() })
	for _, c := range browserLabCases {
		t.Run(c.name, func(t *testing.T) {
			page, err := server.ParsePage(c.page)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{RTT: browserLabRTT, IW: c.iw, TLSVersion: c.tls, HTTP2: c.h2, Nginx: true, Page: &page, Keys: labKeys}
			// The model's range: one value, or the page is on a boundary.
			pp := PageModel(cfg, page, 4000)
			lo, hi, err := model.PageLoadRange(pp, 2*model.DefaultMSS)
			if err != nil {
				t.Fatal(err)
			}
			if lo != hi {
				t.Fatalf("the model puts page %s at %d to %d round trips at IW %d: choose a page away from a boundary", c.page, lo, hi, c.iw)
			}
			var res *PageResult
			var dir string
			for attempt := 1; ; attempt++ {
				dir = t.TempDir()
				res = loadLabPage(t, cfg, dir)
				slow := SlowBrowser(res.Page, browserLabRTT)
				if slow == "" {
					break
				}
				if attempt == 3 {
					t.Fatalf("the browser was slow in all 3 tries (%s): the host is too busy to time a page load", slow)
				}
				t.Logf("try %d: %s; trying again", attempt, slow)
			}
			p := res.Page
			t.Logf("critical path %d round trips (model %d), %d requests on %d connections, timings within %.1f ms",
				p.CriticalPath.RoundTrips, lo, len(p.Requests), len(p.Connections), p.Agreement.MaxDiffMs)
			checkResourcesFound(t, res)
			checkAgainstAccessLog(t, res)
			checkIWVerdicts(t, p.Report, c.iw)
			if p.CriticalPath.Predicted == nil || p.CriticalPath.Predicted.RoundTrips != lo {
				t.Errorf("the page load's prediction %+v, want the model's %d", p.CriticalPath.Predicted, lo)
			}
			if p.CriticalPath.RoundTrips != lo {
				t.Errorf("critical path %d round trips, the model predicts %d: steps %+v", p.CriticalPath.RoundTrips, lo, p.CriticalPath.Steps)
			}
			checkBrowserTimings(t, p)
			if c.tshark {
				compareBrowserWithTshark(t, p.Report, filepath.Join(dir, "load.pcap"), filepath.Join(dir, "load.keys"))
			}
			if keep := os.Getenv("SLOWSTART_BROWSER_KEEP"); keep != "" && c.keep {
				keepLoad(t, res, dir, filepath.Join(keep, c.name))
			}
		})
	}
}

// loadLabPage serves and loads the page, keeping the capture and key log in dir.
func loadLabPage(t *testing.T, cfg Config, dir string) *PageResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := LoadPage(ctx, cfg, browser.Options{Wait: 300 * time.Millisecond, Timeout: time.Minute,
		PcapPath: filepath.Join(dir, "load.pcap"), KeylogPath: filepath.Join(dir, "load.keys"), Tool: "slowstart test"})
	if err != nil {
		t.Fatalf("loading the lab page: %v", err)
	}
	return res
}

// checkResourcesFound: every file of the test page was requested once, answered
// 200 and found decrypted on a connection of the capture.
func checkResourcesFound(t *testing.T, res *PageResult) {
	t.Helper()
	want := []string{server.PageIndexPath}
	for i := range res.TestPage.Resources {
		want = append(want, res.TestPage.ResourcePath(i))
	}
	for _, path := range want {
		var found []pageload.PageRequest
		for _, r := range res.Page.Requests {
			if r.Path == path {
				found = append(found, r)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: requested %d times, want once", path, len(found))
			continue
		}
		if r := found[0]; r.Status != 200 || r.Connection == 0 || r.Message < 0 || len(r.Rounds) == 0 {
			t.Errorf("%s: status %d, connection %d, message %d, rounds %v: want 200, decrypted on a connection, with rounds",
				path, r.Status, r.Connection, r.Message, r.Rounds)
		}
	}
}

// accessLine is the lab nginx's log format: SERVER_ADDR SERVER_PORT CLIENT_ADDR
// CLIENT_PORT "REQUEST" STATUS BYTES_SENT BODY_BYTES_SENT.
var accessLine = regexp.MustCompile(`^(\S+) (\d+) (\S+) (\d+) "(\S+) (\S+) (\S+)" (\d+) (\d+) (\d+)$`)

// checkAgainstAccessLog: each request of the page is on the connection nginx
// logged it on (the client's address and port), with nginx's status and
// $bytes_sent, and nginx logged nothing the page does not have.
func checkAgainstAccessLog(t *testing.T, res *PageResult) {
	t.Helper()
	clients := map[int]netip.AddrPort{}
	for _, c := range res.Page.Report.Connections {
		a, err := netip.ParseAddrPort(c.Client)
		if err != nil {
			t.Fatal(err)
		}
		clients[c.Index] = a
	}
	type logged struct {
		client     netip.AddrPort
		status     int
		bytes      int64
		serverPort int
	}
	byPath := map[string]*logged{}
	sc := bufio.NewScanner(strings.NewReader(string(res.AccessLog)))
	lines := 0
	for sc.Scan() {
		m := accessLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("nginx access log line %q is not in the lab's format", sc.Text())
		}
		lines++
		port, _ := strconv.Atoi(m[4])
		addr, err := netip.ParseAddr(m[3])
		if err != nil {
			t.Fatal(err)
		}
		l := &logged{client: netip.AddrPortFrom(addr, uint16(port))}
		l.status, _ = strconv.Atoi(m[8])
		l.bytes, _ = strconv.ParseInt(m[9], 10, 64)
		l.serverPort, _ = strconv.Atoi(m[2])
		if byPath[m[6]] != nil {
			t.Errorf("nginx logged %s twice", m[6])
		}
		byPath[m[6]] = l
	}
	if lines != len(res.Page.Requests) {
		t.Errorf("nginx logged %d requests, the page load has %d", lines, len(res.Page.Requests))
	}
	for _, r := range res.Page.Requests {
		l := byPath[r.Path]
		if l == nil {
			t.Errorf("%s: not in nginx's log", r.Path)
			continue
		}
		if got := clients[r.Connection]; got != l.client {
			t.Errorf("%s: on connection %d from %s, nginx logged it from %s", r.Path, r.Connection, got, l.client)
		}
		if r.Status != l.status || r.Bytes != l.bytes {
			t.Errorf("%s: status %d, %d bytes; nginx: status %d, $bytes_sent %d", r.Path, r.Status, r.Bytes, l.status, l.bytes)
		}
		if second := strings.Contains(r.URL, SecondServerName); second != (l.serverPort == SecondPort) {
			t.Errorf("%s: URL %s, nginx served it on port %d", r.Path, r.URL, l.serverPort)
		}
	}
}

// checkIWVerdicts: every connection's initial-window reading holds the IW the
// lab set: exact only when it is that IW, a bound or range that contains it.
func checkIWVerdicts(t *testing.T, rep *report.Report, iw int) {
	t.Helper()
	for _, c := range rep.Connections {
		for _, w := range []*report.InitialWindow{c.InitialWindow} {
			if w == nil {
				continue
			}
			ok := true
			switch w.Verdict {
			case report.VerdictExact:
				ok = w.Segments == iw
			case report.VerdictLowerBound, report.VerdictRwndLimited:
				ok = w.Segments <= iw
			case report.VerdictRange:
				ok = w.Segments <= iw && iw <= w.SegmentsMax
			}
			if !ok {
				t.Errorf("connection %d (%s): IW %d-%d %s, the lab set %d", c.Index, c.Client, w.Segments, w.SegmentsMax, w.Verdict, iw)
			}
		}
	}
}

// checkBrowserTimings: the browser cannot see a byte before the kernel got it,
// nor send a request after the capture saw it leave; and its timings of the same
// events agree with the capture's (the median of the differences within the
// tolerance: a busy host delays a few of them).
func checkBrowserTimings(t *testing.T, p *pageload.Page) {
	t.Helper()
	const slackMs = 1.0 // the capture's and the browser's clocks are read apart
	var diffs []float64
	for _, r := range p.Requests {
		b := r.Browser
		pairs := []struct {
			what             string
			browser, capture *float64
			browserNotBefore bool
		}{{"request", b.RequestMs, r.RequestMs, false}, {"first byte", b.FirstByteMs, r.FirstByteMs, true}, {"last byte", b.LastByteMs, r.LastByteMs, true}}
		for _, pr := range pairs {
			if pr.browser == nil || pr.capture == nil {
				t.Errorf("%s: no %s time from the %s", r.Path, pr.what, map[bool]string{true: "browser", false: "capture"}[pr.browser == nil])
				continue
			}
			d := *pr.browser - *pr.capture
			if pr.browserNotBefore && d < -slackMs || !pr.browserNotBefore && d > slackMs {
				t.Errorf("%s: the browser's %s at %.1f ms, the capture's at %.1f ms: out of order", r.Path, pr.what, *pr.browser, *pr.capture)
			}
			if pr.what != "first byte" {
				// A response's first bytes reach the browser only once their TLS
				// record is whole, which may be a round after the capture's first
				// byte: only the order is checked above.
				diffs = append(diffs, math.Abs(d))
			}
		}
	}
	if len(diffs) == 0 {
		t.Fatal("no timings to compare")
	}
	sort.Float64s(diffs)
	if median := diffs[len(diffs)/2]; median > pageload.AgreementToleranceMs {
		t.Errorf("the browser's and the capture's timings differ by %.1f ms (median of %d), more than %.0f ms", median, len(diffs), pageload.AgreementToleranceMs)
	}
}
