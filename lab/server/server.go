// Package server provides the servers the lab times: a built-in HTTP server that serves
// bodies of any requested size (`GET /bytes/N`) over cleartext HTTP/1.1, h2c, or TLS 1.2/1.3
// with HTTP/1.1 or HTTP/2, with an optional think time; certificate chains of a chosen size
// on the wire; a managed nginx and Caddy serving the same endpoints; and the built-in
// server on gVisor's netstack, a TCP that is not Linux's (package lab/netstack).
//
// It works on listeners and dialers handed to it: it never creates network namespaces,
// links or routes itself (see package lab for the topology, lab/netstack for the
// netstack server's device and routes), and it does not measure anything (see package
// lab/client for the clients that time the transfers).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxBodyBytes is the largest body /bytes/N serves; larger requests get 400 Bad Request.
const MaxBodyBytes = 1 << 30

// BytesPathPrefix is the path prefix of the sized-body endpoint: GET /bytes/N.
const BytesPathPrefix = "/bytes/"

// writeChunkBytes is the size of each body write. Writes this large leave segmentation
// to the kernel (and to TLS records of 16 KB), not to the application.
const writeChunkBytes = 64 << 10

// Config configures the built-in server. The zero value serves cleartext HTTP/1.1 with
// keep-alive and no think time.
type Config struct {
	// TLSVersion is "" for cleartext, "1.2" or "1.3" to serve TLS of exactly that version.
	TLSVersion string
	// Certificate is the chain and key served over TLS (see GenerateChain). Required with TLS.
	Certificate tls.Certificate
	// HTTP2 enables HTTP/2: negotiated by ALPN "h2" over TLS (HTTP/1.1 stays available to
	// clients that do not offer h2); over cleartext, h2c with prior knowledge beside HTTP/1.1.
	HTTP2 bool
	// PostQuantumKeyExchange lets TLS 1.3 use the hybrid X25519MLKEM768 key exchange, which
	// adds about 1.1 KB to the ServerHello. Off by default, so the server's first flight has
	// the size a classic (X25519/P-256) server such as nginx with OpenSSL 3.0 sends.
	PostQuantumKeyExchange bool
	// CurvePreferences, when set, are the only key exchanges the server accepts, in its
	// order of preference (it overrides PostQuantumKeyExchange). With only tls.CurveP256,
	// a TLS 1.3 client whose key share is X25519 (the built-in client, curl with
	// OpenSSL) is answered with a HelloRetryRequest: one more round trip.
	CurvePreferences []tls.CurveID
	// ThinkAfterBytes and ThinkDuration emulate a front end that sends the first
	// ThinkAfterBytes of the body, flushes them, and then waits ThinkDuration for a back end
	// before sending the rest. No pause when ThinkDuration is 0 or the body is not longer
	// than ThinkAfterBytes (with ThinkAfterBytes 0, the pause comes after the headers).
	ThinkAfterBytes int64
	ThinkDuration   time.Duration
	// DisableKeepAlives closes each connection after one response.
	DisableKeepAlives bool
	// DisableCork sends each write as Go hands it to the socket (TCP_NODELAY). By default
	// Serve corks the socket for the time of a response (TCP_CORK, like nginx's
	// tcp_nopush), so headers and body leave in full segments: a short segment in the
	// middle of a flight would take a whole packet of the congestion window.
	DisableCork bool
	// WriteChunkBytes, when positive, makes the server write like a streaming
	// application instead: the response header goes to the socket alone, then the body
	// in writes of this many bytes, each handed to the socket at once (no cork, so a
	// write that is not a multiple of the segment size leaves a short segment), with
	// WritePause between writes. ThinkAfterBytes and ThinkDuration do not apply.
	WriteChunkBytes int
	WritePause      time.Duration
	// Nagle leaves Nagle's algorithm on (TCP_NODELAY off, which Go sets on by
	// default) for the whole connection, TLS handshake included: the kernel then holds
	// a short segment while an earlier short one is unacknowledged (Linux's variant).
	Nagle bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// InitialPacketBytes is the size of the HTTP/3 server's first packets (ServeHTTP3;
	// quic-go's 1,280 when 0).
	InitialPacketBytes int
	// PageFiles, when set, are served as they are at their paths (a test page: see
	// Page.Files), beside /bytes/N.
	PageFiles map[string][]byte
}

