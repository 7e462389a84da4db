package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// flushRecorder records how many body bytes each flush handed on.
type flushRecorder struct {
	*httptest.ResponseRecorder
	pending int
	flushes []int
}

func (f *flushRecorder) Write(b []byte) (int, error) {
	f.pending += len(b)
	return f.ResponseRecorder.Write(b)
}

func (f *flushRecorder) Flush() {
	f.flushes = append(f.flushes, f.pending)
	f.pending = 0
	f.ResponseRecorder.Flush()
}

// TestWriteChunks: with WriteChunkBytes the header is flushed alone, then each chunk on
// its own, and the body is the same i mod 256 pattern as in one piece.
func TestWriteChunks(t *testing.T) {
	handler := Handler(Config{WriteChunkBytes: 1000, WritePause: time.Millisecond})
	recorder := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
	start := time.Now()
	handler.ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, "/bytes/3500", nil))
	if recorder.Code != http.StatusOK {
		t.Fatalf("status %d", recorder.Code)
	}
	flushes := recorder.flushes
	for len(flushes) > 1 && flushes[len(flushes)-1] == 0 {
		flushes = flushes[:len(flushes)-1] // the handler's last flush, with nothing left
	}
	if want := []int{0, 1000, 1000, 1000, 500}; !slices.Equal(flushes, want) {
		t.Errorf("bytes per flush %v, want %v (the header alone, then each chunk)", recorder.flushes, want)
	}
	if elapsed := time.Since(start); elapsed < 3*time.Millisecond {
		t.Errorf("the response took %v, less than its three pauses of 1 ms", elapsed)
	}
	body := recorder.Body.Bytes()
	if len(body) != 3500 {
		t.Fatalf("body has %d bytes, want 3500", len(body))
	}
	for i, b := range body {
		if b != byte(i) {
			t.Fatalf("body byte %d is %d, want %d (i mod 256)", i, b, byte(i))
		}
	}
}

// acceptRecorder keeps the connections a listener accepted.
type acceptRecorder struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (a *acceptRecorder) Accept() (net.Conn, error) {
	c, err := a.Listener.Accept()
	if err == nil {
		a.mu.Lock()
		a.conns = append(a.conns, c)
		a.mu.Unlock()
	}
	return c, err
}

// TestNagleOption: Config.Nagle clears TCP_NODELAY on the served connection; without it
// Go's default (set) stays.
func TestNagleOption(t *testing.T) {
	for _, nagle := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rec := &acceptRecorder{Listener: ln}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, rec, Config{Nagle: nagle, WriteChunkBytes: 100}) }()
		resp, err := http.Get("http://" + ln.Addr().String() + "/bytes/250")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) != 250 {
			t.Errorf("nagle=%v: read %d bytes (%v), want 250", nagle, len(body), err)
		}
		rec.mu.Lock()
		conn := rec.conns[0].(*net.TCPConn)
		rec.mu.Unlock()
		raw, err := conn.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		noDelay := -1
		var getErr error
		if err := raw.Control(func(fd uintptr) {
			noDelay, getErr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
		}); err != nil || getErr != nil {
			t.Fatal(err, getErr)
		}
		if got := noDelay == 0; got != nagle {
			t.Errorf("Config.Nagle %v: TCP_NODELAY is %d", nagle, noDelay)
		}
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}
}
