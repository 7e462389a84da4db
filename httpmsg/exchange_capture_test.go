package httpmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/streamtest"
)

// oneConnListener hands out a single connection, then blocks until closed.
type oneConnListener struct {
	conn   chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case conn := <-l.conn:
		return conn, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// exchangeRequest is one request the test client sends and what the response
// must look like.
type exchangeRequest struct {
	method, target string
	body           string
	wantStatus     int
	wantChunked    bool
	wantLength     int64 // Content-Length of the response, -1 if none, -2 not checked
}

// exchange is what a net/http client and server put on the wire for requests.
type exchange struct {
	requestStream, responseStream []byte
	requestWrites, responseWrites []int // sizes of each side's Write calls
}

// testHandler serves the paths the exchanges use.
func testHandler(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/bytes":
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", "3000")
		w.Write(bytes.Repeat([]byte("b"), 3000))
	case r.URL.Path == "/chunked":
		flusher := w.(http.Flusher)
		for i := range 5 {
			fmt.Fprintf(w, "part %d %s\n", i, strings.Repeat("c", 700))
			flusher.Flush()
		}
	case r.URL.Path == "/empty":
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/cached":
		w.WriteHeader(http.StatusNotModified)
	case r.URL.Path == "/echo":
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

// runExchange sends requests one after another over one kept-alive connection
// between a net/http client and server joined by net.Pipe.
func runExchange(t testing.TB, requests []exchangeRequest) exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clientEnd, serverEnd := net.Pipe()
	clientConn := &streamtest.RecordingConn{Conn: clientEnd}
	serverConn := &streamtest.RecordingConn{Conn: serverEnd}
	listener := &oneConnListener{conn: make(chan net.Conn, 1), closed: make(chan struct{})}
	listener.conn <- serverConn
	server := &http.Server{Handler: http.HandlerFunc(testHandler)}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()

	dialed := false
	transport := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if dialed {
				return nil, errors.New("the test allows one connection only")
			}
			dialed = true
			return clientConn, nil
		},
		DisableCompression: true,
	}
	client := &http.Client{Transport: transport}
	for _, request := range requests {
		var body io.Reader
		if request.body != "" {
			body = strings.NewReader(request.body)
		}
		httpRequest, err := http.NewRequestWithContext(ctx, request.method, "http://server.test"+request.target, body)
		if err != nil {
			t.Fatalf("making request %s %s: %v", request.method, request.target, err)
		}
		response, err := client.Do(httpRequest)
		if err != nil {
			t.Fatalf("request %s %s: %v", request.method, request.target, err)
		}
		io.Copy(io.Discard, response.Body)
		response.Body.Close()
		if response.StatusCode != request.wantStatus {
			t.Fatalf("request %s %s: status %d, want %d", request.method, request.target, response.StatusCode, request.wantStatus)
		}
	}
	transport.CloseIdleConnections()
	if err := server.Shutdown(ctx); err != nil {
		t.Fatalf("shutting the test server down: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("test server: %v", err)
	}
	return exchange{
		requestStream: clientConn.Bytes(), responseStream: serverConn.Bytes(),
		requestWrites: clientConn.WriteSizes(), responseWrites: serverConn.WriteSizes(),
	}
}

var exchangeRequests = []exchangeRequest{
	{method: "GET", target: "/bytes", wantStatus: 200, wantLength: 3000},
	{method: "GET", target: "/chunked", wantStatus: 200, wantChunked: true, wantLength: -1},
	{method: "HEAD", target: "/bytes", wantStatus: 200, wantLength: 3000},
	{method: "GET", target: "/empty", wantStatus: 204, wantLength: -1},
	{method: "GET", target: "/cached", wantStatus: 304, wantLength: -1},
	{method: "POST", target: "/echo", body: strings.Repeat("p", 2500), wantStatus: 200, wantLength: 2500},
	{method: "GET", target: "/missing", wantStatus: 404, wantLength: -2}, // -2: not checked
}