// Serve serves /bytes/N on ln until ctx is done, then closes ln and every open connection
// and returns nil. It returns an error for an invalid configuration or a failed listener.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	httpServer := &http.Server{
		Handler:           Handler(cfg),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			if cfg.Nagle {
				if err := setNoDelay(conn, false); err != nil {
					logger.Debug("turning Nagle's algorithm on", "error", err)
				}
			}
			return context.WithValue(ctx, connContextKey{}, conn)
		},
	}
	httpServer.SetKeepAlivesEnabled(!cfg.DisableKeepAlives)

	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if cfg.TLSVersion == "" {
		protocols.SetUnencryptedHTTP2(cfg.HTTP2)
	} else {
		protocols.SetHTTP2(cfg.HTTP2)
		tlsConfig, err := serverTLSConfig(cfg)
		if err != nil {
			return err
		}
		httpServer.TLSConfig = tlsConfig
	}
	httpServer.Protocols = &protocols

	stop := context.AfterFunc(ctx, func() {
		if err := httpServer.Close(); err != nil {
			logger.Debug("closing the built-in server", "error", err)
		}
	})
	defer stop()

	logger.Debug("built-in server listening", "address", ln.Addr().String(),
		"tls", cfg.TLSVersion, "http2", cfg.HTTP2)
	var err error
	if httpServer.TLSConfig != nil {
		err = httpServer.ServeTLS(ln, "", "")
	} else {
		err = httpServer.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("serving /bytes/N on %s: %w", ln.Addr(), err)
}

func serverTLSConfig(cfg Config) (*tls.Config, error) {
	version, err := parseTLSVersion(cfg.TLSVersion)
	if err != nil {
		return nil, err
	}
	if len(cfg.Certificate.Certificate) == 0 || cfg.Certificate.PrivateKey == nil {
		return nil, errors.New("serving TLS needs Config.Certificate: make one with GenerateChain")
	}
	tlsConfig := &tls.Config{
		MinVersion:   version,
		MaxVersion:   version,
		Certificates: []tls.Certificate{cfg.Certificate},
		// Every lab fetch is a first visit: tickets would only add records to the flights.
		SessionTicketsDisabled: true,
	}
	switch {
	case len(cfg.CurvePreferences) > 0:
		tlsConfig.CurvePreferences = cfg.CurvePreferences
	case !cfg.PostQuantumKeyExchange:
		tlsConfig.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}
	}
	return tlsConfig, nil
}

// parseTLSVersion maps "1.2" and "1.3" to their protocol numbers.
func parseTLSVersion(name string) (uint16, error) {
	switch name {
	case "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("TLS version %q is not supported: use \"1.2\" or \"1.3\"", name)
}

// connContextKey keys the connection of a request in its context (set by Serve), so that
// the handler can cork its socket.
type connContextKey struct{}

// Handler returns the handler of the built-in server: GET or HEAD /bytes/N answers with N
// bytes of a fixed pattern (byte i of the body is i mod 256), application/octet-stream,
// Content-Length set, never compressed. N is a plain decimal byte count up to
// MaxBodyBytes; anything else under /bytes/ is 400, other paths 404. It corks the socket
// only when served by Serve (which gives it the connection).
func Handler(cfg Config) http.Handler {
	pattern := make([]byte, writeChunkBytes)
	for i := range pattern {
		pattern[i] = byte(i)
	}
	return &bytesHandler{
		pattern:         pattern,
		thinkAfterBytes: cfg.ThinkAfterBytes,
		thinkDuration:   cfg.ThinkDuration,
		cork:            !cfg.DisableCork && cfg.WriteChunkBytes <= 0,
		chunkBytes:      int64(cfg.WriteChunkBytes),
		chunkPause:      cfg.WritePause,
		logger:          cfg.Logger,
		pageFiles:       cfg.PageFiles,
	}
}

