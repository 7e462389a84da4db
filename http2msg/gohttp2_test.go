package http2msg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/streamtest"
)

// served is what the test handler sends for a path.
var served = map[string]struct {
	status      int
	contentType string
	bytes       int
}{
	"/page":    {200, "text/html; charset=utf-8", 20000},
	"/image":   {200, "image/png", 70000},
	"/style":   {200, "text/css", 3000},
	"/missing": {404, "text/plain; charset=utf-8", len("not here\n")},
	"/empty":   {204, "", 0},
}

func servedHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
		return
	}
	s, ok := served[r.URL.Path]
	if !ok {
		http.Error(w, "unknown", 500)
		return
	}
	if s.contentType != "" {
		w.Header().Set("Content-Type", s.contentType)
	}
	w.WriteHeader(s.status)
	w.Write(bytes.Repeat([]byte("b"), s.bytes))
}

// runH2C runs net/http's HTTP/2 client and server over one loopback TCP
// connection in cleartext (prior knowledge), with requests sent concurrently so
// that the streams interleave, and returns what each side wrote.
func runH2C(t *testing.T, paths []string, postBytes int) (client, server []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on loopback: %v", err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	recording := &recordingListener{Listener: listener}
	httpServer := &http.Server{Handler: http.HandlerFunc(servedHandler), Protocols: &protocols}
	go httpServer.Serve(recording)
	defer httpServer.Close()

	var clientConn *streamtest.RecordingConn
	transport := &http.Transport{
		Protocols: &protocols,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if clientConn != nil {
				return nil, fmt.Errorf("the test allows one connection")
			}
			conn, err := (&net.Dialer{}).DialContext(ctx, network, listener.Addr().String())
			if err != nil {
				return nil, err
			}
			clientConn = &streamtest.RecordingConn{Conn: conn}
			return clientConn, nil
		},
	}
	httpClient := &http.Client{Transport: transport}
	// The first request opens the connection; the rest share it concurrently.
	get := func(path string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://server.test"+path, nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			return fmt.Errorf("%s answered over %s", path, resp.Proto)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := get(paths[0]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(paths))
	for _, path := range paths[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- get(path)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://server.test/echo", strings.NewReader(strings.Repeat("u", postBytes)))
		resp, err := httpClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errs <- err
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	transport.CloseIdleConnections()
	httpServer.Close()
	serverConn := recording.conn()
	if serverConn == nil || clientConn == nil {
		t.Fatal("no connection was made")
	}
	return clientConn.Bytes(), serverConn.Bytes()
}

// recordingListener records the one connection it accepts.
type recordingListener struct {
	net.Listener
	mu       sync.Mutex
	accepted *streamtest.RecordingConn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	recording := &streamtest.RecordingConn{Conn: conn}
	l.mu.Lock()
	l.accepted = recording
	l.mu.Unlock()
	return recording, nil
}

func (l *recordingListener) conn() *streamtest.RecordingConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

func TestGoHTTP2Exchange(t *testing.T) {
	paths := []string{"/page", "/image", "/style", "/missing", "/empty", "/image"}
	client, server := runH2C(t, paths, 40000)
	for _, step := range []int{1448, 1 << 30} {
		c := feed(client, server, step, 1<<30)
		if !c.IsHTTP2() {
			t.Fatal("not HTTP/2")
		}
		counts := map[string]int{}
		for _, s := range c.Streams() {
			if s.Incomplete || !s.ResponseEndStream || s.Authority != "server.test" || s.Scheme != "http" {
				t.Errorf("stream %d: %+v, want a whole exchange with server.test", s.ID, *s)
			}
			if s.ResponseOffset < 0 || s.ResponseEnd <= s.ResponseOffset || s.RequestOffset < 0 {
				t.Errorf("stream %d: request at %d, response %d..%d", s.ID, s.RequestOffset, s.ResponseOffset, s.ResponseEnd)
			}
			if s.Method == http.MethodPost {
				counts["POST"]++
				if s.RequestBodyBytes != 40000 || s.ResponseBodyBytes != 40000 || s.Status != 200 {
					t.Errorf("POST stream %d: request body %d, response body %d, status %d; want 40000, 40000, 200",
						s.ID, s.RequestBodyBytes, s.ResponseBodyBytes, s.Status)
				}
				continue
			}
			counts[s.Path]++
			want := served[s.Path]
			if s.Method != http.MethodGet || s.Status != want.status || s.ContentType != want.contentType || s.ResponseBodyBytes != int64(want.bytes) {
				t.Errorf("stream %d %s %s: status %d, type %q, body %d; want %d %q %d", s.ID, s.Method, s.Path,
					s.Status, s.ContentType, s.ResponseBodyBytes, want.status, want.contentType, want.bytes)
			}
			// The spans tile the stream's frames: their sizes add up.
			var spanned int64
			for _, span := range s.ResponseSpans {
				spanned += span.End - span.Start
			}
			if spanned != s.ResponseHeaderBytes+s.ResponseDataBytes {
				t.Errorf("stream %d: spans cover %d bytes, frames %d", s.ID, spanned, s.ResponseHeaderBytes+s.ResponseDataBytes)
			}
		}
		for _, path := range paths {
			want := 0
			for _, p := range paths {
				if p == path {
					want++
				}
			}
			if counts[path] != want {
				t.Errorf("%d streams for %s, want %d", counts[path], path, want)
			}
		}
		if counts["POST"] != 1 {
			t.Errorf("%d POST streams, want 1", counts["POST"])
		}
		if info := c.Info(flow.ToClient); info.Settings == nil || info.LostAt != -1 {
			t.Errorf("server info %+v: want its SETTINGS and no loss", info)
		}
	}
}
