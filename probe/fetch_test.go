package probe

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/report"
)

// TestRequestSentOverHTTP2 fetches from a real HTTP/2 server (net/http's, over TLS
// on loopback) and checks that the request's sending time is there. Over HTTP/2,
// net/http reports the request written from the goroutine that wrote it, which can
// run after the response has been read; the probe used not to wait for it and then
// reported request_sent_ms 0. It waits now (package httptiming), so every run has
// the request sent after the TLS handshake and no later than its last byte.
func TestRequestSentOverHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 20000)))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	const runs = 20
	res, _, err := runWithoutCapture(t, Options{URL: srv.URL, RootCAs: roots, Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	var timings []*report.ClientTiming
	for _, c := range res.Report.Connections {
		if c.ClientTiming != nil {
			timings = append(timings, c.ClientTiming)
		}
	}
	if len(timings) != runs {
		t.Fatalf("%d client timings, want %d", len(timings), runs)
	}
	for i, ct := range timings {
		if ct.Protocol != "HTTP/2" {
			t.Fatalf("run %d spoke %s, want HTTP/2", i+1, ct.Protocol)
		}
		if ct.TLSAtMs == nil || ct.RequestSentMs <= 0 || ct.RequestSentMs < *ct.TLSAtMs || ct.RequestSentMs > ct.LastByteAtMs {
			t.Errorf("run %d: request sent at %v ms (TLS done at %v ms, last byte at %v ms): want it between the two",
				i+1, ct.RequestSentMs, deref(ct.TLSAtMs), ct.LastByteAtMs)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
