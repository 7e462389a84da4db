package har

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/pageload"
)

// FromPage writes a page load as a HAR: one page, one entry per request with the
// browser's timings (the standard fields), and slowstart's extensions: the
// connection (_connection), the rounds of the response (_rounds), whether the
// first render waited for it (_blocking) and whether it is on the critical path
// (_critical), the capture's times (_capture); Chrome's _initiator,
// _resourceType and _priority, and WebPageTest's _renderBlocking.
func FromPage(p *pageload.Page, creator, version string) *HAR {
	h := &HAR{Log: Log{Version: Version, Creator: Creator{Name: creator, Version: version}, Entries: []Entry{}}}
	if p.Browser != "" {
		name, ver, _ := strings.Cut(p.Browser, "/")
		h.Log.Browser = &Creator{Name: name, Version: ver}
	}
	page := Page{StartedDateTime: formatTime(p.StartUnixNs), ID: "page_1", Title: p.URL,
		PageTimings:          PageTimings{OnContentLoad: orMinus(p.DOMContentLoadedMs), OnLoad: orMinus(p.LoadMs)},
		FirstContentfulPaint: p.FirstContentfulPaintMs, FirstPaint: p.FirstPaintMs,
		CriticalPath: &CriticalPath{RoundTrips: p.CriticalPath.RoundTrips, Ms: p.CriticalPath.Ms, Requests: []int{}}}
	for _, s := range p.CriticalPath.Steps {
		page.CriticalPath.Requests = append(page.CriticalPath.Requests, s.Request-1)
	}
	h.Log.Pages = []Page{page}
	conns := map[int]pageload.PageConnection{}
	for _, c := range p.Connections {
		conns[c.Connection] = c
	}
	clients := map[int]string{}
	if p.Report != nil {
		for _, c := range p.Report.Connections {
			clients[c.Index] = c.Client
		}
	}
	for _, r := range p.Requests {
		e := Entry{Pageref: "page_1", StartedDateTime: formatTime(p.StartUnixNs + int64(r.StartMs*1e6)),
			Request: Request{Method: r.Method, URL: r.URL, HTTPVersion: httpVersion(r.Protocol), Cookies: []NameValue{},
				Headers: []NameValue{}, QueryString: queryString(r.URL), HeadersSize: -1, BodySize: 0},
			Response: Response{Status: r.Status, HTTPVersion: httpVersion(r.Protocol), Cookies: []NameValue{}, Headers: []NameValue{},
				Content: Content{Size: r.Browser.Bytes, MimeType: r.ContentType}, HeadersSize: -1, BodySize: -1},
			ResourceType: r.Type, Priority: r.Browser.Priority, RenderBlocking: strings.ReplaceAll(r.RenderBlocking, "_", "-"),
			Rounds: r.Rounds, Blocking: &r.Blocking, Critical: &r.Critical,
			Capture: &CaptureTime{RequestMs: r.RequestMs, FirstByteMs: r.FirstByteMs, LastByteMs: r.LastByteMs, Bytes: r.Bytes}}
		e.Response.StatusText = statusText(r.Status)
		transfer := r.Browser.Bytes
		e.Response.TransferSize = &transfer
		if r.Browser.FromCache {
			e.FromCache = "disk"
		}
		if r.Initiator > 0 && r.Initiator <= len(p.Requests) {
			init, _ := json.Marshal(map[string]string{"type": "parser", "url": p.Requests[r.Initiator-1].URL})
			e.Initiator = init
		} else {
			e.Initiator = json.RawMessage(`{"type":"other"}`)
		}
		if r.Browser.Remote != "" {
			if a, err := netip.ParseAddrPort(r.Browser.Remote); err == nil {
				e.ServerIPAddress = a.Addr().String()
			}
		}
		e.Timings, e.Time = timings(r)
		if c, ok := conns[r.Connection]; ok && r.Connection > 0 {
			e.SlowstartConnection = &Connection{Index: c.Connection, Client: c.Client, Server: c.Server, New: r.NewConnection,
				TLSVersion: c.TLSVersion, ALPN: c.ALPN, HandshakeRTTMs: c.HandshakeRTTMs, InitialWindow: pageload.IWText(c.InitialWindow)}
			if _, port, err := net.SplitHostPort(clients[c.Connection]); err == nil {
				e.Connection = port // HAR: "can be the client or server port number"
			}
			if e.ServerIPAddress == "" {
				if a, err := netip.ParseAddrPort(c.Server); err == nil {
					e.ServerIPAddress = a.Addr().String()
				}
			}
		} else if r.Browser.ConnectionID != "" {
			e.Connection = r.Browser.ConnectionID
		}
		h.Log.Entries = append(h.Log.Entries, e)
	}
	return h
}

