package browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/slowstart/slowstart/internal/chromium"
	"github.com/slowstart/slowstart/pageload"
)

// Flags returns the command line flags slowstart starts Chromium with, besides
// --user-data-dir and the remote debugging port: headless, no sandbox (it runs as
// root), no GPU, QUIC off unless HTTP/3 is asked for, no first-run pages, and no
// background traffic (component updates, sync, safe browsing, metrics...) that
// would add connections of its own to the capture.
func Flags(o *Options) []string {
	flags := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--disable-client-side-phishing-detection",
		"--disable-domain-reliability", "--disable-breakpad", "--metrics-recording-only", "--password-store=basic",
		"--use-mock-keychain", "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,InterestFeedContentSuggestions,CertificateTransparencyComponentUpdater",
		"--window-size=1280,800",
	}
	if o.HTTP3 {
		flags = append(flags, "--enable-quic")
		for _, origin := range o.quicOrigins() {
			flags = append(flags, "--origin-to-force-quic-on="+origin)
		}
	} else {
		flags = append(flags, "--disable-quic")
	}
	if o.HTTP1Only {
		flags = append(flags, "--disable-http2")
	}
	if o.Insecure {
		flags = append(flags, "--ignore-certificate-errors")
	}
	if rules := o.hostResolverRules(); rules != "" {
		flags = append(flags, "--host-resolver-rules="+rules)
	}
	if o.UserAgent != "" {
		flags = append(flags, "--user-agent="+o.UserAgent)
	}
	return flags
}