type bytesHandler struct {
	// pattern is read-only once made: all responses write from it concurrently. Its
	// length is a multiple of 256, so the pattern runs on across writes.
	pattern         []byte
	thinkAfterBytes int64
	thinkDuration   time.Duration
	cork            bool
	chunkBytes      int64 // > 0: write the header alone, then chunks of this size
	chunkPause      time.Duration
	logger          *slog.Logger // nil discards
	pageFiles       map[string][]byte
}

func (h *bytesHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if content, ok := h.pageFiles[r.URL.Path]; ok {
		h.servePageFile(w, r, content)
		return
	}
	sizeText, ok := strings.CutPrefix(r.URL.Path, BytesPathPrefix)
	if !ok {
		http.Error(w, "not found: the server serves GET /bytes/N", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: use GET /bytes/N", http.StatusMethodNotAllowed)
		return
	}
	bodyBytes, err := parseBodyBytes(sizeText)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	corker := h.corker(r)
	corker.set(true)
	defer corker.release(w)

	header := w.Header()
	header["Content-Type"] = []string{"application/octet-stream"}
	header["Content-Length"] = []string{strconv.FormatInt(bodyBytes, 10)}
	header["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if h.chunkBytes > 0 {
		h.writeChunks(w, r, bodyBytes)
		return
	}
	if corker.corked {
		// Hand the headers to the corked socket now, where they wait (less than a
		// segment): the body's first write then reaches the socket in one system
		// call. Otherwise net/http fills its 4 KB buffer from that write, sends it,
		// and writes the rest in a second call, and on a busy machine a stall between
		// the two makes a first flight of only what the first call held: a round
		// limited by the application, not by the window the lab set.
		if err := http.NewResponseController(w).Flush(); err != nil {
			return // the client went away
		}
	}

	pauseAt := int64(-1)
	if h.thinkDuration > 0 && bodyBytes > h.thinkAfterBytes {
		pauseAt = max(h.thinkAfterBytes, 0)
	}
	var sentBytes int64
	for sentBytes < bodyBytes {
		if sentBytes == pauseAt {
			corker.release(w) // the front end's part leaves now, whole
			if err := h.think(r); err != nil {
				return
			}
			corker.set(true)
			pauseAt = -1
			continue
		}
		chunkBytes := min(bodyBytes-sentBytes, int64(len(h.pattern)))
		if pauseAt > sentBytes {
			chunkBytes = min(chunkBytes, pauseAt-sentBytes)
		}
		if _, err := w.Write(h.pattern[:chunkBytes]); err != nil {
			return // the client went away; nothing more to do
		}
		sentBytes += chunkBytes
	}
}

// writeChunks sends the header alone, then the body in writes of h.chunkBytes, each
// flushed to the socket, with h.chunkPause between them.
func (h *bytesHandler) writeChunks(w http.ResponseWriter, r *http.Request, bodyBytes int64) {
	flusher := http.NewResponseController(w)
	if err := flusher.Flush(); err != nil {
		return // the client went away
	}
	var sentBytes int64
	for sentBytes < bodyBytes {
		if sentBytes > 0 && h.chunkPause > 0 {
			if err := pause(r, h.chunkPause); err != nil {
				return
			}
		}
		chunkBytes := min(bodyBytes-sentBytes, h.chunkBytes)
		for written := int64(0); written < chunkBytes; {
			// The pattern's offset follows sentBytes, so the body is the same as
			// ServeHTTP's: byte i is i mod 256.
			start := (sentBytes + written) % 256
			n := min(chunkBytes-written, int64(len(h.pattern))-start)
			if _, err := w.Write(h.pattern[start : start+n]); err != nil {
				return
			}
			written += n
		}
		if err := flusher.Flush(); err != nil {
			return
		}
		sentBytes += chunkBytes
	}
}

// servePageFile answers with one file of the test page, corked like a body.
func (h *bytesHandler) servePageFile(w http.ResponseWriter, r *http.Request, content []byte) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	corker := h.corker(r)
	corker.set(true)
	defer corker.release(w)
	header := w.Header()
	header["Content-Type"] = []string{PageContentType(r.URL.Path)}
	header["Content-Length"] = []string{strconv.Itoa(len(content))}
	// Fonts from another origin need CORS; the same for every file keeps the
	// headers of all the page's responses alike.
	header["Access-Control-Allow-Origin"] = []string{"*"}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if corker.corked {
		// As for /bytes/N: the headers wait in the corked socket, and the body
		// follows in one write.
		if err := http.NewResponseController(w).Flush(); err != nil {
			return
		}
	}
	for len(content) > 0 {
		n := min(len(content), writeChunkBytes)
		if _, err := w.Write(content[:n]); err != nil {
			return
		}
		content = content[n:]
	}
}

