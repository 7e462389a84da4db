package web

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/report"
)

func testReport() *report.Report {
	rtt := 40.5
	return &report.Report{
		Schema: report.Schema,
		Tool:   "slowstart test",
		Source: report.Source{Kind: "file", Path: "/captures/a <b>.pcap", Format: "pcap", Packets: 3},
		Connections: []report.Connection{{
			Index: 1, Client: "10.0.0.2:40000", Server: "10.0.0.1:80", Vantage: "client",
			HandshakeRTTMs: &rtt, MinRTTMs: rtt, MSS: 1448, Closed: "fin",
			// A string that would end an inline script if it were not escaped.
			Notes: []string{"</script><script>alert(1)</script>"},
			Packets: []report.Packet{
				{TimeMs: 0, Dir: "c2s", Flags: "S", Ack: -1, Win: 64240},
				{TimeMs: 40.5, Dir: "s2c", Flags: "SA", Win: 65160},
				{TimeMs: 40.6, Dir: "c2s", Flags: "A", Ack: 0, Win: 64512},
			},
		}},
	}
}

func TestHandlerRoutes(t *testing.T) {
	h, err := NewHandler(testReport(), HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path, host string
		wantStatus         int
		wantType           string // a substring of Content-Type when the status is 200
		wantBody           string // a substring of the body when the status is 200
	}{
		{"GET", "/", "127.0.0.1:8040", 200, "text/html", `src="assets/app.js"`},
		{"HEAD", "/", "127.0.0.1:8040", 200, "text/html", ""},
		{"GET", "/api/report", "localhost:8040", 200, "application/json", `"schema":"slowstart.report/v1"`},
		{"GET", "/assets/app.js", "[::1]:8040", 200, "javascript", ""},
		{"GET", "/assets/app.css", "127.0.0.1", 200, "text/css", ""},
		{"GET", "/assets/", "127.0.0.1:8040", 404, "", ""},
		{"GET", "/assets/missing.js", "127.0.0.1:8040", 404, "", ""},
		{"GET", "/assets/assets/app.js", "127.0.0.1:8040", 404, "", ""},
		{"GET", "/index.html", "127.0.0.1:8040", 404, "", ""},
		{"GET", "/web.go", "127.0.0.1:8040", 404, "", ""},
		{"GET", "/dist/assets/app.js", "127.0.0.1:8040", 404, "", ""},
		{"GET", "/api/report/extra", "127.0.0.1:8040", 404, "", ""},
		{"POST", "/api/report", "127.0.0.1:8040", 405, "", ""},
		{"GET", "/", "attacker.example:8040", 421, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" "+tt.host, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Host = tt.host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			res := rec.Result()
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			if tt.wantStatus != 200 {
				return
			}
			if ct := res.Header.Get("Content-Type"); !strings.Contains(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %q", ct, tt.wantType)
			}
			body, _ := io.ReadAll(res.Body)
			if !bytes.Contains(body, []byte(tt.wantBody)) {
				t.Errorf("body lacks %q", tt.wantBody)
			}
		})
	}
}

func TestHandlerAnyHost(t *testing.T) {
	h, err := NewHandler(testReport(), HandlerOptions{AnyHost: true})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "viewer.example:8040"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d with AnyHost, want 200", rec.Code)
	}
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, testReport()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// No external references: no src= or href= other than the data: icon.
	for _, m := range regexp.MustCompile(`(?i)(src|href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[2], "data:") {
			t.Errorf("the page refers to %q", m[2])
		}
	}
	// The title is escaped.
	if !strings.Contains(page, "<title>slowstart · a &lt;b&gt;.pcap</title>") {
		t.Errorf("title not found or not escaped")
	}
	// The Report can't close its script element: exactly two </script> tags.
	if n := strings.Count(strings.ToLower(page), "</script"); n != 2 {
		t.Errorf("%d </script tags, want 2 (the data and the code)", n)
	}
	// The CSP's hashes match the inline script and style.
	csp := regexp.MustCompile(`script-src '([^']+)'; style-src '([^']+)'`).FindStringSubmatch(page)
	if csp == nil {
		t.Fatal("no CSP meta with hashes")
	}
	script := regexp.MustCompile(`(?s)<script type="module">(.*?)</script>`).FindStringSubmatch(page)
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(page)
	if script == nil || style == nil {
		t.Fatal("no inline script or style")
	}
	if got := hashSource([]byte(script[1])); got != csp[1] {
		t.Errorf("script hash %s, CSP allows %s", got, csp[1])
	}
	if got := hashSource([]byte(style[1])); got != csp[2] {
		t.Errorf("style hash %s, CSP allows %s", got, csp[2])
	}
}

func TestNoReport(t *testing.T) {
	if _, err := NewHandler(nil, HandlerOptions{}); err == nil {
		t.Error("NewHandler(nil) succeeded")
	}
	if err := WriteHTML(io.Discard, nil); err == nil {
		t.Error("WriteHTML(nil) succeeded")
	}
}