// timings are an entry's phases from the browser's times (the capture's when the
// browser has none), and their sum.
func timings(r pageload.PageRequest) (Timings, float64) {
	t := Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1}
	pick := func(browser, capture *float64) *float64 {
		if browser != nil {
			return browser
		}
		return capture
	}
	sent := pick(r.Browser.RequestMs, r.RequestMs)
	first := pick(r.Browser.FirstByteMs, r.FirstByteMs)
	last := pick(r.Browser.LastByteMs, r.LastByteMs)
	start := r.StartMs
	at := start
	if cs, ce := r.Browser.ConnectStartMs, r.Browser.ConnectEndMs; cs != nil && ce != nil && *ce >= *cs {
		t.Blocked = round3(math.Max(*cs-start, 0))
		t.Connect = round3(*ce - *cs)
		at = *ce
	}
	t.Send = 0
	if sent != nil {
		if t.Blocked < 0 {
			t.Blocked = round3(math.Max(*sent-start, 0))
		} else {
			// From the connection's end to the request: sending it.
			t.Send = round3(math.Max(*sent-at, 0))
		}
		at = max(at, *sent)
	}
	if first != nil {
		t.Wait = round3(math.Max(*first-at, 0))
		at = *first
	}
	if last != nil {
		t.Receive = round3(math.Max(*last-at, 0))
		at = *last
	}
	return t, round3(at - start)
}

func orMinus(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// httpVersion names a protocol as HAR writers do.
func httpVersion(p string) string {
	switch strings.ToLower(p) {
	case "h2":
		return "http/2.0"
	case "h3":
		return "http/3.0"
	case "":
		return "unknown"
	}
	return strings.ToUpper(p)
}

func queryString(raw string) []NameValue {
	out := []NameValue{}
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	for k, vs := range u.Query() {
		for _, v := range vs {
			out = append(out, NameValue{Name: k, Value: v})
		}
	}
	return out
}

func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 304:
		return "Not Modified"
	case 404:
		return "Not Found"
	}
	return ""
}

// ToInput reads the HAR's first page (or, without pages, all entries) as the
// requests of a page load.
func ToInput(h *HAR) (pageload.Input, error) {
	in := pageload.Input{Source: pageload.SourceHAR}
	if h.Log.Browser != nil {
		in.Browser = strings.TrimSpace(h.Log.Browser.Name + "/" + h.Log.Browser.Version)
	} else if h.Log.Creator.Name != "" {
		in.Browser = strings.TrimSpace(h.Log.Creator.Name + "/" + h.Log.Creator.Version)
	}
	pageID := ""
	if len(h.Log.Pages) > 0 {
		p := h.Log.Pages[0]
		pageID = p.ID
		in.URL = p.Title
		start, err := parseTime(p.StartedDateTime)
		if err != nil {
			return in, fmt.Errorf("page %s: %w", p.ID, err)
		}
		in.Timings.NavigationStartNs = start
		at := func(ms float64) int64 {
			if ms < 0 {
				return 0
			}
			return start + int64(ms*1e6)
		}
		in.Timings.DOMContentLoadedNs = at(p.PageTimings.OnContentLoad)
		in.Timings.LoadNs = at(p.PageTimings.OnLoad)
		if p.FirstContentfulPaint != nil {
			in.Timings.FirstContentfulPaintNs = at(*p.FirstContentfulPaint)
		}
		if p.FirstPaint != nil {
			in.Timings.FirstPaintNs = at(*p.FirstPaint)
		}
	}
	for i, e := range h.Log.Entries {
		if pageID != "" && e.Pageref != "" && e.Pageref != pageID {
			continue
		}
		if len(in.Requests) == pageload.MaxRequests {
			return in, fmt.Errorf("the page holds more than %d requests, more than a page load slowstart places (a HAR of many pages: save one page)", pageload.MaxRequests)
		}
		r, err := entryRequest(e)
		if err != nil {
			return in, fmt.Errorf("entry %d (%s): %w", i+1, e.Request.URL, err)
		}
		r.ID = strconv.Itoa(i + 1)
		in.Requests = append(in.Requests, r)
	}
	if in.URL == "" || !strings.Contains(in.URL, "://") {
		for _, r := range in.Requests {
			if r.Type == pageload.TypeDocument {
				in.URL = r.URL
				break
			}
		}
		if in.URL == "" && len(in.Requests) > 0 {
			in.URL = in.Requests[0].URL
		}
	}
	return in, nil
}