// think waits the think duration.
func (h *bytesHandler) think(r *http.Request) error {
	return pause(r, h.thinkDuration)
}

// pause waits d, or until the request is over.
func pause(r *http.Request, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-r.Context().Done():
		return r.Context().Err()
	}
}

// parseBodyBytes parses N of /bytes/N: decimal digits only, at most MaxBodyBytes.
func parseBodyBytes(text string) (int64, error) {
	if text == "" || len(text) > 19 {
		return 0, fmt.Errorf("bad size %q: ask for /bytes/N with N a decimal byte count up to %d", text, MaxBodyBytes)
	}
	for i := 0; i < len(text); i++ {
		if text[i] < '0' || text[i] > '9' {
			return 0, fmt.Errorf("bad size %q: ask for /bytes/N with N a decimal byte count up to %d", text, MaxBodyBytes)
		}
	}
	bodyBytes, err := strconv.ParseInt(text, 10, 64)
	if err != nil || bodyBytes > MaxBodyBytes {
		return 0, fmt.Errorf("size %q is larger than the limit of %d bytes", text, MaxBodyBytes)
	}
	return bodyBytes, nil
}

// responseCorker corks the socket of one response and pushes it out at the end.
type responseCorker struct {
	conn   net.Conn // nil: nothing to cork
	corked bool
	logger *slog.Logger
}

func (h *bytesHandler) corker(r *http.Request) *responseCorker {
	corker := &responseCorker{logger: h.logger}
	if h.cork {
		corker.conn, _ = r.Context().Value(connContextKey{}).(net.Conn)
	}
	return corker
}

// set corks the socket (on true) or clears the cork (on false).
func (c *responseCorker) set(on bool) {
	if c.conn == nil || c.corked == on {
		return
	}
	if err := setCork(c.conn, on); err != nil {
		if c.logger != nil {
			c.logger.Debug("corking the response's socket", "error", err)
		}
		c.conn = nil // leave the socket as it is from now on
		return
	}
	c.corked = on
}

// release flushes what the response has written to the socket and clears the cork.
func (c *responseCorker) release(w http.ResponseWriter) {
	if err := http.NewResponseController(w).Flush(); err != nil && c.logger != nil {
		c.logger.Debug("flushing the response", "error", err)
	}
	c.set(false)
}

// setNoDelay sets TCP_NODELAY on the TCP socket under conn (through TLS, if any); off
// turns Nagle's algorithm on. Connections that are not TCP are left alone.
func setNoDelay(conn net.Conn, on bool) error {
	if tlsConn, ok := conn.(*tls.Conn); ok {
		conn = tlsConn.NetConn()
	}
	if tcpConn, ok := conn.(*net.TCPConn); ok {
		return tcpConn.SetNoDelay(on)
	}
	return nil
}
