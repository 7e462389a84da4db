// Package h3client is the HTTP/3 client that both the probe and the lab time
// transfers with: it fetches a URL with quic-go's HTTP/3 client over a fresh QUIC
// connection, records every datagram the client's socket sent and received (with
// the time it passed the socket) and every packet quic-go's tracing hooks (qlog
// events) reported, keeps the connection's TLS secrets, and runs the datagrams
// through the QUIC analysis (package quicanalysis) with those secrets: the same
// report.Connection as for TCP, with transport "quic", and the client's timeline.
//
// The datagrams are recorded at the client's UDP socket, not by a packet capture:
// arrivals carry the kernel's receive timestamp (SO_TIMESTAMPNS), departures the time
// quic-go handed them to the kernel. The tracer's packets are kept beside them, and
// the client notes any packet the two disagree on.
//
// It is a client's part, not a client: how a browser comes to use HTTP/3 (Alt-Svc,
// HTTPS records) and the active measurement of the initial window over QUIC are the
// probe's (package probe/quicprobe), which steers the socket through Hooks; the
// emulated paths are the lab's.
package h3client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/slowstart/slowstart/internal/netnsexec"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

// Options configure an HTTP/3 fetch.
type Options struct {
	URL string
	// Resolve maps "host:port" to an address (curl's --resolve); otherwise DNS.
	Resolve map[string]netip.Addr
	// Connect, when set, is the host:port to reach instead of the URL's (an
	// alternative service, RFC 7838: the request and TLS name stay the URL's).
	Connect string
	// RootCAs verify the server's chain; the system's roots when nil.
	RootCAs *x509.CertPool
	// Insecure skips verifying the server's chain.
	Insecure bool
	// ServerName overrides the SNI and the name verified.
	ServerName string
	// Netns is the path of a network namespace to fetch from.
	Netns string
	// Timeout bounds the whole fetch (default 30 s).
	Timeout time.Duration
	// ClassicKeyShare offers only X25519 and P-256 key shares, as browsers did before
	// the post-quantum hybrid: a ClientHello that fits one 1,200-byte Initial. By
	// default Go offers X25519MLKEM768 as current browsers do, and the ClientHello
	// takes two Initial datagrams (which also doubles the server's amplification budget).
	ClassicKeyShare bool
	// InitialPacketBytes sets the size of the client's Initial datagrams (quic-go's
	// default is 1,280; the minimum 1,200).
	InitialPacketBytes int
	// Keylog, when set, also receives the TLS secrets (SSLKEYLOGFILE format).
	Keylog io.Writer
	// PacketLog adds every packet with its frames to the report.
	PacketLog bool
	// UserAgent of the request; a browser's by default.
	UserAgent string
	Tool      string
	// Hooks, when set, are told of the fetch's steps as they happen.
	Hooks *Hooks
}

// Hooks are called as a fetch goes on, from quic-go's goroutines, as
// net/http/httptrace's are; any may be nil. The active measurement of the
// initial window (probe/quicprobe) holds the client's acknowledgements back
// with them.
type Hooks struct {
	// Handshake: the QUIC handshake (transport and TLS in one) completed, d after
	// the dial began.
	Handshake func(d time.Duration)
	// Received: a datagram from the server arrived at the client's socket.
	Received func(datagram []byte)
	// Sending: a datagram is about to leave the client's socket; true holds it
	// back: it is neither sent nor recorded.
	Sending func(datagram []byte) (hold bool)
}

// DefaultUserAgent is sent when Options.UserAgent is empty.
const DefaultUserAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 slowstart"

// Result is what an HTTP/3 fetch found.
type Result struct {
	// Report has one connection, with transport "quic" and the client's timing.
	Report *report.Report
	// Datagrams are the UDP datagrams the client's socket sent and received.
	Datagrams []quicanalysis.Datagram
	// Trace is every packet quic-go's tracing hooks reported.
	Trace []TracedPacket
	// Keylog holds the connection's TLS secrets (NSS key log format).
	Keylog []byte
	// Status and BodyBytes of the response.
	Status    int
	BodyBytes int64
	// Timeline is when each step of the fetch happened on the client.
	Timeline Timeline
}

// Timeline holds the times of a fetch's steps on the client's monotonic clock, in
// nanoseconds since the dial began (the client's first Initial about to leave); 0 for
// a step not reached.
type Timeline struct {
	// HandshakeNs: the QUIC handshake (transport and TLS in one) was complete.
	HandshakeNs int64
	// FirstByteNs: the response's headers had arrived (its first bytes); LastByteNs:
	// the body's last byte had been read.
	FirstByteNs, LastByteNs int64
}

