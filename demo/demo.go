// Package demo is the built-in demo (probe with no URL): one far-away server
// emulated on this machine (package lab/labserver) with each of three initial
// windows, probed one after the other as probe does (package probe), its initial
// window measured actively (probe/exact), and a test page loaded from it in
// headless Chromium; the three side by side, and the story in words.
//
// It builds on both the lab and the probe, which know nothing of it; it measures
// and analyzes nothing itself.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/internal/failure"
	"github.com/slowstart/slowstart/internal/texttable"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/units"
)

// Config describes the built-in demo: one far-away server emulated with each
// of several initial windows, probed one after the other.
type Config struct {
	IWs               []int
	RTT               time.Duration
	RateBitsPerSecond int64
	TLSVersion        string
	ChainBytes        int
	BodyBytes         int64
	Tool              string
	// NoExact skips the exact measurement of each server's initial window.
	NoExact bool
	// Packets keeps every packet in the Reports (for view's pages).
	Packets bool
	// PageSpec is a test page (server.ParsePage) the same server serves, loaded in
	// headless Chromium at each initial window; "" skips the page loads.
	PageSpec string
}

// DefaultPageSpec is the demo's page: a 25 KB document naming a 20 KB stylesheet
// and a 50 KB script in its head, a 15 KB font and a 60 KB image, over HTTP/1.1
// (up to six connections).
const DefaultPageSpec = "html=25KB,css=20KB,js=50KB,font=15KB,img=60KB"

// Default is a phone in Quebec reaching a server in Copenhagen: RTT 130 ms,
// 15 Mbit/s, a 160 KB page over TLS 1.2 with a 6.9 KB certificate chain, served
// with IW 3 (old kernels and some middleboxes), 10 (today's default) and 32 (CDNs).
func Default() Config {
	return Config{IWs: []int{3, 10, 32}, RTT: 130 * time.Millisecond, RateBitsPerSecond: 15_000_000,
		TLSVersion: "1.2", ChainBytes: 6900, BodyBytes: 163840, PageSpec: DefaultPageSpec}
}

// Column is the probe of one initial window.
type Column struct {
	IW     int
	Result *probe.Result
	// Exact is the active measurement of the server's TLS flight (probe
	// --exact); nil when it failed, ExactErr says why.
	Exact    *exact.Result
	ExactErr error
	// PageLoad is the test page loaded in Chromium from the same server; nil when
	// it was not loaded, PageErr says why.
	PageLoad *pageload.Page
	PageErr  error
}

// Result holds the demo's probes, one per initial window.
type Result struct {
	Config  Config
	Columns []Column
}

// Schema names the JSON form of the demo (docs/schemas/demo.json).
const Schema = "slowstart.demo/v1"

// Output is what the demo's probe --json prints: the emulated path, and per
// initial window the page load's Report and the exact measurement.
type Output struct {
	Schema  string         `json:"schema"` // the constant Schema
	Path    Path           `json:"path"`
	Columns []OutputColumn `json:"columns"`
}

// Path is the emulated path and page.
type Path struct {
	RTTMs             float64 `json:"rtt_ms"`
	RateBitsPerSecond int64   `json:"rate_bps"`
	TLSVersion        string  `json:"tls_version"`
	ChainBytes        int     `json:"chain_bytes"`
	BodyBytes         int64   `json:"body_bytes"`
	// Page is the test page loaded in Chromium (server.ParsePage's form); empty
	// when none was.
	Page string `json:"page,omitempty"`
}

// OutputColumn is one initial window's probes.
type OutputColumn struct {
	IW     int            `json:"iw"`
	Report *report.Report `json:"report"`
	// Exact is the exact measurement of the server's TLS flight; null when it
	// failed (ExactError says why) or was not made.
	Exact      *exact.Result `json:"exact"`
	ExactError string        `json:"exact_error,omitempty"`
	// PageLoad is the test page's load in Chromium (docs/browser.md); absent when
	// it was not loaded (PageLoadError says why).
	PageLoad      *pageload.Page `json:"page_load,omitempty"`
	PageLoadError string         `json:"page_load_error,omitempty"`
}

