package har

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

func f(x float64) *float64 { return &x }

// page is a small page load as package pageload gives it.
func page() *pageload.Page {
	start := time.Date(2024, 5, 1, 12, 0, 0, 123_456_000, time.UTC).UnixNano()
	rtt := 100.0
	return &pageload.Page{Schema: pageload.Schema, URL: "https://a.test/", Source: pageload.SourceChromium, Browser: "Chrome/156.0.1",
		StartUnixNs: start, FirstContentfulPaintMs: f(450), DOMContentLoadedMs: f(420), LoadMs: f(600),
		Connections: []pageload.PageConnection{{Connection: 1, Host: "a.test", Server: "192.0.2.1:443", Client: "10.0.0.1:40000", TLSVersion: "1.3", ALPN: "h2",
			HandshakeRTTMs: &rtt, InitialWindow: &report.InitialWindow{Segments: 10, Verdict: report.VerdictExact}, Requests: []int{1, 2}}},
		Requests: []pageload.PageRequest{
			{Index: 1, URL: "https://a.test/", Method: "GET", Host: "a.test", Path: "/", Type: "document", Status: 200, ContentType: "text/html",
				Protocol: "h2", Blocking: true, Critical: true, Connection: 1, NewConnection: true, Rounds: []int{2, 3}, Bytes: 12000, StartMs: 1,
				RequestMs: f(201), FirstByteMs: f(301), LastByteMs: f(401),
				Browser: pageload.BrowserTiming{ConnectStartMs: f(2), ConnectEndMs: f(200), RequestMs: f(201), FirstByteMs: f(302), LastByteMs: f(402),
					Remote: "192.0.2.1:443", ConnectionID: "7", Bytes: 12050}},
			{Index: 2, URL: "https://a.test/a.css?v=2", Method: "GET", Host: "a.test", Path: "/a.css?v=2", Type: "stylesheet", Status: 200, ContentType: "text/css",
				Protocol: "h2", RenderBlocking: pageload.RenderBlocking, Blocking: true, Initiator: 1, Connection: 1, Rounds: []int{4}, Bytes: 5000, StartMs: 305,
				Browser: pageload.BrowserTiming{RequestMs: f(306), FirstByteMs: f(405), LastByteMs: f(410), Remote: "192.0.2.1:443", ConnectionID: "7", Bytes: 5040}},
		},
		CriticalPath: pageload.CriticalPath{RoundTrips: 5, Ms: 410, Steps: []pageload.Step{{Request: 1}, {Request: 2}}},
		Report:       &report.Report{Connections: []report.Connection{{Index: 1, Client: "10.0.0.1:40000", Server: "192.0.2.1:443"}}},
	}
}

