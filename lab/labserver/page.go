package labserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/slowstart/slowstart/browser"
	"github.com/slowstart/slowstart/internal/failure"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/pageload"
)

// PageResult is a test page loaded in Chromium from an emulated server.
type PageResult struct {
	*browser.Result
	// TestPage is the test page served, with its origins.
	TestPage server.Page
	// AccessLog is nginx's access log of the load (see server.Nginx.AccessLogPath);
	// nil with the built-in server.
	AccessLog []byte
	// Model is what package model was given for the page (PageModel).
	Model model.PageParams
}

// LoadPage emulates the server of cfg (which must have a Page) in the lab and
// loads its page in headless Chromium from the client namespace, as probe
// --browser does: opts gives the browser's options (its URL, namespace, host
// names and certificate checks are set here). It needs root.
func LoadPage(ctx context.Context, cfg Config, opts browser.Options) (res *PageResult, err error) {
	if cfg.Page == nil {
		return nil, errors.New("the lab's page load needs a page")
	}
	if os.Geteuid() != 0 {
		return nil, &failure.Error{Kind: failure.KindPermission, Err: errors.New("the lab emulates a far-away server in network namespaces on this machine, which needs root: run it with sudo")}
	}
	s, err := Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the emulated server: %w", err)
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	return LoadPageFrom(ctx, s, cfg, opts)
}

// LoadPageFrom loads the test page of a running lab server s (started with cfg)
// in headless Chromium from its client namespace.
func LoadPageFrom(ctx context.Context, s *Server, cfg Config, opts browser.Options) (res *PageResult, err error) {
	if s.Page == nil {
		return nil, errors.New("the lab server serves no page")
	}
	opts.URL, opts.Netns, opts.Resolve, opts.Insecure = s.PageURL(), s.Netns, s.Resolve(), true
	res = &PageResult{TestPage: *s.Page, Model: PageModel(cfg, *s.Page, s.ChainBytes)}
	res.Result, err = browser.Load(ctx, opts)
	if err == nil && res.Page != nil {
		// What the model predicts, beside what was measured.
		if pred, err := model.PageLoad(res.Model); err == nil {
			lo, hi, _ := model.PageLoadRange(res.Model, 2*model.DefaultMSS)
			res.Page.CriticalPath.Predicted = &pageload.Prediction{RoundTrips: pred.CriticalPathRoundTrips, Min: lo, Max: hi, Ms: pred.CriticalPathMs}
		}
	}
	if s.Nginx != nil {
		// nginx writes a request's line when it has sent the response: all of them
		// are there once the browser has closed its connections.
		res.AccessLog, _ = os.ReadFile(s.Nginx.AccessLogPath())
	}
	return res, err
}

// Response header sizes of the lab's servers (bytes of HTTP headers before a
// test page's file, as they travel: HTTP/1.1 text or HTTP/2 HPACK and frames),
// measured on their captures; a few bytes either way move no round boundary the
// model's range does not show.
const (
	nginxHTTP1HeaderBytes   = 266
	nginxHTTP2HeaderBytes   = 120
	builtinHTTP1HeaderBytes = 160
	builtinHTTP2HeaderBytes = 80
)

// SlowBrowser says why a page load over a path of round-trip time rtt does not
// tell the rounds, if it does not: the browser asked for a step of the critical
// path more than half a round trip after what it waited for had arrived (a busy
// host, not the network). It is "" when every step waited for the network only.
func SlowBrowser(p *pageload.Page, rtt time.Duration) string {
	limit := float64(rtt.Milliseconds()) / 2
	for _, s := range p.CriticalPath.Steps {
		if s.BrowserMs > limit {
			return fmt.Sprintf("it asked for request %d %.0f ms after what it waited for", s.Request, s.BrowserMs)
		}
	}
	return ""
}

// PageModel describes the lab's page load for model.PageLoad: the emulated
// path, the server's behaviour (nginx sends two TLS 1.3 session tickets and, over
// HTTP/2, its SETTINGS and an ACK of the client's, each in a segment of its own,
// and fills TLS records of 16 KB; the built-in server sends no tickets, and its
// TLS records start at one segment), and the page's document and render-blocking
// resources (stylesheets and scripts; fonts and images do not block its first
// render: its heading has a system font).
func PageModel(cfg Config, page server.Page, chainBytes int) model.PageParams {
	p := model.Params{RTTNs: cfg.RTT.Nanoseconds(), RateBitsPerSecond: cfg.RateBitsPerSecond, IW: cfg.IW, TLS: cfg.TLSVersion,
		ChainBytes: chainBytes, DelayedACK: true, HostDelayNs: model.LabHostDelayNs, ServerDelayNs: model.LabServerDelayNs}
	if p.IW == 0 {
		p.IW = 10
	}
	header := int64(builtinHTTP1HeaderBytes)
	pp := model.PageParams{HTTP2: cfg.HTTP2}
	switch {
	case cfg.Nginx:
		header = nginxHTTP1HeaderBytes
		if cfg.HTTP2 {
			header = nginxHTTP2HeaderBytes
		}
		if cfg.TLSVersion == "1.3" {
			p.ServerPostHandshakeSegments = 2
		}
		if cfg.HTTP2 && cfg.TLSVersion != "" {
			p.ServerPostHandshakeSegments += 2
		}
		if cfg.TLSVersion != "" {
			pp.FirstRecordBytes = 16384
		}
	case cfg.HTTP2:
		header = builtinHTTP2HeaderBytes
		if cfg.TLSVersion != "" {
			p.ServerPostHandshakeSegments = 2
		}
	}
	pp.Path = p
	pp.DocumentBytes = page.HTMLBytes + header
	for i, r := range page.Resources {
		if r.Kind != server.PageCSS && r.Kind != server.PageJS {
			continue
		}
		pp.Resources = append(pp.Resources, model.PageResource{Name: page.ResourcePath(i), Bytes: r.Bytes + header, SecondHost: r.Second})
	}
	return pp
}
