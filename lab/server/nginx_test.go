package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/lab/client"
	"github.com/slowstart/slowstart/lab/server"
)

// freeLoopbackAddress returns a 127.0.0.1 address with a port nothing listens on now.
func freeLoopbackAddress(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	if err := listener.Close(); err != nil {
		t.Fatal(err)
	}
	return address
}

func TestNginx(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (apt-get install -y nginx)")
	}
	_, curlErr := exec.LookPath("curl")
	chain, err := server.NewChain(server.ChainConfig{
		Intermediates: 1,
		IPs:           []netip.Addr{netip.MustParseAddr("127.0.0.1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	const sizeBytes = 100000
	tests := []struct {
		name         string
		tlsVersion   string
		http2        bool
		wantProtocol string
	}{
		{"cleartext HTTP/1.1", "", false, client.ProtocolHTTP1},
		{"TLS 1.2 HTTP/1.1", "1.2", false, client.ProtocolHTTP1},
		{"TLS 1.3 HTTP/2", "1.3", true, client.ProtocolHTTP2},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			address := freeLoopbackAddress(t)
			nginx, err := server.StartNginx(ctx, server.NginxConfig{
				Address:     address,
				TLSVersion:  test.tlsVersion,
				Certificate: chain.Certificate,
				HTTP2:       test.http2,
				BodySizes:   []int64{0, sizeBytes},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = nginx.Stop()
				}
			})

			scheme := "http"
			if test.tlsVersion != "" {
				scheme = "https"
			}
			cfg := client.FetchConfig{
				URL:        fmt.Sprintf("%s://%s/bytes/%d", scheme, address, sizeBytes),
				TLSVersion: test.tlsVersion,
				RootCAs:    chain.Roots,
				RootCAPEM:  chain.RootPEM(),
				HTTP2:      test.http2,
				ServerName: server.DefaultServerName,
			}
			fetches := []struct {
				name string
				run  func(context.Context, client.FetchConfig) (client.Result, error)
			}{{client.ClientBuiltin, client.Fetch}}
			if curlErr == nil {
				fetches = append(fetches, struct {
					name string
					run  func(context.Context, client.FetchConfig) (client.Result, error)
				}{client.ClientCurl, func(ctx context.Context, cfg client.FetchConfig) (client.Result, error) {
					return client.FetchCurl(ctx, cfg, nil)
				}})
			} else {
				t.Log("curl is not installed: fetching with the built-in client only")
			}
			for _, fetch := range fetches {
				result, err := fetch.run(ctx, cfg)
				if err != nil {
					t.Fatalf("%s: %v", fetch.name, err)
				}
				if result.Bytes != sizeBytes || result.Protocol != test.wantProtocol || result.TLSVersion != test.tlsVersion {
					t.Errorf("%s: %d bytes over %s, TLS %q; want %d over %s, TLS %q", fetch.name,
						result.Bytes, result.Protocol, result.TLSVersion, sizeBytes, test.wantProtocol, test.tlsVersion)
				}
				if result.ConnectNs <= 0 || result.FirstByteNs < result.ConnectNs || result.LastByteNs < result.FirstByteNs {
					t.Errorf("%s: connect %d ns, first byte %d ns, last byte %d ns: out of order", fetch.name,
						result.ConnectNs, result.FirstByteNs, result.LastByteNs)
				}
			}
			// A size that was not made is a 404, not a body of some other size.
			missing := cfg
			missing.URL = strings.Replace(cfg.URL, fmt.Sprint(sizeBytes), "777", 1)
			if result, err := client.Fetch(ctx, missing); err == nil || result.Status != 404 {
				t.Errorf("fetching a size nginx was not given: status %d, error %v; want 404", result.Status, err)
			}

			pid := nginx.PID()
			if err := nginx.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			stopped = true
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("nginx's process group %d is still there after Stop (kill: %v)", pid, err)
			}
			if _, err := os.Stat(nginx.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("nginx's directory %s is still there after Stop (stat: %v)", nginx.Dir, err)
			}
			if err := nginx.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestNginxReportsStartFailure(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (apt-get install -y nginx)")
	}
	// The port is taken, so nginx cannot bind it and exits.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// With a dial that always fails, readiness can only come from nginx exiting.
	refuse := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("refused by the test") }
	nginx, err := server.StartNginx(ctx, server.NginxConfig{Address: listener.Addr().String(), Dial: refuse}, nil)
	if err == nil {
		_ = nginx.Stop()
		t.Fatal("StartNginx succeeded on a port that is taken")
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("the error does not pass on nginx's reason: %v", err)
	}
}