// TestWriteRead: a page written as a HAR reads back as the same requests, with
// the standard fields a viewer needs and slowstart's extensions.
func TestWriteRead(t *testing.T) {
	p := page()
	var b bytes.Buffer
	if err := Write(&b, FromPage(p, "slowstart", "test")); err != nil {
		t.Fatal(err)
	}
	// The standard structure, read generically as a HAR viewer would.
	var generic map[string]any
	if err := json.Unmarshal(b.Bytes(), &generic); err != nil {
		t.Fatal(err)
	}
	log := generic["log"].(map[string]any)
	if log["version"] != "1.2" || log["creator"].(map[string]any)["name"] != "slowstart" {
		t.Errorf("log header %v", log)
	}
	entries := log["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("%d entries", len(entries))
	}
	for _, key := range []string{"startedDateTime", "time", "request", "response", "cache", "timings", "_connection", "_rounds"} {
		if _, ok := entries[0].(map[string]any)[key]; !ok {
			t.Errorf("entry lacks %q", key)
		}
	}
	e0 := entries[0].(map[string]any)
	if e0["connection"] != "40000" || e0["serverIPAddress"] != "192.0.2.1" || e0["startedDateTime"] != "2024-05-01T12:00:00.124456Z" {
		t.Errorf("entry 1: connection %v, server %v, started %v", e0["connection"], e0["serverIPAddress"], e0["startedDateTime"])
	}
	timings := e0["timings"].(map[string]any)
	// blocked 1 ms (start 1 → connect 2), connect 198, send 1 (→ 201), wait 101
	// (→ 302), receive 100.
	if timings["blocked"] != 1.0 || timings["connect"] != 198.0 || timings["send"] != 1.0 || timings["wait"] != 101.0 || timings["receive"] != 100.0 || e0["time"] != 401.0 {
		t.Errorf("timings %v, time %v", timings, e0["time"])
	}
	h, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ToInput(h)
	if err != nil {
		t.Fatal(err)
	}
	if in.URL != "https://a.test/" || len(in.Requests) != 2 || in.Timings.FirstContentfulPaintNs != p.StartUnixNs+450e6 {
		t.Fatalf("input %+v", in)
	}
	r := in.Requests[1]
	ms := func(ns int64) float64 { return float64(ns-p.StartUnixNs) / 1e6 }
	if r.URL != "https://a.test/a.css?v=2" || r.Type != "stylesheet" || r.RenderBlocking != pageload.RenderBlocking || r.InitiatorURL != "https://a.test/" ||
		r.RemoteAddr != "192.0.2.1:443" || r.Protocol != "h2" || ms(r.StartNs) != 305 || ms(r.SentNs) != 306 || ms(r.LastByteNs) != 410 || r.EncodedBytes != 5040 {
		t.Errorf("stylesheet read back as %+v (start %.3f, sent %.3f, last %.3f)", r, ms(r.StartNs), ms(r.SentNs), ms(r.LastByteNs))
	}
	if d := in.Requests[0]; ms(d.ConnectStartNs) != 2 || ms(d.ConnectEndNs) != 200 {
		t.Errorf("document's connection %.3f to %.3f ms, want 2 to 200", ms(d.ConnectStartNs), ms(d.ConnectEndNs))
	}
}

// chromeHAR is the shape of Chrome DevTools' "Save all as HAR" (trimmed).
const chromeHAR = `{"log":{"version":"1.2","creator":{"name":"WebInspector","version":"537.36"},
"pages":[{"startedDateTime":"2024-05-01T12:00:00.000Z","id":"page_1","title":"https://b.test/","pageTimings":{"onContentLoad":320.5,"onLoad":510.25}}],
"entries":[
{"_initiator":{"type":"other"},"_priority":"VeryHigh","_resourceType":"document","cache":{},"connection":"1234","pageref":"page_1",
 "request":{"method":"GET","url":"https://b.test/","httpVersion":"http/2.0","headers":[],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":0},
 "response":{"status":200,"statusText":"","httpVersion":"http/2.0","headers":[],"cookies":[],"content":{"size":5000,"mimeType":"text/html"},"redirectURL":"","headersSize":-1,"bodySize":-1,"_transferSize":5120,"_error":null},
 "serverIPAddress":"[2001:db8::1]","startedDateTime":"2024-05-01T12:00:00.010Z","time":250.5,
 "timings":{"blocked":0.5,"dns":10,"ssl":80,"connect":150,"send":0.2,"wait":60,"receive":29.8,"_blocked_queueing":0.3}},
{"_initiator":{"type":"parser","url":"https://b.test/","lineNumber":3},"_priority":"VeryHigh","_resourceType":"stylesheet","cache":{},"connection":"1234","pageref":"page_1",
 "request":{"method":"GET","url":"https://b.test/s.css","httpVersion":"http/2.0","headers":[],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":0},
 "response":{"status":200,"statusText":"","httpVersion":"http/2.0","headers":[],"cookies":[],"content":{"size":900,"mimeType":"text/css"},"redirectURL":"","headersSize":-1,"bodySize":-1,"_transferSize":1000},
 "serverIPAddress":"[2001:db8::1]","startedDateTime":"2024-05-01T12:00:00.270Z","time":100,
 "timings":{"blocked":1,"dns":-1,"ssl":-1,"connect":-1,"send":0,"wait":98,"receive":1}}]}}`