// Output is the demo in its JSON form.
func (d *Result) Output() Output {
	c := d.Config
	out := Output{Schema: Schema, Path: Path{RTTMs: float64(c.RTT) / 1e6, RateBitsPerSecond: c.RateBitsPerSecond,
		TLSVersion: c.TLSVersion, ChainBytes: c.ChainBytes, BodyBytes: c.BodyBytes, Page: c.PageSpec}, Columns: []OutputColumn{}}
	for _, col := range d.Columns {
		oc := OutputColumn{IW: col.IW, Exact: col.Exact, PageLoad: col.PageLoad}
		if col.PageErr != nil {
			oc.PageLoadError = col.PageErr.Error()
		}
		if col.Result != nil {
			oc.Report = col.Result.Report
		}
		if col.ExactErr != nil {
			oc.ExactError = col.ExactErr.Error()
		}
		out.Columns = append(out.Columns, oc)
	}
	return out
}

// Merged is one Report of every column's connections, as if captured together
// (for the web page of the demo).
func (o Output) Merged() *report.Report {
	var merged report.Report
	for _, col := range o.Columns {
		if col.Report == nil {
			continue
		}
		if merged.Schema == "" {
			merged = *col.Report
			merged.Connections = nil
		}
		for _, c := range col.Report.Connections {
			c.Index = len(merged.Connections) + 1
			merged.Connections = append(merged.Connections, c)
		}
	}
	if merged.Schema == "" {
		merged.Schema = report.Schema
	}
	if merged.Connections == nil {
		merged.Connections = []report.Connection{}
	}
	return &merged
}

// Run runs the built-in demo. It needs root (network namespaces and a capture).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if os.Geteuid() != 0 {
		return nil, &failure.Error{Kind: failure.KindPermission, Err: errors.New("the demo emulates a far-away server in network namespaces on this machine, which needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW): run sudo slowstart probe")}
	}
	keys := server.NewKeyCache()
	out := &Result{Config: cfg}
	for _, iw := range cfg.IWs {
		col, err := column(ctx, cfg, iw, keys)
		if err != nil {
			return out, fmt.Errorf("demo with IW %d: %w", iw, err)
		}
		out.Columns = append(out.Columns, col)
	}
	return out, nil
}

