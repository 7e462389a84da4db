package client_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/slowstart/slowstart/lab/client"
	"github.com/slowstart/slowstart/lab/server"
)

// startServer runs the built-in server on a loopback listener until the test ends and
// returns its host:port.
func startServer(t *testing.T, cfg server.Config) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx, listener, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return listener.Addr().String()
}

func newChain(t *testing.T) *server.Chain {
	t.Helper()
	chain, err := server.NewChain(server.ChainConfig{
		Intermediates: 1,
		IPs:           []netip.Addr{netip.MustParseAddr("127.0.0.1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

// mode is one way of talking to a server.
type mode struct {
	name         string
	tlsVersion   string // "" for cleartext
	http2        bool
	wantProtocol string
}

var modes = []mode{
	{"cleartext HTTP/1.1", "", false, client.ProtocolHTTP1},
	{"cleartext h2c", "", true, client.ProtocolHTTP2},
	{"TLS 1.2 HTTP/1.1", "1.2", false, client.ProtocolHTTP1},
	{"TLS 1.3 HTTP/2", "1.3", true, client.ProtocolHTTP2},
}

// fetchConfig returns the configuration to fetch /bytes/size from address in mode m.
func fetchConfig(m mode, address string, chain *server.Chain, size int64) client.FetchConfig {
	scheme := "http"
	if m.tlsVersion != "" {
		scheme = "https"
	}
	return client.FetchConfig{
		URL:        fmt.Sprintf("%s://%s/bytes/%d", scheme, address, size),
		TLSVersion: m.tlsVersion,
		RootCAs:    chain.Roots,
		RootCAPEM:  chain.RootPEM(),
		HTTP2:      m.http2,
		ServerName: server.DefaultServerName,
	}
}

// checkResult checks what every successful fetch must satisfy.
func checkResult(t *testing.T, result client.Result, m mode, wantBytes int64) {
	t.Helper()
	if result.Status != 200 || result.Bytes != wantBytes {
		t.Errorf("status %d with %d bytes, want 200 with %d", result.Status, result.Bytes, wantBytes)
	}
	if result.Protocol != m.wantProtocol || result.TLSVersion != m.tlsVersion {
		t.Errorf("protocol %q over TLS %q, want %q over TLS %q", result.Protocol, result.TLSVersion, m.wantProtocol, m.tlsVersion)
	}
	// The moments of the transfer, in the order they must happen.
	handshakeDoneNs := result.ConnectNs
	if m.tlsVersion != "" {
		handshakeDoneNs = result.TLSNs
		if result.TLSNs < result.ConnectNs {
			t.Errorf("TLS done at %d ns, before the connect at %d ns", result.TLSNs, result.ConnectNs)
		}
	} else if result.TLSNs != 0 {
		t.Errorf("TLS done at %d ns over cleartext", result.TLSNs)
	}
	if result.ConnectNs <= 0 {
		t.Errorf("connect done at %d ns, want > 0", result.ConnectNs)
	}
	// The request-written report comes from the goroutine that wrote the request and may
	// be late (see Result), so only its order relative to the handshake is certain.
	if result.RequestWrittenNs < handshakeDoneNs {
		t.Errorf("request written at %d ns, before the handshake was done at %d ns", result.RequestWrittenNs, handshakeDoneNs)
	}
	if result.FirstByteNs < handshakeDoneNs || result.LastByteNs < result.FirstByteNs {
		t.Errorf("handshake done %d ns, first byte %d ns, last byte %d ns: out of order", handshakeDoneNs, result.FirstByteNs, result.LastByteNs)
	}
	if result.FCTPaperNs != result.LastByteNs-result.FirstByteNs || result.FCTUserNs != result.LastByteNs {
		t.Errorf("FCT paper %d ns, user %d ns do not match first byte %d ns and last byte %d ns",
			result.FCTPaperNs, result.FCTUserNs, result.FirstByteNs, result.LastByteNs)
	}
	if result.StartUnixNs <= 0 {
		t.Errorf("start %d ns since the epoch", result.StartUnixNs)
	}
	local, errLocal := netip.ParseAddrPort(result.LocalAddr)
	remote, errRemote := netip.ParseAddrPort(result.RemoteAddr)
	if errLocal != nil || errRemote != nil || local.Port() == 0 || remote.Port() == 0 {
		t.Errorf("addresses %q -> %q are not both ip:port", result.LocalAddr, result.RemoteAddr)
	}
}

func TestFetchBuiltinServer(t *testing.T) {
	chain := newChain(t)
	sizes := []int64{0, 1, 1448, 100000, 10_000_000}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			address := startServer(t, server.Config{TLSVersion: m.tlsVersion, HTTP2: m.http2, Certificate: chain.Certificate})
			for _, size := range sizes {
				t.Run(fmt.Sprint(size), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					result, err := client.Fetch(ctx, fetchConfig(m, address, chain, size))
					if err != nil {
						t.Fatal(err)
					}
					checkResult(t, result, m, size)
				})
			}
		})
	}
}

func TestFetchErrors(t *testing.T) {
	chain := newChain(t)
	plainHTTP1 := startServer(t, server.Config{})
	tls13 := startServer(t, server.Config{TLSVersion: "1.3", Certificate: chain.Certificate})
	tests := []struct {
		name string
		cfg  client.FetchConfig
	}{
		{"status 400", client.FetchConfig{URL: "http://" + plainHTTP1 + "/bytes/42KB"}},
		{"status 404", client.FetchConfig{URL: "http://" + plainHTTP1 + "/nothing"}},
		{"HTTP/2 asked, server has only HTTP/1.1", client.FetchConfig{URL: "https://" + tls13 + "/bytes/10",
			RootCAs: chain.Roots, ServerName: server.DefaultServerName, HTTP2: true}},
		{"TLS 1.2 asked, server has only 1.3", client.FetchConfig{URL: "https://" + tls13 + "/bytes/10",
			RootCAs: chain.Roots, ServerName: server.DefaultServerName, TLSVersion: "1.2"}},
		{"unknown root", client.FetchConfig{URL: "https://" + tls13 + "/bytes/10", ServerName: server.DefaultServerName}},
		{"wrong name", client.FetchConfig{URL: "https://" + tls13 + "/bytes/10", RootCAs: chain.Roots, ServerName: "other.test"}},
		{"unsupported scheme", client.FetchConfig{URL: "ftp://" + plainHTTP1 + "/bytes/10"}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if result, err := client.Fetch(ctx, test.cfg); err == nil {
				t.Errorf("Fetch succeeded with %+v, want an error", result)
			}
		})
	}
}

