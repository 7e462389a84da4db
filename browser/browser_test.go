package browser

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"

	"github.com/slowstart/slowstart/pageload"
)

// TestFlags: the flags a first visit needs, QUIC off unless asked for, and the
// options mapped to Chromium's switches.
func TestFlags(t *testing.T) {
	o := &Options{URL: "https://a.test:8443/x", Resolve: map[string]netip.Addr{
		"a.test:8443": netip.MustParseAddr("192.0.2.1"), "b.test:443": netip.MustParseAddr("2001:db8::2")}}
	flags := Flags(o)
	for _, want := range []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--host-resolver-rules=MAP a.test:8443 192.0.2.1, MAP b.test:443 [2001:db8::2]"} {
		if !slices.Contains(flags, want) {
			t.Errorf("flags lack %q: %v", want, flags)
		}
	}
	for _, unwanted := range []string{"--ignore-certificate-errors", "--disable-http2", "--enable-quic"} {
		if slices.Contains(flags, unwanted) {
			t.Errorf("flags hold %q without the option", unwanted)
		}
	}
	o.HTTP3, o.Insecure, o.HTTP1Only = true, true, true
	flags = Flags(o)
	for _, want := range []string{"--enable-quic", "--origin-to-force-quic-on=a.test:8443", "--ignore-certificate-errors", "--disable-http2"} {
		if !slices.Contains(flags, want) {
			t.Errorf("flags lack %q: %v", want, flags)
		}
	}
	if slices.Contains(flags, "--disable-quic") {
		t.Error("QUIC is off although HTTP/3 was asked for")
	}
}

// TestRecorder: DevTools events become requests on the wall clock: a redirect
// is a request of its own that names the next hop, times of responseReceived's
// timing (seconds on the monotonic clock plus ms) are put on the wall clock with
// requestWillBeSent's offset, and the load event ends the load.
func TestRecorder(t *testing.T) {
	r := newRecorder()
	mono := func(s float64) *cdp.MonotonicTime {
		m := cdp.MonotonicTime(cdp.MonotonicTimeEpoch.Add(time.Duration(s * 1e9)))
		return &m
	}
	wall := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	wallAt := func(d time.Duration) *cdp.TimeSinceEpoch { w := cdp.TimeSinceEpoch(wall.Add(d)); return &w }
	// Monotonic 100 s is wall 12:00:00.
	r.handle(&network.EventRequestWillBeSent{RequestID: "1", Type: network.ResourceTypeDocument, Timestamp: mono(100), WallTime: wallAt(0),
		Request: &network.Request{URL: "http://a.test/", Method: "GET"}, Initiator: &network.Initiator{Type: "other"}})
	r.handle(&network.EventRequestWillBeSent{RequestID: "1", Type: network.ResourceTypeDocument, Timestamp: mono(100.2), WallTime: wallAt(200 * time.Millisecond),
		Request:          &network.Request{URL: "https://a.test/", Method: "GET"},
		RedirectResponse: &network.Response{Status: 301, RemoteIPAddress: "192.0.2.1", RemotePort: 80, Protocol: "http/1.1", ConnectionID: 7}})
	r.handle(&network.EventResponseReceived{RequestID: "1", Type: network.ResourceTypeDocument, Response: &network.Response{Status: 200,
		MimeType: "text/html", Protocol: "h2", RemoteIPAddress: "192.0.2.1", RemotePort: 443, ConnectionID: 9,
		Timing: &network.ResourceTiming{RequestTime: 100.2, ConnectStart: 1, ConnectEnd: 150, SendStart: 151, ReceiveHeadersStart: 260, ReceiveHeadersEnd: 261}}})
	r.handle(&network.EventRequestWillBeSent{RequestID: "2", Type: network.ResourceTypeStylesheet, Timestamp: mono(100.5), WallTime: wallAt(500 * time.Millisecond),
		Request: &network.Request{URL: "https://a.test/s.css", Method: "GET"}, Initiator: &network.Initiator{Type: "parser", URL: "https://a.test/"},
		RenderBlockingBehavior: network.RenderBlockingBehaviorBlocking})
	r.handle(&network.EventLoadingFinished{RequestID: "1", Timestamp: mono(100.47), EncodedDataLength: 12000})
	r.handle(&network.EventLoadingFailed{RequestID: "2", Timestamp: mono(100.6), ErrorText: "net::ERR_ABORTED", Canceled: true})
	r.handle(&page.EventLoadEventFired{Timestamp: mono(101)})
	select {
	case <-r.loaded:
	default:
		t.Error("the load event did not end the load")
	}
	reqs := r.result()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want the redirect, the document and the stylesheet: %+v", len(reqs), reqs)
	}
	ms := func(ns int64) float64 { return float64(ns-wall.UnixNano()) / 1e6 }
	hop, doc, css := reqs[0], reqs[1], reqs[2]
	if hop.Status != 301 || hop.RedirectTo != "https://a.test/" || hop.RemoteAddr != "192.0.2.1:80" || ms(hop.LastByteNs) != 200 {
		t.Errorf("the redirect: %+v", hop)
	}
	if doc.ID != "1#1" || doc.InitiatorURL != "http://a.test/" || doc.Status != 200 || doc.RemoteAddr != "192.0.2.1:443" || doc.ConnectionID != "9" ||
		ms(doc.StartNs) != 200 || ms(doc.ConnectStartNs) != 201 || ms(doc.SentNs) != 351 || ms(doc.FirstByteNs) != 460 || ms(doc.LastByteNs) != 470 || doc.EncodedBytes != 12000 {
		t.Errorf("the document: %+v (start %.3f, connect %.3f, sent %.3f, first %.3f, last %.3f)", doc,
			ms(doc.StartNs), ms(doc.ConnectStartNs), ms(doc.SentNs), ms(doc.FirstByteNs), ms(doc.LastByteNs))
	}
	if css.Type != pageload.TypeStylesheet || css.RenderBlocking != pageload.RenderBlocking || css.InitiatorURL != "https://a.test/" ||
		!strings.Contains(css.Failed, "ERR_ABORTED") || !strings.Contains(css.Failed, "canceled") {
		t.Errorf("the stylesheet: %+v", css)
	}
	if !r.quiet(0) {
		t.Error("requests still in flight after they finished and failed")
	}
}

func TestHostsFile(t *testing.T) {
	path := t.TempDir() + "/hosts"
	if err := os.WriteFile(path, []byte("# lab\n127.0.0.1 localhost\n198.18.0.6  a.test b.test # two names\n2001:db8::1 c.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{"b.test": "198.18.0.6", "C.TEST": "2001:db8::1", "d.test": ""} {
		a, ok := lookupHostsFile(path, host)
		if (want == "") == ok || (ok && a.String() != want) {
			t.Errorf("%s: %v %v, want %q", host, a, ok, want)
		}
	}
}
