package localhttp

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestHostAllowed(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost": true, "LOCALHOST:1": true, "[::1]:9464": true, "::1": true,
		"10.0.0.7": true, "attacker.example:8080": false, "localhost.example": false, "": false,
	} {
		if got := HostAllowed(host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestServe: :PORT listens on loopback only; only GET and HEAD are answered,
// and on loopback only with an IP address or localhost as Host.
func TestServe(t *testing.T) {
	if addr, err := Address(":0"); err != nil || addr != "127.0.0.1:0" {
		t.Errorf("Address(:0) = %q, %v", addr, err)
	}
	if _, err := Address("9464"); err == nil {
		t.Errorf("a bare port is taken")
	}
	s, err := Serve(":0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") }), "test")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(s.Addr())
	if host != "127.0.0.1" {
		t.Errorf("bound to %s, want 127.0.0.1", s.Addr())
	}
	request := func(method, hostHeader string) (int, string) {
		req, err := http.NewRequest(method, "http://"+s.Addr()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = hostHeader
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := request(http.MethodGet, "localhost:"+port); code != http.StatusOK || body != "served" {
		t.Errorf("GET with Host localhost: %d %q", code, body)
	}
	if code, body := request(http.MethodPost, s.Addr()); code != http.StatusMethodNotAllowed || !strings.HasPrefix(body, "test: ") {
		t.Errorf("POST: %d %q, want 405 from test", code, body)
	}
	if code, _ := request(http.MethodGet, "attacker.example:"+port); code != http.StatusMisdirectedRequest {
		t.Errorf("GET with a foreign Host: %d, want 421", code)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr()); err == nil {
		t.Errorf("%s still answers after Stop", s.Addr())
	}
}