// column probes one emulated server: a page load (passive), then the exact
// measurement of its TLS flight on a fresh connection.
func column(ctx context.Context, cfg Config, iw int, keys *server.KeyCache) (col Column, err error) {
	col.IW = iw
	scfg := labserver.Config{RTT: cfg.RTT, RateBitsPerSecond: cfg.RateBitsPerSecond, IW: iw,
		TLSVersion: cfg.TLSVersion, ChainBytes: cfg.ChainBytes, Keys: keys}
	if cfg.PageSpec != "" {
		page, err := server.ParsePage(cfg.PageSpec)
		if err != nil {
			return col, fmt.Errorf("the demo's page: %w", err)
		}
		scfg.Page = &page
	}
	s, err := labserver.Start(ctx, scfg)
	if err != nil {
		return col, fmt.Errorf("starting the emulated server: %w", err)
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	url := s.URL(fmt.Sprintf("/bytes/%d", cfg.BodyBytes))
	col.Result, err = probe.Run(ctx, probe.Options{URL: url, Netns: s.Netns, Resolve: s.Resolve(),
		RootCAs: s.RootCAs, TLSVersion: cfg.TLSVersion, HTTP1Only: true, Tool: cfg.Tool, Packets: cfg.Packets})
	if err != nil || cfg.NoExact {
		return col, err
	}
	col.Exact, col.ExactErr = exact.Measure(ctx, exact.Options{URL: url, Netns: s.Netns, Resolve: s.Resolve(),
		TLSVersion: cfg.TLSVersion, Runs: 1})
	if col.ExactErr != nil && ctx.Err() != nil {
		return col, ctx.Err()
	}
	if scfg.Page != nil {
		col.PageLoad, col.PageErr = pageLoad(ctx, s, scfg, cfg)
		if col.PageErr != nil && ctx.Err() != nil {
			return col, ctx.Err()
		}
	}
	return col, nil
}

// pageLoad loads the server's test page in Chromium, when it is installed.
func pageLoad(ctx context.Context, s *labserver.Server, scfg labserver.Config, cfg Config) (*pageload.Page, error) {
	if _, err := os.Stat(browser.DefaultChromium); err != nil {
		return nil, fmt.Errorf("no Chromium at %s: apt-get install chromium to see the page load", browser.DefaultChromium)
	}
	res, err := labserver.LoadPageFrom(ctx, s, scfg, browser.Options{Wait: 300 * time.Millisecond, Tool: cfg.Tool, Packets: cfg.Packets})
	if err != nil {
		return nil, err
	}
	return res.Page, nil
}

// WriteText writes the demo side by side, a column per initial window, and the
// story in words.
func WriteText(w io.Writer, d *Result) error {
	ew := &report.ErrWriter{W: w}
	c := d.Config
	ew.Printf("A server %s away (RTT %d ms, %s), serving a %s page over TLS %s with a %s certificate chain,\n",
		"an ocean", c.RTT.Milliseconds(), units.FormatRate(c.RateBitsPerSecond), report.Size(c.BodyBytes), c.TLSVersion, report.Size(int64(c.ChainBytes)))
	ew.Printf("emulated on this machine with three initial windows, each probed over a fresh connection:\n\n")
	conns := make([]*report.Connection, len(d.Columns))
	for i, col := range d.Columns {
		conns[i] = col.Result.Final(0)
	}
	tb := texttable.New("", columns(d)...)
	row := func(name string, cell func(*report.Connection) string) {
		cells := []string{name}
		for _, c := range conns {
			v := "-"
			if c != nil {
				v = cell(c)
			}
			cells = append(cells, v)
		}
		tb.Row(cells...)
	}
	row("TCP handshake (ms)", func(c *report.Connection) string { return fmt.Sprintf("%.0f", c.ClientTiming.ConnectMs) })
	row("TLS round trips", func(c *report.Connection) string { return fmt.Sprint(c.RoundTrips.TLS) })
	row("TLS done at (ms)", func(c *report.Connection) string {
		if c.ClientTiming.TLSAtMs == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", *c.ClientTiming.TLSAtMs)
	})
	row("IW, page load", func(c *report.Connection) string {
		return c.InitialWindow.Label()
	})
	if !c.NoExact {
		cells := []string{"IW, exact probe"}
		for _, col := range d.Columns {
			v := "-"
			switch {
			case col.Exact != nil && col.Exact.Verdict == exact.VerdictExact:
				v = fmt.Sprintf("%d, exact", col.Exact.IWSegments)
			case col.Exact != nil:
				v = col.Exact.Verdict
			case col.ExactErr != nil:
				v = "failed"
			}
			cells = append(cells, v)
		}
		tb.Row(cells...)
	}
	row("data rounds", func(c *report.Connection) string { return fmt.Sprint(c.RoundTrips.HTTP) })
	row("segments per round", func(c *report.Connection) string {
		var parts []string
		for _, r := range c.Rounds {
			if r.Phase != report.PhaseTLS {
				parts = append(parts, fmt.Sprint(r.Segments))
			}
		}
		return strings.Join(parts, ",")
	})
	row("round trips in all", func(c *report.Connection) string { return fmt.Sprint(c.RoundTrips.Total) })
	row("last byte at (ms)", func(c *report.Connection) string { return fmt.Sprintf("%.0f", c.ClientTiming.LastByteAtMs) })
	ew.Printf("%s", tb.String())
	ew.Printf("\n%s", story(d, conns))
	writePages(ew, d)
	return ew.Err
}

// writePages writes the page loads in Chromium side by side, if any.
func writePages(ew *report.ErrWriter, d *Result) {
	if d.Config.PageSpec == "" {
		return
	}
	page, _ := server.ParsePage(d.Config.PageSpec)
	var blocking []string
	for _, r := range page.Resources {
		if r.Kind == server.PageCSS || r.Kind == server.PageJS {
			blocking = append(blocking, fmt.Sprintf("a %s %s", report.Size(r.Bytes), map[string]string{server.PageCSS: "stylesheet", server.PageJS: "script"}[r.Kind]))
		}
	}
	ew.Printf("\nThe same servers also serve a whole page: a %s document whose head names %s,\nthen a font and an image. Headless Chromium loads it as a first visit, over HTTP/1.1:\n\n",
		report.Size(page.HTMLBytes), strings.Join(blocking, " and "))
	tb := texttable.New("", columns(d)...)
	cell := func(name string, f func(*pageload.Page) string) {
		cells := []string{name}
		for _, col := range d.Columns {
			v := "-"
			if col.PageLoad != nil {
				v = f(col.PageLoad)
			}
			cells = append(cells, v)
		}
		tb.Row(cells...)
	}
	cell("connections", func(p *pageload.Page) string { return fmt.Sprint(len(p.Connections)) })
	cell("critical path (round trips)", func(p *pageload.Page) string { return fmt.Sprint(p.CriticalPath.RoundTrips) })
	cell("  the model predicts", func(p *pageload.Page) string {
		if p.CriticalPath.Predicted == nil {
			return "-"
		}
		return fmt.Sprint(p.CriticalPath.Predicted.RoundTrips)
	})
	cell("critical path (ms)", func(p *pageload.Page) string { return fmt.Sprintf("%.0f", p.CriticalPath.Ms) })
	cell("first contentful paint (ms)", func(p *pageload.Page) string {
		if p.FirstContentfulPaintMs == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", *p.FirstContentfulPaintMs)
	})
	cell("load event (ms)", func(p *pageload.Page) string {
		if p.LoadMs == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", *p.LoadMs)
	})
	ew.Printf("%s", tb.String())
	for _, col := range d.Columns {
		if col.PageLoad == nil {
			if col.PageErr != nil {
				ew.Printf("The page load at IW %d was not made: %v\n", col.IW, col.PageErr)
			}
			continue
		}
		var steps []string
		for _, s := range col.PageLoad.CriticalPath.Steps {
			steps = append(steps, fmt.Sprintf("%s (%s)", s.Why, report.Count(s.RoundTrips, "round trip", "round trips")))
		}
		ew.Printf("- IW %d: the first render waited for %s.\n", col.IW, strings.Join(steps, ", then "))
	}
	ew.Printf("Every request on its connection, with its rounds: slowstart probe --browser https://example.com/\n")
}

// story tells the demo's result in words, from the measured numbers.
func story(d *Result, conns []*report.Connection) string {
	var b strings.Builder
	rtt := float64(d.Config.RTT.Milliseconds())
	fmt.Fprintf(&b, "Napkin math says a %s page costs 1 round trip for TCP, 2 for TLS 1.2 and 1 for the\nrequest: 4 × %.0f ms = %.0f ms. ",
		report.Size(d.Config.BodyBytes), rtt, 4*rtt)
	first, last := conns[0], conns[len(conns)-1]
	if first == nil || last == nil {
		return b.String() + "\n"
	}
	fmt.Fprintf(&b, "Measured: %.0f ms with IW %d, %.0f ms with IW %d.\n",
		first.ClientTiming.LastByteAtMs, d.Columns[0].IW, last.ClientTiming.LastByteAtMs, d.Columns[len(conns)-1].IW)
	for i, c := range conns {
		if c == nil {
			continue
		}
		fmt.Fprintf(&b, "- IW %d: %d round trips in all", d.Columns[i].IW, c.RoundTrips.Total)
		var why []string
		for _, dg := range c.Diagnoses {
			if dg.Kind == probe.DiagnosisCertificateChain || dg.Kind == probe.DiagnosisInitialWindow {
				why = append(why, dg.Text)
			}
		}
		if len(why) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(why, "; "))
		}
		b.WriteString(".\n")
	}
	for _, col := range d.Columns {
		iw := col.Result.Final(0)
		if iw == nil || iw.InitialWindow == nil || iw.InitialWindow.Verdict == report.VerdictExact || col.Exact == nil || col.Exact.Verdict != exact.VerdictExact {
			continue
		}
		what := fmt.Sprintf("only as at least %d segments", iw.InitialWindow.Segments)
		if iw.InitialWindow.Verdict == report.VerdictRange {
			what = fmt.Sprintf("as %d to %d segments", iw.InitialWindow.Segments, iw.InitialWindow.SegmentsMax)
		}
		fmt.Fprintf(&b, "The page load alone shows IW %d %s (the TLS flight was shorter than the window, and\n"+
			"the handshake's ACKs may have grown it before the page); the exact probe (--exact) counts %d.\n",
			col.IW, what, col.Exact.IWSegments)
		break
	}
	for _, col := range d.Columns {
		if col.ExactErr != nil {
			fmt.Fprintf(&b, "The exact probe of IW %d failed: %v\n", col.IW, col.ExactErr)
		}
	}
	b.WriteString("Every round trip crosses the ocean: the initial window decides how many there are.\n" +
		"Probe your own site with: slowstart probe https://example.com/\n")
	return b.String()
}

// columns are the demo's table columns: what a row is, then one per IW.
func columns(d *Result) []texttable.Column {
	cols := []texttable.Column{texttable.L("")}
	for _, col := range d.Columns {
		cols = append(cols, texttable.R(fmt.Sprintf("IW %d", col.IW)))
	}
	return cols
}
