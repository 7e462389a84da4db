package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestHandlerBytes(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantLength int64 // Content-Length and body length when the status is 200
	}{
		{"empty body", http.MethodGet, "/bytes/0", http.StatusOK, 0},
		{"one byte", http.MethodGet, "/bytes/1", http.StatusOK, 1},
		{"one segment", http.MethodGet, "/bytes/1448", http.StatusOK, 1448},
		{"several writes", http.MethodGet, "/bytes/200001", http.StatusOK, 200001},
		{"leading zeros", http.MethodGet, "/bytes/0010", http.StatusOK, 10},
		{"head of the largest", http.MethodHead, "/bytes/1073741824", http.StatusOK, 1 << 30},
		{"larger than 1 GiB", http.MethodGet, "/bytes/1073741825", http.StatusBadRequest, 0},
		{"overflowing int64", http.MethodGet, "/bytes/99999999999999999999", http.StatusBadRequest, 0},
		{"suffix", http.MethodGet, "/bytes/42KB", http.StatusBadRequest, 0},
		{"sign", http.MethodGet, "/bytes/+5", http.StatusBadRequest, 0},
		{"negative", http.MethodGet, "/bytes/-1", http.StatusBadRequest, 0},
		{"no size", http.MethodGet, "/bytes/", http.StatusBadRequest, 0},
		{"other path", http.MethodGet, "/index.html", http.StatusNotFound, 0},
		{"post", http.MethodPost, "/bytes/10", http.StatusMethodNotAllowed, 0},
	}
	handler := Handler(Config{})
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			recorder := httptest.NewRecorder()
			handler.ServeHTTP(recorder, httptest.NewRequest(test.method, test.path, nil))
			if recorder.Code != test.wantStatus {
				t.Fatalf("%s %s: status %d, want %d (body %q)", test.method, test.path, recorder.Code, test.wantStatus, recorder.Body.String())
			}
			if test.wantStatus != http.StatusOK {
				return
			}
			if got := recorder.Header().Get("Content-Length"); got != strconv.FormatInt(test.wantLength, 10) {
				t.Errorf("Content-Length %q, want %d", got, test.wantLength)
			}
			if got := recorder.Header().Get("Content-Type"); got != "application/octet-stream" {
				t.Errorf("Content-Type %q, want application/octet-stream", got)
			}
			if test.method == http.MethodHead {
				if recorder.Body.Len() != 0 {
					t.Errorf("HEAD sent %d body bytes", recorder.Body.Len())
				}
				return
			}
			body := recorder.Body.Bytes()
			if int64(len(body)) != test.wantLength {
				t.Fatalf("body has %d bytes, want %d", len(body), test.wantLength)
			}
			for i, b := range body {
				if b != byte(i) {
					t.Fatalf("body byte %d is %d, want %d (i mod 256)", i, b, byte(i))
				}
			}
		})
	}
}

func TestParseTLSVersion(t *testing.T) {
	for _, name := range []string{"1.2", "1.3"} {
		if _, err := parseTLSVersion(name); err != nil {
			t.Errorf("parseTLSVersion(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "1.1", "TLS1.3", "tls13"} {
		if _, err := parseTLSVersion(name); err == nil {
			t.Errorf("parseTLSVersion(%q) accepted an unsupported version", name)
		}
	}
}
