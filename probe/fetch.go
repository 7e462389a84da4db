package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"time"

	"github.com/slowstart/slowstart/httptiming"
	"github.com/slowstart/slowstart/internal/failure"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/tlsrec"
)

// hop is one request of a probe: a URL and the address to connect to.
type hop struct {
	target target
	addr   netip.Addr
	// dnsDone: when the address came from a lookup, its start and end.
	dnsStart, dnsDone time.Time
	start             time.Time // before the lookup
}

// resolve finds the address of t, from opts.Resolve, an IP literal, or a DNS lookup
// that the trace in ctx times.
func resolve(ctx context.Context, opts *Options, t target) (hop, error) {
	h := hop{target: t, start: time.Now()}
	if a, ok := opts.Resolve[t.hostPort()]; ok {
		h.addr = a
		return h, nil
	}
	if a, err := netip.ParseAddr(t.host); err == nil {
		h.addr = a.Unmap()
		return h, nil
	}
	network := "ip"
	switch opts.IPVersion {
	case IPv4:
		network = "ip4"
	case IPv6:
		network = "ip6"
	}
	trace := &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { h.dnsStart = time.Now() },
		DNSDone:  func(httptrace.DNSDoneInfo) { h.dnsDone = time.Now() },
	}
	addrs, err := net.DefaultResolver.LookupNetIP(httptrace.WithClientTrace(ctx, trace), network, t.host)
	if err != nil {
		return h, classifyFetchError(ctx, t.url.String(), err)
	}
	if h.dnsStart.IsZero() { // the resolver skipped the hooks (e.g. /etc/hosts)
		h.dnsStart, h.dnsDone = h.start, time.Now()
	}
	h.addr = pickAddress(addrs)
	return h, nil
}

// pickAddress prefers IPv4, as the address a first connection most often uses.
func pickAddress(addrs []netip.Addr) netip.Addr {
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap()
		}
	}
	return addrs[0]
}

// fetched is what one request gave, besides its timing.
type fetched struct {
	timing   report.ClientTiming
	location *url.URL // the redirect target, when the answer was one
}

