package h3client

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/report"
)

// loopbackHTTP3 serves /bytes/N over HTTP/3 on loopback with a certificate for
// server.test, given only to a client that names it (SNI), as Caddy does: a
// handshake without a name fails with an internal_error alert.
func loopbackHTTP3(t *testing.T) string {
	t.Helper()
	chain, err := server.NewChain(server.ChainConfig{ServerName: "server.test"})
	if err != nil {
		t.Fatal(err)
	}
	cert := chain.Certificate
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{Handler: server.Handler(server.Config{DisableCork: true}), TLSConfig: http3.ConfigureTLSConfig(&tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "server.test" {
				return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
			}
			return &cert, nil
		},
	})}
	go srv.Serve(pc)
	t.Cleanup(func() { srv.Close(); pc.Close() })
	return pc.LocalAddr().String()
}

// TestLoopbackText: what the HTTP/3 probe says of a loopback server: the
// datagrams recorded at the client are read as the client's; an empty response
// proves no window (no negative bounds); the rounds of a large one come with the
// note that the path is local; and a URL naming the address, which sends no
// server name, fails with what to do about it.
func TestLoopbackText(t *testing.T) {
	addr := loopbackHTTP3(t)
	probe := func(path, name string) (*Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return Run(ctx, Options{URL: "https://" + addr + path, ServerName: name, Insecure: true, Timeout: 20 * time.Second})
	}

	_, err := probe("/bytes/0", "")
	if err == nil || !strings.Contains(err.Error(), "--sni NAME") || !strings.Contains(err.Error(), "no server name (SNI)") {
		t.Errorf("an address as the name: %v; want the hint to give --sni", err)
	}

	for _, size := range []int{0, 300_000} {
		res, err := probe(fmt.Sprintf("/bytes/%d", size), "server.test")
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		c := res.Report.Connections[0]
		if c.Vantage != report.VantageClient {
			t.Errorf("%d bytes: vantage %q, want client (recorded at its socket)", size, c.Vantage)
		}
		var buf strings.Builder
		if err := report.WriteText(&buf, res.Report); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		if strings.Contains(text, "captured at the server") {
			t.Errorf("%d bytes: %s", size, text)
		}
		if regexp.MustCompile(`than -\d| at least 1 bytes|-\d+ bytes`).MatchString(text) {
			t.Errorf("%d bytes: impossible bounds in\n%s", size, text)
		}
		if size == 0 && c.InitialWindow.Verdict != report.VerdictNone {
			t.Errorf("an empty response: verdict %s (%s)", c.InitialWindow.Verdict, c.InitialWindow.Reason)
		}
		if size > 0 && !strings.Contains(text, "note: this path is local") {
			t.Errorf("%d bytes over loopback, no local-path note:\n%s", size, text)
		}
	}
}
