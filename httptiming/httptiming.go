// Package httptiming makes one HTTP request over one new connection and reports
// when each step happened: connect start and end, TLS handshake start and end,
// request written, first response byte, last body byte. It is the one HTTP client
// that both the probe (a live site) and the lab (an emulated path) time their
// fetches with, built on net/http's httptrace hooks.
//
// The caller decides where the socket is made (Config.Dial, e.g. in a network
// namespace or to an address already resolved), the TLS settings, the protocols and
// the request's headers. The package does not resolve names, follow redirects,
// capture packets or judge the answer (an error status is a response like any
// other): its callers do.
package httptiming

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// readBufferBytes is the buffer the body is read into.
const readBufferBytes = 64 << 10

// Config says how to make the connection of one exchange.
type Config struct {
	// Dial makes the TCP connection; a plain net.Dialer when nil. The caller
	// provides it so that sockets are made where the caller wants (in a client
	// namespace, to an address it resolved).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// TLS configures https; nil uses net/http's defaults.
	TLS *tls.Config
	// Protocols are the protocols the transport may use (HTTP/1.1, HTTP/2 over
	// TLS, unencrypted HTTP/2); nil: net/http's defaults.
	Protocols *http.Protocols
	// CloseConnection asks the server to close the connection after the response
	// (HTTP/1.1 "Connection: close"), as a one-off visit does; nothing is kept for
	// reuse either way.
	CloseConnection bool

	// afterBody and beforeWroteRequest let this package's tests hold back the
	// request-written report until the body has been read; nil otherwise.
	afterBody, beforeWroteRequest func()
}

// Moments are the instants of one exchange on the monotonic clock; a zero time is
// a step that did not happen (TLS over http) or was not reported.
type Moments struct {
	// ConnectStart and ConnectDone bracket the TCP connect: from the dialer's own
	// hooks when it reports them (a net.Dialer does: just before the SYN, just
	// after the handshake), otherwise from the call to Config.Dial.
	ConnectStart, ConnectDone time.Time
	TLSStart, TLSDone         time.Time
	// RequestWritten is when net/http reported the request written. For HTTP/2 the
	// report comes from the goroutine that wrote the request and can come after
	// the response: Do waits for it.
	RequestWritten time.Time
	FirstByte      time.Time // the first byte of the response (status line or HEADERS)
	LastByte       time.Time // the last body byte read; the end of the body when it was empty
}

// Exchange is what one request gave.
type Exchange struct {
	// Response is the answer, its Body already read to the end (or to BodyErr) and
	// closed; Status, headers, TLS state and ContentLength are as received.
	Response *http.Response
	// BodyBytes counts the body bytes read (as sent, compressed if they were).
	BodyBytes int64
	// BodyErr says why reading the body stopped before its end; nil when it ended.
	BodyErr error
	Moments
	// LocalAddr and RemoteAddr are the connection's ip:port pairs.
	LocalAddr, RemoteAddr string
}

// timeline collects moments from hooks that may run on other goroutines (HTTP/2
// writes requests from its own).
type timeline struct {
	mu                    sync.Mutex
	m                     Moments
	dialStart, dialDone   time.Time
	localAddr, remoteAddr string
}

// set records at in *moment unless it was set before.
func (t *timeline) set(moment *time.Time) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if moment.IsZero() {
		*moment = now
	}
}

// Do sends request over one new connection made as cfg says (a fresh transport,
// nothing reused), reads the whole body and reports the moments of the exchange.
// The error is net/http's when no response came; a body cut short is reported in
// Exchange.BodyErr with the response. The request's context bounds the exchange,
// including the wait for HTTP/2's late request-written report.
func Do(request *http.Request, cfg Config) (*Exchange, error) {
	ctx := request.Context()
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var t timeline
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			t.set(&t.dialStart)
			conn, err := dial(ctx, network, address)
			if err != nil {
				return nil, err
			}
			t.set(&t.dialDone)
			t.mu.Lock()
			t.localAddr, t.remoteAddr = conn.LocalAddr().String(), conn.RemoteAddr().String()
			t.mu.Unlock()
			return conn, nil
		},
		TLSClientConfig:    cfg.TLS,
		Protocols:          cfg.Protocols,
		DisableCompression: true, // bodies are counted as they travel
		DisableKeepAlives:  cfg.CloseConnection,
	}
	if cfg.CloseConnection {
		transport.MaxIdleConnsPerHost = -1
	}
	defer transport.CloseIdleConnections()

	// net/http reports the request written from the goroutine that wrote it,
	// which for HTTP/2 can run after the response has been read.
	written := make(chan struct{})
	var writtenOnce sync.Once
	trace := &httptrace.ClientTrace{
		ConnectStart: func(string, string) { t.set(&t.m.ConnectStart) },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				t.set(&t.m.ConnectDone)
			}
		},
		TLSHandshakeStart: func() { t.set(&t.m.TLSStart) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err == nil {
				t.set(&t.m.TLSDone)
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if cfg.beforeWroteRequest != nil {
				cfg.beforeWroteRequest()
			}
			if info.Err == nil {
				t.set(&t.m.RequestWritten)
			}
			writtenOnce.Do(func() { close(written) })
		},
		GotFirstResponseByte: func() { t.set(&t.m.FirstByte) },
	}
	request = request.WithContext(httptrace.WithClientTrace(ctx, trace))

	response, err := transport.RoundTrip(request)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	ex := &Exchange{Response: response}
	buffer := make([]byte, readBufferBytes)
	for {
		n, err := response.Body.Read(buffer)
		if n > 0 {
			ex.BodyBytes += int64(n)
			ex.LastByte = time.Now()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ex.BodyErr = err
			}
			break
		}
	}
	if ex.LastByte.IsZero() {
		ex.LastByte = time.Now()
	}
	if cfg.afterBody != nil {
		cfg.afterBody()
	}
	select {
	case <-written:
	case <-ctx.Done():
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	lastByte := ex.LastByte
	ex.Moments = t.m
	ex.LastByte = lastByte
	if !ex.FirstByte.IsZero() && ex.RequestWritten.After(ex.FirstByte) {
		// Reported late (HTTP/2's writer goroutine ran after the response
		// came): the request was written before the server could answer it,
		// so the first byte of the answer is the latest it can have been.
		ex.RequestWritten = ex.FirstByte
	}
	if ex.ConnectStart.IsZero() || ex.ConnectDone.IsZero() {
		// The dialer reported nothing (not a net.Dialer): the call to Dial brackets it.
		ex.ConnectStart, ex.ConnectDone = t.dialStart, t.dialDone
	}
	ex.LocalAddr, ex.RemoteAddr = t.localAddr, t.remoteAddr
	return ex, nil
}