// fetch makes one request over one new connection to h.addr and reads the whole
// body (package httptiming times it). It never follows a redirect: it returns where
// it points.
func fetch(ctx context.Context, opts *Options, h hop, keylog io.Writer) (fetched, error) {
	t := h.target
	addrPort := netip.AddrPortFrom(h.addr, t.port)
	dialer := &net.Dialer{}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	config := httptiming.Config{
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialIn(ctx, opts.Netns, dialer, "tcp", addrPort.String())
		},
		Protocols:       &protocols,
		CloseConnection: true,
	}
	if t.url.Scheme == "https" {
		protocols.SetHTTP2(!opts.HTTP1Only)
		config.TLS = tlsConfig(opts, t, keylog)
	}

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url.String(), nil)
	if err != nil {
		return fetched{}, failure.New(KindURL, "making the request for %s: %v", t.url, err)
	}
	setHeaders(request, opts)

	ex, err := httptiming.Do(request, config)
	if err != nil {
		return fetched{}, classifyFetchError(ctx, t.url.String(), err)
	}
	response := ex.Response
	var out fetched
	timing := &out.timing
	timing.URL = redact.URL(t.url.String()) // printed and stored: no credentials, no query values
	timing.Status = response.StatusCode
	timing.Protocol = "HTTP/1.1"
	if response.ProtoMajor == 2 {
		timing.Protocol = "HTTP/2"
	}
	timing.ContentType = response.Header.Get("Content-Type")
	timing.ContentEncoding = response.Header.Get("Content-Encoding")
	timing.AltSvc = response.Header.Get("Alt-Svc")
	if cs := response.TLS; cs != nil {
		timing.TLSVersion = tlsrec.VersionString(cs.Version)
		timing.ServerName = cs.ServerName
		chain := make([][]byte, len(cs.PeerCertificates))
		for i, c := range cs.PeerCertificates {
			chain[i] = c.Raw
		}
		timing.ChainBytes = tlsrec.CertificateMessageBytes(chain, "1.2")
	}

	timing.BodyBytes = ex.BodyBytes
	readErr := ex.BodyErr
	if response.ContentLength >= 0 {
		n := response.ContentLength
		timing.ExpectedBodyBytes = &n
	}
	switch {
	case readErr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		timing.Incomplete = fmt.Sprintf("stalled: no more of the body came before the %s timeout", opts.Timeout)
	case readErr != nil:
		timing.Incomplete = fmt.Sprintf("the body ended early: %v", readErr)
	case timing.ExpectedBodyBytes != nil && timing.BodyBytes < *timing.ExpectedBodyBytes:
		timing.Incomplete = "the connection closed before the whole body came"
	}
	if timing.Incomplete != "" {
		// The exchange was measured as far as it went: say so, with what came.
		of := ""
		if timing.ExpectedBodyBytes != nil {
			of = fmt.Sprintf(" of %d", *timing.ExpectedBodyBytes)
		}
		readErr = failure.New(KindHTTP, "%s: the response is incomplete, %d%s body bytes: %s", t.url, timing.BodyBytes, of, timing.Incomplete)
	}
	if loc := response.Header.Get("Location"); loc != "" && isRedirect(response.StatusCode) {
		next, err := t.url.Parse(loc)
		if err != nil {
			return out, failure.New(KindHTTP, "%s redirects to %q, which is not a URL", t.url, loc)
		}
		out.location = next
		timing.Location = redact.URL(next.String())
	}

	// The timeline runs from the lookup's start as if the connect had followed it at
	// once: the capture is opened between the two, and that is no part of a fetch.
	start := ex.ConnectStart
	if !h.dnsStart.IsZero() {
		dns := h.dnsDone.Sub(h.dnsStart)
		v := float64(dns.Nanoseconds()) / 1e6
		timing.DNSMs = &v
		start = start.Add(-dns)
	}
	ms := func(at time.Time) float64 { return float64(at.Sub(start).Nanoseconds()) / 1e6 }
	timing.StartUnixNs = start.UnixNano()
	timing.Local, timing.Remote = ex.LocalAddr, ex.RemoteAddr
	if !ex.ConnectStart.IsZero() && !ex.ConnectDone.IsZero() {
		timing.ConnectMs = float64(ex.ConnectDone.Sub(ex.ConnectStart).Nanoseconds()) / 1e6
		timing.ConnectAtMs = ms(ex.ConnectDone)
	}
	if !ex.TLSStart.IsZero() && !ex.TLSDone.IsZero() {
		d, at := float64(ex.TLSDone.Sub(ex.TLSStart).Nanoseconds())/1e6, ms(ex.TLSDone)
		timing.TLSMs, timing.TLSAtMs = &d, &at
	}
	// Over HTTP/2 the request-written report can come after the response; httptiming
	// waits for it, so this is never left at 0 for a request that was sent.
	if !ex.RequestWritten.IsZero() {
		timing.RequestSentMs = ms(ex.RequestWritten)
	}
	if !ex.FirstByte.IsZero() {
		timing.FirstByteAtMs = ms(ex.FirstByte)
	}
	timing.LastByteAtMs = ms(ex.LastByte)
	return out, readErr
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// setHeaders makes the request look like a browser's first visit.
func setHeaders(r *http.Request, opts *Options) {
	r.Header.Set("User-Agent", opts.UserAgent)
	r.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	r.Header.Set("Accept-Language", "en-US,en;q=0.9")
	if opts.NoCompress {
		r.Header.Set("Accept-Encoding", "identity")
	} else {
		r.Header.Set("Accept-Encoding", browserAcceptEncoding)
	}
	for name, values := range opts.Headers {
		if http.CanonicalHeaderKey(name) == "Host" && len(values) > 0 {
			r.Host = values[0]
			continue
		}
		r.Header[http.CanonicalHeaderKey(name)] = values
	}
}

func tlsConfig(opts *Options, t target, keylog io.Writer) *tls.Config {
	serverName := opts.ServerName
	if serverName == "" {
		serverName = t.host
	}
	c := &tls.Config{
		ServerName:         serverName,
		RootCAs:            opts.RootCAs,
		InsecureSkipVerify: opts.Insecure,
		MinVersion:         tls.VersionTLS12,
		MaxVersion:         tls.VersionTLS13,
		KeyLogWriter:       keylog,
		// Classic key shares, as most browsers' first ClientHello fits one segment
		// with them; the hybrid post-quantum share would add about 1.2 KB.
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	}
	switch opts.TLSVersion {
	case "1.2":
		c.MaxVersion = tls.VersionTLS12
	case "1.3":
		c.MinVersion = tls.VersionTLS13
	}
	return c
}