// entryRequest reads one entry.
func entryRequest(e Entry) (pageload.Request, error) {
	r := pageload.Request{URL: e.Request.URL, Method: e.Request.Method, Status: e.Response.Status,
		MimeType: e.Response.Content.MimeType, Protocol: protocol(e.Response.HTTPVersion, e.Request.HTTPVersion),
		ConnectionID: e.Connection, Priority: e.Priority, RedirectTo: e.Response.RedirectURL}
	if i := strings.IndexByte(r.MimeType, ';'); i >= 0 {
		r.MimeType = strings.TrimSpace(r.MimeType[:i])
	}
	r.Type = strings.ToLower(e.ResourceType)
	if r.Type == "" {
		r.Type = strings.ToLower(e.RequestType)
	}
	if r.Type == "" {
		r.Type = typeFromMime(r.MimeType)
	}
	r.RenderBlocking = strings.ReplaceAll(strings.ToLower(e.RenderBlocking), "-", "_")
	if len(e.Initiator) > 0 {
		var obj struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Initiator, &obj) == nil:
			r.InitiatorType, r.InitiatorURL = obj.Type, obj.URL
		case json.Unmarshal(e.Initiator, &s) == nil:
			r.InitiatorURL = s
		}
	}
	r.FromCache = e.FromCache != "" || (e.Response.Status == 0 && e.Timings.Receive <= 0 && e.Time == 0)
	if e.ServerIPAddress != "" {
		if port := urlPort(e.Request.URL); port != 0 {
			if a, err := netip.ParseAddr(strings.Trim(e.ServerIPAddress, "[]")); err == nil {
				r.RemoteAddr = netip.AddrPortFrom(a.Unmap(), port).String()
			}
		}
	}
	start, err := parseTime(e.StartedDateTime)
	if err != nil {
		return r, err
	}
	r.StartNs = start
	ms := func(x float64) int64 { return int64(math.Max(x, 0) * 1e6) }
	at := start + ms(e.Timings.Blocked) + ms(e.Timings.DNS)
	if e.Timings.Connect > 0 {
		r.ConnectStartNs = at
		at += ms(e.Timings.Connect)
		r.ConnectEndNs = at
	}
	at += ms(e.Timings.Send)
	r.SentNs = at
	at += ms(e.Timings.Wait)
	r.FirstByteNs = at
	at += ms(e.Timings.Receive)
	r.LastByteNs = at
	switch {
	case e.Response.TransferSize != nil && *e.Response.TransferSize > 0:
		r.EncodedBytes = *e.Response.TransferSize
	case e.Response.HeadersSize > 0 || e.Response.BodySize > 0:
		r.EncodedBytes = max(e.Response.HeadersSize, 0) + max(e.Response.BodySize, 0)
	}
	return r, nil
}

// protocol reads a HAR's httpVersion as an ALPN id.
func protocol(versions ...string) string {
	for _, v := range versions {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "h2", "http/2.0", "http/2", "http2":
			return "h2"
		case "h3", "http/3.0", "http/3", "h3-29":
			return "h3"
		case "http/1.1":
			return "http/1.1"
		case "http/1.0":
			return "http/1.0"
		}
	}
	return ""
}

func urlPort(raw string) uint16 {
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0
		}
		return uint16(n)
	}
	switch u.Scheme {
	case "https", "wss":
		return 443
	case "http", "ws":
		return 80
	}
	return 0
}

// typeFromMime guesses a resource type from the content type, for HARs without
// one.
func typeFromMime(mime string) string {
	switch {
	case mime == "text/html":
		return pageload.TypeDocument
	case mime == "text/css":
		return pageload.TypeStylesheet
	case strings.Contains(mime, "javascript") || strings.Contains(mime, "ecmascript"):
		return pageload.TypeScript
	case strings.HasPrefix(mime, "font/") || strings.Contains(mime, "font"):
		return pageload.TypeFont
	case strings.HasPrefix(mime, "image/"):
		return pageload.TypeImage
	}
	return "other"
}