// Final returns the fetch's connection.
func (r *Result) Final() *report.Connection {
	if r == nil || r.Report == nil || len(r.Report.Connections) == 0 {
		return nil
	}
	return &r.Report.Connections[0]
}

// Run fetches opts.URL over HTTP/3 and reads the connection from its datagrams.
func Run(ctx context.Context, opts Options) (*Result, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q is not an https URL: HTTP/3 needs https://host[:port]/path", opts.URL)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	host := u.Hostname()
	urlHost := host
	if opts.Connect != "" {
		h, p, err := net.SplitHostPort(opts.Connect)
		if err != nil {
			return nil, fmt.Errorf("the address to connect to, %q, is not host:port: %w", opts.Connect, err)
		}
		if h != "" {
			host = h
		}
		port = p
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	start := time.Now()
	addr, dnsMs, err := resolve(ctx, opts, host, port)
	if err != nil {
		return nil, err
	}
	p, _ := strconv.Atoi(port)
	remote := netip.AddrPortFrom(addr, uint16(p))

	var udp *net.UDPConn
	err = netnsexec.Run(opts.Netns, func() error {
		network := "udp4"
		if addr.Is6() {
			network = "udp6"
		}
		// The local address the route to the server uses, so that the recorded
		// datagrams name the client as a capture would.
		probe, err := net.DialUDP(network, nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(1))))
		if err != nil {
			return err
		}
		local := probe.LocalAddr().(*net.UDPAddr).IP
		probe.Close()
		udp, err = net.ListenUDP(network, &net.UDPAddr{IP: local})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening a UDP socket: %w", err)
	}
	rec := &recordingConn{PacketConn: udp, udp: udp, remote: remote, kernelTimes: enableTimestamps(udp), hooks: opts.Hooks}
	defer rec.Close()

	var keys bytes.Buffer
	var keysMu sync.Mutex
	keyWriter := writerFunc(func(b []byte) (int, error) {
		keysMu.Lock()
		defer keysMu.Unlock()
		keys.Write(b)
		if opts.Keylog != nil {
			opts.Keylog.Write(b)
		}
		return len(b), nil
	})
	serverName := opts.ServerName
	if serverName == "" {
		serverName = urlHost
	}
	tlsConf := &tls.Config{
		ServerName:         serverName,
		RootCAs:            opts.RootCAs,
		InsecureSkipVerify: opts.Insecure,
		NextProtos:         []string{http3.NextProtoH3},
		KeyLogWriter:       keyWriter,
	}
	if opts.ClassicKeyShare {
		tlsConf.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}
	}
	tr := &tracer{}
	quicConf := &quicgo.Config{
		Tracer:            func(context.Context, bool, quicgo.ConnectionID) qlogwriter.Trace { return tr },
		InitialPacketSize: uint16(opts.InitialPacketBytes),
	}
	transport := &quicgo.Transport{Conn: rec}
	defer transport.Close()

	timing := &report.ClientTiming{Run: 1, Hop: 1, URL: redact.URL(opts.URL), Remote: remote.String(), StartUnixNs: start.UnixNano(),
		Protocol: "HTTP/3", TLSVersion: "1.3", ServerName: serverName, DNSMs: dnsMs}
	since := func(t time.Time) float64 { return float64(t.Sub(start).Nanoseconds()) / 1e6 }
	var conn *quicgo.Conn
	var dialStart time.Time
	sinceDial := func() int64 { return time.Since(dialStart).Nanoseconds() }
	var timeline Timeline
	h3 := &http3.Transport{
		TLSClientConfig: tlsConf,
		QUICConfig:      quicConf,
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quicgo.Config) (*quicgo.Conn, error) {
			dialStart = time.Now()
			c, err := transport.Dial(ctx, net.UDPAddrFromAddrPort(remote), tlsCfg, cfg)
			if err != nil {
				return nil, err
			}
			done := time.Now()
			timeline.HandshakeNs = done.Sub(dialStart).Nanoseconds()
			if opts.Hooks != nil && opts.Hooks.Handshake != nil {
				opts.Hooks.Handshake(done.Sub(dialStart))
			}
			conn = c
			timing.ConnectAtMs, timing.ConnectMs = since(done), float64(done.Sub(dialStart).Nanoseconds())/1e6
			tlsAt, tlsMs := timing.ConnectAtMs, timing.ConnectMs
			timing.TLSAtMs, timing.TLSMs = &tlsAt, &tlsMs
			state := c.ConnectionState().TLS
			for _, cert := range state.PeerCertificates {
				timing.ChainBytes += 3 + len(cert.Raw)
			}
			if timing.ChainBytes > 0 {
				timing.ChainBytes += 7
			}
			return c, nil
		},
	}
	defer h3.Close()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, opts.URL, nil)
	if err != nil {
		return nil, err
	}
	ua := opts.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept", "*/*")
	timing.RequestSentMs = since(time.Now())
	resp, fetchErr := h3.RoundTrip(req)
	res := &Result{}
	if fetchErr == nil {
		timeline.FirstByteNs = sinceDial()
		timing.FirstByteAtMs = since(time.Now())
		res.Status = resp.StatusCode
		timing.Status = resp.StatusCode
		timing.ContentType = resp.Header.Get("Content-Type")
		timing.ContentEncoding = resp.Header.Get("Content-Encoding")
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 && res.BodyBytes == 0 {
				timing.FirstByteAtMs = since(time.Now())
			}
			res.BodyBytes += int64(n)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					fetchErr = fmt.Errorf("reading the response body: %w", err)
				}
				break
			}
		}
		resp.Body.Close()
		timeline.LastByteNs = sinceDial()
		timing.LastByteAtMs = since(time.Now())
		timing.BodyBytes = res.BodyBytes
	}
	if conn != nil {
		conn.CloseWithError(0, "")
		timing.Local = conn.LocalAddr().String()
	}
	h3.Close()
	transport.Close()
	rec.stop()

	res.Timeline = timeline
	res.Datagrams = rec.datagrams()
	res.Trace = tr.Packets()
	keysMu.Lock()
	res.Keylog = append([]byte(nil), keys.Bytes()...)
	keysMu.Unlock()
	kl, err := keylog.Parse(bytes.NewReader(res.Keylog))
	if err != nil {
		return res, fmt.Errorf("reading the connection's own key log: %w", err)
	}
	// Recorded at the client's own socket: the vantage point is known, also where
	// the path is too short for the handshake's gaps to tell it (loopback).
	a := quicanalysis.New(quicanalysis.Options{Keys: kl, PacketLog: opts.PacketLog, Vantage: report.VantageClient})
	for _, d := range res.Datagrams {
		a.Add(d)
	}
	rep := a.Report(opts.Tool, report.Source{Kind: "live", Packets: int64(len(res.Datagrams)), StartUnixNs: start.UnixNano(),
		DurationMs: since(time.Now())})
	rep.Source.LinkTypes = []string{"socket"}
	for i := range rep.Connections {
		c := &rep.Connections[i]
		t := *timing
		c.ClientTiming = &t
		c.Notes = append(c.Notes, "datagrams recorded at the client's UDP socket (arrivals timed by the kernel, departures when quic-go wrote them), decrypted with the connection's own TLS secrets")
		c.Notes = append(c.Notes, compareTrace(res.Trace, a)...)
	}
	res.Report = rep
	if fetchErr != nil {
		if len(rep.Connections) > 0 && len(rep.Connections[0].Rounds) == 0 && rep.Connections[0].BytesToClient == 0 {
			return res, fmt.Errorf("fetching %s over HTTP/3: no answer over UDP from %s (is HTTP/3 served there, and does UDP reach it?): %w", opts.URL, remote, fetchErr)
		}
		return res, fmt.Errorf("fetching %s over HTTP/3: %w%s", opts.URL, fetchErr, handshakeHint(fetchErr, serverName))
	}
	if len(rep.Connections) == 0 {
		return res, fmt.Errorf("the client's datagrams hold no QUIC connection")
	}
	return res, nil
}

// resolve finds the server's address.
func resolve(ctx context.Context, opts Options, host, port string) (netip.Addr, *float64, error) {
	if a, ok := opts.Resolve[net.JoinHostPort(host, port)]; ok {
		return a, nil, nil
	}
	if a, ok := opts.Resolve[host+":"+port]; ok {
		return a, nil, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil, nil
	}
	t := time.Now()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, nil, fmt.Errorf("resolving %s: %v", host, err)
	}
	d := float64(time.Since(t).Nanoseconds()) / 1e6
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), &d, nil
		}
	}
	return addrs[0], &d, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
