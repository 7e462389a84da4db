package httptiming

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// startServer runs net/http's server on loopback, over TLS with HTTP/2 when h2,
// answering every request with body.
func startServer(t *testing.T, h2 bool, body string) (*httptest.Server, *tls.Config) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(body))
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, &tls.Config{RootCAs: roots, ServerName: "example.com"}
}

func protocols(h2 bool) *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(h2)
	return &p
}

func get(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMomentsInOrder: over HTTP/1.1 and HTTP/2, every moment is reported and they
// come in the order the exchange makes them.
func TestMomentsInOrder(t *testing.T) {
	body := strings.Repeat("x", 100_000)
	for _, h2 := range []bool{false, true} {
		srv, tlsConfig := startServer(t, h2, body)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ex, err := Do(get(t, ctx, srv.URL), Config{TLS: tlsConfig, Protocols: protocols(h2), CloseConnection: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 1, true: 2}[h2]; ex.Response.ProtoMajor != want {
			t.Errorf("HTTP/%d, want HTTP/%d", ex.Response.ProtoMajor, want)
		}
		if ex.BodyBytes != int64(len(body)) || ex.BodyErr != nil {
			t.Errorf("h2 %v: %d body bytes (%v), want %d", h2, ex.BodyBytes, ex.BodyErr, len(body))
		}
		steps := []struct {
			name string
			at   time.Time
		}{{"connect start", ex.ConnectStart}, {"connect done", ex.ConnectDone}, {"TLS start", ex.TLSStart},
			{"TLS done", ex.TLSDone}, {"request written", ex.RequestWritten}, {"last byte", ex.LastByte}}
		for i, s := range steps {
			if s.at.IsZero() {
				t.Errorf("h2 %v: %s not reported", h2, s.name)
			}
			if i > 0 && s.at.Before(steps[i-1].at) {
				t.Errorf("h2 %v: %s before %s", h2, s.name, steps[i-1].name)
			}
		}
		if ex.FirstByte.Before(ex.TLSDone) || ex.LastByte.Before(ex.FirstByte) {
			t.Errorf("h2 %v: first byte %v, TLS done %v, last byte %v", h2, ex.FirstByte, ex.TLSDone, ex.LastByte)
		}
		if ex.RemoteAddr != srv.Listener.Addr().String() || ex.LocalAddr == "" {
			t.Errorf("addresses %q -> %q, server at %s", ex.LocalAddr, ex.RemoteAddr, srv.Listener.Addr())
		}
	}
}

// TestLateRequestWrittenIsWaitedFor holds HTTP/2's request-written report back
// until the whole body has been read, as a busy machine can: Do must wait for it
// rather than report no sending time (the probe's request_sent_ms read 0 over
// HTTP/2 before it used this client), and keep no moment later than the
// answer's first byte (a late report put the request after the last byte on a
// busy machine: probe's TestRequestSentOverHTTP2).
func TestLateRequestWrittenIsWaitedFor(t *testing.T) {
	srv, tlsConfig := startServer(t, true, "hello")
	bodyRead := make(chan struct{})
	cfg := Config{TLS: tlsConfig, Protocols: protocols(true),
		afterBody:          func() { close(bodyRead) },
		beforeWroteRequest: func() { <-bodyRead },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := Do(get(t, ctx, srv.URL), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Response.ProtoMajor != 2 {
		t.Fatalf("HTTP/%d, want HTTP/2", ex.Response.ProtoMajor)
	}
	// The report came after the body; the moment kept is the latest the
	// request can have been written at: the answer's first byte.
	if ex.RequestWritten.IsZero() || !ex.RequestWritten.Equal(ex.FirstByte) {
		t.Errorf("request written at %v, first byte at %v, last at %v: want the late report bounded by the first byte", ex.RequestWritten, ex.FirstByte, ex.LastByte)
	}
	if ctx.Err() != nil {
		t.Error("Do waited until the deadline instead of for the report")
	}
}

// TestConnectWithoutDialerHooks: a Dial function that reports no connect hooks
// (it dials without the request's context) is timed by the call itself.
func TestConnectWithoutDialerHooks(t *testing.T) {
	srv, tlsConfig := startServer(t, false, "ok")
	called := false
	dial := func(_ context.Context, network, address string) (net.Conn, error) {
		called = true
		return (&net.Dialer{}).DialContext(context.Background(), network, address)
	}
	before := time.Now()
	ex, err := Do(get(t, context.Background(), srv.URL), Config{Dial: dial, TLS: tlsConfig, Protocols: protocols(false)})
	if err != nil {
		t.Fatal(err)
	}
	if !called || ex.ConnectStart.Before(before) || ex.ConnectDone.Before(ex.ConnectStart) || ex.TLSStart.Before(ex.ConnectDone) {
		t.Errorf("dial called %v; connect %v to %v, TLS start %v, Do started %v", called, ex.ConnectStart, ex.ConnectDone, ex.TLSStart, before)
	}
}

// TestBodyCutShort: a response that ends before its Content-Length is returned
// with what came and the reason in BodyErr.
func TestBodyCutShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("only this"))
		rc := http.NewResponseController(w)
		rc.Flush()
		conn, _, err := rc.Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	ex, err := Do(get(t, context.Background(), srv.URL), Config{CloseConnection: true})
	if err != nil {
		t.Fatal(err)
	}
	if ex.BodyBytes != int64(len("only this")) || ex.BodyErr == nil || ex.Response.ContentLength != 1000 {
		t.Errorf("%d bytes, error %v, content length %d", ex.BodyBytes, ex.BodyErr, ex.Response.ContentLength)
	}
}