// hostResolverRules maps the Resolve entries for Chromium: "MAP host:port addr".
func (o *Options) hostResolverRules() string {
	keys := make([]string, 0, len(o.Resolve))
	for k := range o.Resolve {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rules []string
	for _, k := range keys {
		addr := o.Resolve[k]
		target := addr.String()
		if addr.Is6() {
			target = "[" + target + "]"
		}
		rules = append(rules, "MAP "+k+" "+target)
	}
	return strings.Join(rules, ", ")
}

// quicOrigins are host:port of the URL, for --origin-to-force-quic-on.
func (o *Options) quicOrigins() []string {
	t, err := parseURL(o.URL)
	if err != nil {
		return nil
	}
	return []string{net.JoinHostPort(t.host, strconv.Itoa(int(t.port)))}
}

// startChromium starts Chromium in the namespace (the current one when o.Netns
// is empty) with a profile in dir and the key log at keylogPath, and waits for
// its DevTools endpoint.
func startChromium(ctx context.Context, o *Options, dir, keylogPath string) (*chromium.Process, error) {
	c, err := chromium.Start(ctx, chromium.Options{Binary: o.Chromium, Netns: o.Netns, Flags: Flags(o), Dir: dir, KeylogPath: keylogPath})
	if err != nil && ctx.Err() == nil {
		return nil, &Error{Kind: KindBrowser, Err: err}
	}
	return c, err
}

// recorder gathers the DevTools events of one page load.
type recorder struct {
	mu       sync.Mutex
	order    []string // request ids (with redirect hops) in the order issued
	requests map[string]*pageload.Request
	current  map[string]string // DevTools request id → the id of its current hop
	hops     map[string]int
	// offsetNs turns DevTools' monotonic times into Unix times (wall time minus
	// monotonic time, from the first requestWillBeSent); minOffsetNs is the
	// least of them over every requestWillBeSent, which result applies: the
	// wall time is read when the event is sent, the monotonic one when the
	// request was made, so a busy browser's offset comes out too large (by 2
	// ms, which put its requests after the capture's).
	offsetNs, minOffsetNs int64
	haveOffset            bool
	loadNs                int64
	domNs                 int64
	inFlight              map[string]bool
	lastEvent             time.Time
	loaded                chan struct{}
	loadedOnce            sync.Once
}

func newRecorder() *recorder {
	return &recorder{requests: map[string]*pageload.Request{}, current: map[string]string{}, hops: map[string]int{},
		inFlight: map[string]bool{}, loaded: make(chan struct{})}
}

// mono converts a DevTools monotonic time to Unix ns.
func (r *recorder) mono(t *cdp.MonotonicTime) int64 {
	if t == nil {
		return 0
	}
	return t.Time().UnixNano() + r.offsetNs
}

// rawMono converts seconds on DevTools' monotonic clock (ResourceTiming's
// requestTime) plus ms to Unix ns.
func (r *recorder) rawMono(seconds, ms float64) int64 {
	return cdp.MonotonicTimeEpoch.UnixNano() + int64(seconds*1e9) + int64(ms*1e6) + r.offsetNs
}

// handle records one event.
func (r *recorder) handle(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastEvent = time.Now()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		if e.Timestamp != nil && e.WallTime != nil {
			off := e.WallTime.Time().UnixNano() - e.Timestamp.Time().UnixNano()
			if !r.haveOffset {
				r.offsetNs, r.minOffsetNs, r.haveOffset = off, off, true
			}
			r.minOffsetNs = min(r.minOffsetNs, off)
		}
		id := string(e.RequestID)
		if prevID, ok := r.current[id]; ok && e.RedirectResponse != nil {
			// The previous hop was a redirect: it ends here.
			prev := r.requests[prevID]
			r.response(prev, e.RedirectResponse)
			prev.RedirectTo = e.Request.URL
			prev.LastByteNs = r.mono(e.Timestamp)
			r.hops[id]++
			id = fmt.Sprintf("%s#%d", id, r.hops[id])
		}
		req := &pageload.Request{ID: id, URL: e.Request.URL, Method: e.Request.Method, Type: strings.ToLower(string(e.Type)),
			RenderBlocking: renderBlocking(e.RenderBlockingBehavior), Priority: string(e.Request.InitialPriority), StartNs: r.mono(e.Timestamp)}
		if e.Initiator != nil {
			req.InitiatorType = string(e.Initiator.Type)
			req.InitiatorURL = e.Initiator.URL
			if req.InitiatorURL == "" && e.Initiator.Stack != nil && len(e.Initiator.Stack.CallFrames) > 0 {
				req.InitiatorURL = e.Initiator.Stack.CallFrames[0].URL
			}
		}
		if prevID, ok := r.current[string(e.RequestID)]; ok && e.RedirectResponse != nil {
			req.InitiatorURL = r.requests[prevID].URL
			req.InitiatorType = "redirect"
		}
		r.current[string(e.RequestID)] = id
		r.requests[id] = req
		r.order = append(r.order, id)
		r.inFlight[string(e.RequestID)] = true
	case *network.EventResponseReceived:
		if req := r.requests[r.current[string(e.RequestID)]]; req != nil {
			r.response(req, e.Response)
			if e.Type != "" && req.Type == "" {
				req.Type = strings.ToLower(string(e.Type))
			}
		}
	case *network.EventLoadingFinished:
		if req := r.requests[r.current[string(e.RequestID)]]; req != nil {
			req.LastByteNs = r.mono(e.Timestamp)
			req.EncodedBytes = int64(e.EncodedDataLength)
		}
		delete(r.inFlight, string(e.RequestID))
	case *network.EventLoadingFailed:
		if req := r.requests[r.current[string(e.RequestID)]]; req != nil {
			req.Failed = e.ErrorText
			if e.Canceled {
				req.Failed += " (canceled)"
			}
			if req.LastByteNs == 0 && req.FirstByteNs != 0 {
				req.LastByteNs = r.mono(e.Timestamp)
			}
		}
		delete(r.inFlight, string(e.RequestID))
	case *network.EventRequestServedFromCache:
		if req := r.requests[r.current[string(e.RequestID)]]; req != nil {
			req.FromCache = true
		}
	case *page.EventLoadEventFired:
		r.loadNs = r.mono(e.Timestamp)
		r.loadedOnce.Do(func() { close(r.loaded) })
	case *page.EventDomContentEventFired:
		r.domNs = r.mono(e.Timestamp)
	}
}