// webPageTestHAR is the shape of WebPageTest's HAR (trimmed): _renderBlocking,
// _request_type, _initiator as a URL.
const webPageTestHAR = "\ufeff" + `{"log":{"version":"1.1","creator":{"name":"WebPagetest","version":"21.07"},"browser":{"name":"Chrome","version":"126.0"},
"pages":[{"startedDateTime":"2024-05-01T12:00:00+00:00","id":"page_1_0_1","title":"Run 1","pageTimings":{"onLoad":900,"onContentLoad":-1},"_firstContentfulPaint":700}],
"entries":[
{"pageref":"page_1_0_1","startedDateTime":"2024-05-01T12:00:00.050+00:00","time":300,"request":{"method":"GET","url":"https://c.test/","httpVersion":"HTTP/1.1","headers":[],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":-1},
 "response":{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","headers":[],"cookies":[],"content":{"size":3000,"mimeType":"text/html; charset=utf-8"},"redirectURL":"","headersSize":200,"bodySize":3000},
 "cache":{},"timings":{"blocked":-1,"dns":20,"connect":180,"ssl":90,"send":0,"wait":80,"receive":20},"serverIPAddress":"192.0.2.7","_renderBlocking":"","_request_type":"Document","_initiator":""},
{"pageref":"page_1_0_1","startedDateTime":"2024-05-01T12:00:00.400+00:00","time":200,"request":{"method":"GET","url":"https://c.test/app.js","httpVersion":"HTTP/1.1","headers":[],"queryString":[],"cookies":[],"headersSize":-1,"bodySize":-1},
 "response":{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","headers":[],"cookies":[],"content":{"size":9000,"mimeType":"application/javascript"},"redirectURL":"","headersSize":210,"bodySize":9000},
 "cache":{},"timings":{"blocked":-1,"dns":-1,"connect":-1,"ssl":-1,"send":0,"wait":100,"receive":100},"serverIPAddress":"192.0.2.7","_renderBlocking":"blocking","_request_type":"Script","_initiator":"https://c.test/"}]}}`

func TestReadOtherHARs(t *testing.T) {
	h, err := Read(strings.NewReader(chromeHAR))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ToInput(h)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	ms := func(ns int64) float64 { return float64(ns-start) / 1e6 }
	if in.URL != "https://b.test/" || len(in.Requests) != 2 || ms(in.Timings.LoadNs) != 510.25 {
		t.Fatalf("Chrome HAR read as %+v", in)
	}
	d, s := in.Requests[0], in.Requests[1]
	// Document: started 10, blocked 0.5 and DNS 10 before connecting at 20.5 for
	// 150 ms; sent at 170.7; first byte after the wait at 230.7; last at 260.5.
	if d.Type != "document" || d.RemoteAddr != "[2001:db8::1]:443" || d.ConnectionID != "1234" || ms(d.ConnectStartNs) != 20.5 ||
		ms(d.SentNs) != 170.7 || ms(d.FirstByteNs) != 230.7 || ms(d.LastByteNs) != 260.5 || d.EncodedBytes != 5120 {
		t.Errorf("document read as %+v (connect %.3f, sent %.3f, first %.3f, last %.3f)", d, ms(d.ConnectStartNs), ms(d.SentNs), ms(d.FirstByteNs), ms(d.LastByteNs))
	}
	if s.InitiatorURL != "https://b.test/" || s.InitiatorType != "parser" || s.ConnectStartNs != 0 || s.Protocol != "h2" {
		t.Errorf("stylesheet read as %+v", s)
	}

	h, err = Read(strings.NewReader(webPageTestHAR))
	if err != nil {
		t.Fatal(err)
	}
	in, err = ToInput(h)
	if err != nil {
		t.Fatal(err)
	}
	if in.Browser != "Chrome/126.0" || in.URL != "https://c.test/" || len(in.Requests) != 2 || ms(in.Timings.FirstContentfulPaintNs) != 700 || in.Timings.DOMContentLoadedNs != 0 {
		t.Fatalf("WebPageTest HAR read as %+v", in)
	}
	js := in.Requests[1]
	if js.Type != "script" || js.RenderBlocking != pageload.RenderBlocking || js.InitiatorURL != "https://c.test/" || js.Protocol != "http/1.1" ||
		js.RemoteAddr != "192.0.2.7:443" || js.EncodedBytes != 9210 || in.Requests[0].MimeType != "text/html" {
		t.Errorf("script read as %+v", js)
	}

	for _, bad := range []string{"", "{}", `{"log":{}}`, "[1,2]", `{"log":{"version":"1.2","entries":[{"startedDateTime":"yesterday"}]}}`} {
		h, err := Read(strings.NewReader(bad))
		if err == nil {
			_, err = ToInput(h)
		}
		if err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}