func TestThinkTime(t *testing.T) {
	const (
		sizeBytes       = 100000
		thinkAfterBytes = 10000
		thinkDuration   = 100 * time.Millisecond
	)
	chain := newChain(t)
	for _, m := range []mode{modes[0], modes[3]} {
		t.Run(m.name, func(t *testing.T) {
			baseCfg := server.Config{TLSVersion: m.tlsVersion, HTTP2: m.http2, Certificate: chain.Certificate}
			thinkCfg := baseCfg
			thinkCfg.ThinkAfterBytes, thinkCfg.ThinkDuration = thinkAfterBytes, thinkDuration
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			plain, err := client.Fetch(ctx, fetchConfig(m, startServer(t, baseCfg), chain, sizeBytes))
			if err != nil {
				t.Fatal(err)
			}
			thinking, err := client.Fetch(ctx, fetchConfig(m, startServer(t, thinkCfg), chain, sizeBytes))
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, thinking, m, sizeBytes)
			if thinking.FCTPaperNs < thinkDuration.Nanoseconds() || thinking.FCTUserNs < thinkDuration.Nanoseconds() {
				t.Errorf("with %v of think time: FCT paper %v, user %v, want both >= %v",
					thinkDuration, time.Duration(thinking.FCTPaperNs), time.Duration(thinking.FCTUserNs), thinkDuration)
			}
			if thinking.FCTUserNs < plain.FCTUserNs {
				t.Errorf("FCT with think time %v < without %v", time.Duration(thinking.FCTUserNs), time.Duration(plain.FCTUserNs))
			}
		})
	}
}

func TestFetchCurlBuiltinServer(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	chain := newChain(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			address := startServer(t, server.Config{TLSVersion: m.tlsVersion, HTTP2: m.http2, Certificate: chain.Certificate})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, fetch := range []struct {
				name string
				run  func(context.Context, client.FetchConfig) (client.Result, error)
			}{
				{client.ClientCurl, func(ctx context.Context, cfg client.FetchConfig) (client.Result, error) {
					return client.FetchCurl(ctx, cfg, nil)
				}},
				{client.ClientBuiltin, client.Fetch},
			} {
				result, err := fetch.run(ctx, fetchConfig(m, address, chain, 100000))
				if err != nil {
					t.Fatalf("%s: %v", fetch.name, err)
				}
				if result.Client != fetch.name {
					t.Errorf("result says client %q, want %q", result.Client, fetch.name)
				}
				checkResult(t, result, m, 100000)
				if result.FirstByteNs <= 0 {
					t.Errorf("%s: first byte at %d ns, want > 0", fetch.name, result.FirstByteNs)
				}
				t.Logf("%s: connect %v, TLS %v, first byte %v, last byte %v", fetch.name,
					time.Duration(result.ConnectNs), time.Duration(result.TLSNs),
					time.Duration(result.FirstByteNs), time.Duration(result.LastByteNs))
			}
		})
	}
}