// response records what a response says of its request.
func (r *recorder) response(req *pageload.Request, resp *network.Response) {
	if resp == nil {
		return
	}
	req.Status = int(resp.Status)
	req.MimeType = resp.MimeType
	req.Protocol = resp.Protocol
	if resp.RemoteIPAddress != "" && resp.RemotePort != 0 {
		ip := strings.Trim(resp.RemoteIPAddress, "[]")
		if a, err := netip.ParseAddr(ip); err == nil {
			req.RemoteAddr = netip.AddrPortFrom(a.Unmap(), uint16(resp.RemotePort)).String()
		}
	}
	if resp.ConnectionID != 0 {
		req.ConnectionID = strconv.FormatFloat(resp.ConnectionID, 'f', -1, 64)
	}
	req.FromCache = req.FromCache || resp.FromDiskCache || resp.FromPrefetchCache || resp.FromServiceWorker
	if t := resp.Timing; t != nil && t.RequestTime > 0 {
		if t.ConnectStart >= 0 && t.ConnectEnd > 0 {
			req.ConnectStartNs = r.rawMono(t.RequestTime, t.ConnectStart)
			req.ConnectEndNs = r.rawMono(t.RequestTime, t.ConnectEnd)
		}
		if t.SendStart >= 0 {
			req.SentNs = r.rawMono(t.RequestTime, t.SendStart)
		}
		switch {
		case t.ReceiveHeadersStart > 0:
			req.FirstByteNs = r.rawMono(t.RequestTime, t.ReceiveHeadersStart)
		case t.ReceiveHeadersEnd > 0:
			req.FirstByteNs = r.rawMono(t.RequestTime, t.ReceiveHeadersEnd)
		}
	}
}

// renderBlocking maps DevTools' renderBlockingBehavior to pageload's names.
func renderBlocking(b network.RenderBlockingBehavior) string {
	switch b {
	case network.RenderBlockingBehaviorBlocking:
		return pageload.RenderBlocking
	case network.RenderBlockingBehaviorInBodyParserBlocking:
		return pageload.RenderInBodyParser
	case network.RenderBlockingBehaviorNonBlocking:
		return pageload.RenderNonBlocking
	case network.RenderBlockingBehaviorNonBlockingDynamic:
		return pageload.RenderNonBlockingDynam
	case network.RenderBlockingBehaviorPotentiallyBlocking:
		return pageload.RenderPotentially
	}
	return ""
}

// quiet reports whether no request is in flight and no event came for d.
func (r *recorder) quiet(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inFlight) == 0 && time.Since(r.lastEvent) >= d
}

// result returns the requests in the order issued.
func (r *recorder) result() []pageload.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	shift := r.correction()
	out := make([]pageload.Request, 0, len(r.order))
	for _, id := range r.order {
		q := *r.requests[id]
		for _, p := range []*int64{&q.StartNs, &q.ConnectStartNs, &q.ConnectEndNs, &q.SentNs, &q.FirstByteNs, &q.LastByteNs} {
			*p = shift(*p)
		}
		out = append(out, q)
	}
	return out
}

// correction moves a time converted with the first offset to the least one
// (0 stays 0: a time not known).
func (r *recorder) correction() func(int64) int64 {
	d := r.minOffsetNs - r.offsetNs
	return func(ns int64) int64 {
		if ns == 0 {
			return 0
		}
		return ns + d
	}
}

// paintScript waits (up to 3 s) for the first contentful paint, then returns the
// page's timings: performance.timeOrigin (Unix ms) and the paint entries' start
// times (ms from it).
const paintScript = `new Promise((resolve) => {
  const done = () => {
    const out = {origin: performance.timeOrigin, fp: -1, fcp: -1};
    for (const e of performance.getEntriesByType('paint')) {
      if (e.name === 'first-paint') out.fp = e.startTime;
      if (e.name === 'first-contentful-paint') out.fcp = e.startTime;
    }
    return out;
  };
  if (performance.getEntriesByName('first-contentful-paint').length > 0) { resolve(done()); return; }
  try {
    new PerformanceObserver((list, observer) => {
      if (list.getEntriesByName('first-contentful-paint').length > 0) { observer.disconnect(); resolve(done()); }
    }).observe({type: 'paint', buffered: true});
  } catch (e) {}
  setTimeout(() => resolve(done()), 3000);
})`

