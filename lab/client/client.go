// Package client provides the clients the lab times: a built-in HTTP client that fetches
// one URL over one fresh connection and reports when each step of the transfer happened
// (connect, TLS handshake, request written, first and last response byte), timed by
// package httptiming as the probe's fetches are, and a driver for curl that reports the
// same Result from curl's own timers.
//
// The clients use the dial function they are given, so the caller decides where sockets
// are made (e.g. in a client network namespace); the package makes no namespaces and
// captures no packets (see package lab and package capture for that).
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/slowstart/slowstart/httptiming"
)

// Client names, as reported in Result.Client.
const (
	ClientBuiltin = "builtin"
	ClientCurl    = "curl"
)

// Protocols, as reported in Result.Protocol.
const (
	ProtocolHTTP1 = "HTTP/1.1"
	ProtocolHTTP2 = "HTTP/2"
)

// FetchConfig describes one fetch.
type FetchConfig struct {
	// URL is what to fetch: http:// or https://, host and port of the server to connect to
	// (an IP address, or a name the Dial function understands).
	URL string
	// Dial makes the TCP connection; a plain net.Dialer when nil. The caller provides it so
	// that sockets are made where the caller wants (e.g. in a client namespace). curl does
	// not use it: wrap curl's command instead (see FetchCurl).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// TLSVersion is "1.2" or "1.3" to allow only that version over https; "" allows both.
	TLSVersion string
	// RootCAs are the roots that verify the server's chain (the built-in client).
	RootCAs *x509.CertPool
	// RootCAPEM holds the same roots in PEM, for curl's --cacert.
	RootCAPEM []byte
	// HTTP2 asks for HTTP/2: by ALPN over TLS, with prior knowledge (h2c) over cleartext.
	// The fetch fails if the server answers with another protocol.
	HTTP2 bool
	// ServerName is the name for TLS (SNI and verification) and the Host header; the URL's
	// host when empty.
	ServerName string
	// PostQuantumKeyExchange offers the hybrid X25519MLKEM768 key share in TLS 1.3, which
	// makes the ClientHello about 1.2 KB larger (two segments instead of one). Off by
	// default, like the browsers and curl the lab is compared with at the time of writing.
	PostQuantumKeyExchange bool
	// CurlBinary is the curl executable for FetchCurl; "curl" from PATH when empty.
	CurlBinary string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Result is what one fetch measured. Times are in nanoseconds since the start of the TCP
// connect (the SYN about to be sent), on the monotonic clock of the client.
type Result struct {
	Client     string `json:"client"` // ClientBuiltin or ClientCurl
	URL        string `json:"url"`
	Status     int    `json:"status"`
	Bytes      int64  `json:"bytes"`                 // body bytes received
	Protocol   string `json:"protocol"`              // ProtocolHTTP1 or ProtocolHTTP2
	TLSVersion string `json:"tls_version,omitempty"` // "1.2", "1.3", or empty for cleartext

	// StartUnixNs is the wall-clock time of the connect start, to find the connection in a
	// capture (approximate for curl, see FetchCurl).
	StartUnixNs int64 `json:"start_unix_ns"`
	// ConnectNs is when the TCP handshake completed (connect returned).
	ConnectNs int64 `json:"connect_ns"`
	// TLSNs is when the TLS handshake completed; 0 over cleartext.
	TLSNs int64 `json:"tls_ns"`
	// RequestWrittenNs is when net/http reported the request written to the socket (curl:
	// when the transfer was about to start, time_pretransfer). The report comes from the
	// goroutine that wrote the request: on a busy machine it can come after the first
	// response byte, so use it as a marker, not for precise intervals.
	RequestWrittenNs int64 `json:"request_written_ns"`
	// FirstByteNs is when the first byte of the response (status line or HEADERS) arrived.
	FirstByteNs int64 `json:"first_byte_ns"`
	// LastByteNs is when the last body byte was read (the end of the body when it is empty).
	LastByteNs int64 `json:"last_byte_ns"`
	// FCTPaperNs is the flow completion time as Dukkipati et al. define it, from the first
	// response byte to the last, but measured at the client: the paper measures at the
	// server up to the ACK of the last byte, which is about the same span shifted by one
	// one-way delay at each end (the server's first byte leaves half an RTT before the client
	// sees it, its last ACK arrives half an RTT after the client sent it).
	FCTPaperNs int64 `json:"fct_paper_ns"`
	// FCTUserNs is the flow completion time a user sees: from the connect start to the last
	// byte, so it includes the TCP and TLS handshakes and the request.
	FCTUserNs int64 `json:"fct_user_ns"`

	// LocalAddr and RemoteAddr are the connection's ip:port pairs.
	LocalAddr  string `json:"local_addr"`
	RemoteAddr string `json:"remote_addr"`
}

// Fetch fetches cfg.URL with net/http over one new connection (a fresh Transport, nothing
// reused; package httptiming times it), reads the whole body, and reports sizes and
// timings. On an HTTP error status or a protocol other than the one asked for it returns
// the Result with an error.
func Fetch(ctx context.Context, cfg FetchConfig) (Result, error) {
	target, err := url.Parse(cfg.URL)
	if err != nil {
		return Result{}, fmt.Errorf("parsing the URL to fetch: %w", err)
	}
	if target.Scheme != "http" && target.Scheme != "https" {
		return Result{}, fmt.Errorf("URL %q: only http:// and https:// are supported", cfg.URL)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	var protocols http.Protocols
	switch {
	case cfg.HTTP2 && target.Scheme == "http":
		protocols.SetUnencryptedHTTP2(true)
	case cfg.HTTP2:
		protocols.SetHTTP2(true)
		protocols.SetHTTP1(true) // so that a server without h2 answers and the error says so
	default:
		protocols.SetHTTP1(true)
	}
	timingConfig := httptiming.Config{Dial: cfg.Dial, Protocols: &protocols}
	if target.Scheme == "https" {
		tlsConfig, err := clientTLSConfig(cfg, target.Hostname())
		if err != nil {
			return Result{}, err
		}
		timingConfig.TLS = tlsConfig
	}

	request, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
	if err != nil {
		return Result{}, fmt.Errorf("making the request for %s: %w", cfg.URL, err)
	}
	if cfg.ServerName != "" {
		request.Host = cfg.ServerName
		if port := target.Port(); port != "" {
			request.Host = net.JoinHostPort(cfg.ServerName, port)
		}
	}

	ex, err := httptiming.Do(request, timingConfig)
	if err != nil {
		return Result{}, fmt.Errorf("fetching %s: %w", cfg.URL, err)
	}
	response := ex.Response
	result := Result{Client: ClientBuiltin, URL: cfg.URL, Status: response.StatusCode, Protocol: ProtocolHTTP1, Bytes: ex.BodyBytes}
	if response.ProtoMajor == 2 {
		result.Protocol = ProtocolHTTP2
	}
	if response.TLS != nil {
		result.TLSVersion = tlsVersionName(response.TLS.Version)
	}
	var readErr error
	if ex.BodyErr != nil {
		readErr = fmt.Errorf("reading the body of %s after %d bytes: %w", cfg.URL, result.Bytes, ex.BodyErr)
	}

	sinceStart := func(at time.Time) int64 {
		if at.IsZero() {
			return 0
		}
		return at.Sub(ex.ConnectStart).Nanoseconds()
	}
	result.StartUnixNs = ex.ConnectStart.UnixNano()
	result.ConnectNs = sinceStart(ex.ConnectDone)
	result.TLSNs = sinceStart(ex.TLSDone)
	result.RequestWrittenNs = sinceStart(ex.RequestWritten)
	result.FirstByteNs = sinceStart(ex.FirstByte)
	result.LastByteNs = sinceStart(ex.LastByte)
	result.LocalAddr, result.RemoteAddr = ex.LocalAddr, ex.RemoteAddr
	result.FCTPaperNs = result.LastByteNs - result.FirstByteNs
	result.FCTUserNs = result.LastByteNs
	logger.Debug("fetched", "url", cfg.URL, "status", result.Status, "bytes", result.Bytes,
		"protocol", result.Protocol, "tls", result.TLSVersion, "fct_user_ns", result.FCTUserNs)

	if readErr != nil {
		return result, readErr
	}
	return result, checkResult(result, cfg)
}

// checkResult turns an HTTP error status or an unexpected protocol into an error.
func checkResult(result Result, cfg FetchConfig) error {
	if result.Status < 200 || result.Status > 299 {
		return fmt.Errorf("%s answered status %d: check the URL and that the server serves this size", cfg.URL, result.Status)
	}
	if cfg.HTTP2 && result.Protocol != ProtocolHTTP2 {
		return fmt.Errorf("%s answered over %s although HTTP/2 was asked for: enable HTTP/2 on the server", cfg.URL, result.Protocol)
	}
	return nil
}

func clientTLSConfig(cfg FetchConfig, urlHost string) (*tls.Config, error) {
	serverName := cfg.ServerName
	if serverName == "" {
		serverName = urlHost
	}
	tlsConfig := &tls.Config{
		ServerName: serverName,
		RootCAs:    cfg.RootCAs,
		MinVersion: tls.VersionTLS12,
		MaxVersion: tls.VersionTLS13,
	}
	switch cfg.TLSVersion {
	case "":
	case "1.2":
		tlsConfig.MinVersion, tlsConfig.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	case "1.3":
		tlsConfig.MinVersion, tlsConfig.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	default:
		return nil, fmt.Errorf("TLS version %q is not supported: use \"1.2\", \"1.3\" or \"\"", cfg.TLSVersion)
	}
	if !cfg.PostQuantumKeyExchange {
		tlsConfig.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}
	}
	return tlsConfig, nil
}

func tlsVersionName(version uint16) string {
	switch version {
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return tls.VersionName(version)
}