type paintTimings struct {
	Origin float64 `json:"origin"`
	FP     float64 `json:"fp"`
	FCP    float64 `json:"fcp"`
}

// loadPage navigates the tab Chromium opened to the URL with the cache off,
// waits for the load event, then for late requests (wait, and until the network
// is quiet, within the timeout), and returns what the browser saw.
func loadPage(ctx context.Context, c *chromium.Process, o *Options) (pageload.Input, error) {
	in := pageload.Input{URL: o.URL, Source: pageload.SourceChromium}
	tabCtx, cancelTab, err := c.Connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return in, ctx.Err()
		}
		return in, &Error{Kind: KindBrowser, Err: err}
	}
	defer cancelTab()
	rec := newRecorder()
	chromedp.ListenTarget(tabCtx, rec.handle)
	var product string
	if err := chromedp.Run(tabCtx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		_, product, _, _, _, err = browser.GetVersion().Do(ctx)
		return err
	}), network.Enable(), network.SetCacheDisabled(true), page.Enable()); err != nil {
		return in, &Error{Kind: KindBrowser, Err: fmt.Errorf("setting up the DevTools session: %w (Chromium said: %s)", err, c.Output())}
	}
	in.Browser = product
	loadCtx, cancelLoad := context.WithTimeout(tabCtx, o.Timeout)
	defer cancelLoad()
	navErr := chromedp.Run(loadCtx, chromedp.ActionFunc(func(ctx context.Context) error {
		_, _, errText, _, err := page.Navigate(o.URL).Do(ctx)
		if err == nil && errText != "" {
			err = errors.New(errText)
		}
		return err
	}))
	if navErr != nil {
		in.Requests = rec.result()
		hint := ""
		switch msg := navErr.Error(); {
		case strings.Contains(msg, "CERT") && !o.Insecure:
			hint = ": the server's certificate is not trusted here (-k accepts it)"
		case strings.Contains(msg, "NAME_NOT_RESOLVED"):
			hint = ": the name did not resolve (give its address with --resolve HOST:PORT:ADDRESS)"
		case strings.Contains(msg, "CONNECTION_REFUSED"), strings.Contains(msg, "ADDRESS_UNREACHABLE"), strings.Contains(msg, "TIMED_OUT"):
			hint = ": the server could not be reached"
		}
		return in, &Error{Kind: KindNavigate, Err: fmt.Errorf("loading %s: %v%s", o.URL, navErr, hint)}
	}
	select {
	case <-rec.loaded:
	case <-loadCtx.Done():
		in.Requests = rec.result()
		if ctx.Err() != nil {
			return in, ctx.Err()
		}
		return in, &Error{Kind: KindNavigate, Err: fmt.Errorf("loading %s: no load event within %v (--timeout)", o.URL, o.Timeout)}
	}
	// Late requests: wait, then until nothing is in flight for a moment.
	deadline := time.Now().Add(o.Timeout)
	wait := time.NewTimer(o.Wait)
	select {
	case <-wait.C:
	case <-ctx.Done():
		wait.Stop()
		return in, ctx.Err()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !rec.quiet(200*time.Millisecond) && time.Now().Before(deadline) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return in, ctx.Err()
		}
	}
	var paint paintTimings
	evalCtx, cancelEval := context.WithTimeout(tabCtx, 10*time.Second)
	defer cancelEval()
	if err := chromedp.Run(evalCtx, chromedp.Evaluate(paintScript, &paint, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})); err == nil && paint.Origin > 0 {
		originNs := int64(paint.Origin * 1e6)
		in.Timings.NavigationStartNs = originNs
		if paint.FP >= 0 {
			in.Timings.FirstPaintNs = originNs + int64(paint.FP*1e6)
		}
		if paint.FCP >= 0 {
			in.Timings.FirstContentfulPaintNs = originNs + int64(paint.FCP*1e6)
		}
	}
	rec.mu.Lock()
	shift := rec.correction()
	in.Timings.LoadNs, in.Timings.DOMContentLoadedNs = shift(rec.loadNs), shift(rec.domNs)
	rec.mu.Unlock()
	in.Requests = rec.result()
	return in, nil
}
