package quicprobe

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/labserver"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
)

var labKeys = server.NewKeyCache()

// The servers' initial windows in bytes, where h3client's TestHTTP3Lab says where
// they come from: 32 packets of 1,280 bytes (the built-in server's quic-go) and of
// 1,252 bytes (the quic-go inside Debian's Caddy).
const quicGoInitialWindowBytes, caddyQuicGoInitialWindowBytes = 32 * 1280, 32 * 1252

// TestChooseLab probes lab servers with --protocols h3,h2,h1 as a browser goes:
// Caddy advertises HTTP/3 in an Alt-Svc header, so the page comes over TCP and then
// again over QUIC, both reported, TCP first; the built-in server advertises nothing,
// so the probe stays on TCP; and when the name's HTTPS record (from a name server on
// loopback) lists h3, the first visit goes over QUIC.
func TestChooseLab(t *testing.T) {
	testroot.Require(t, "network namespaces")
	t.Cleanup(func() { netlab.CloseAll() })
	const body = 50_000
	cases := []struct {
		name       string
		caddy      bool
		record     bool
		advertised string
		transports []string
	}{
		{"builtin, no Alt-Svc", false, false, "", []string{"tcp"}},
		{"builtin, HTTPS record", false, true, "https-record", []string{report.TransportQUIC}},
		{"caddy, Alt-Svc", true, false, "alt-svc", []string{"tcp", report.TransportQUIC}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.caddy {
				if _, err := os.Stat("/usr/bin/caddy"); err != nil {
					t.Skip("caddy is not installed (apt-get install caddy)")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := labserver.Start(ctx, labserver.Config{RTT: 20 * time.Millisecond, TLSVersion: "1.3",
				HTTP3: !c.caddy, Caddy: c.caddy, NginxBodySizes: []int64{body}, ChainBytes: 2000, Keys: labKeys})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			url := s.URL(fmt.Sprintf("/bytes/%d", body))
			opts := ChooseOptions{Protocols: []string{ProtocolH3, ProtocolH2, ProtocolH1},
				TCP:   probe.Options{URL: url, Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs, Tool: "test"},
				HTTP3: h3client.Options{Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs, Tool: "test"}}
			if c.record {
				opts.Resolver = fakeDNS(t, labserver.ServerName, []dnsmessage.HTTPSResource{httpsRecord(1, ".", []string{"h3", "h2"}, 0)})
			} else {
				opts.NoHTTPSRecord = true
			}
			ch, err := Choose(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			if err := WriteChoiceText(&text, ch); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + text.String())
			if ch.Advertised != c.advertised {
				t.Errorf("advertised %q, want %q", ch.Advertised, c.advertised)
			}
			var transports []string
			for _, conn := range ch.Report.Connections {
				tr := conn.Transport
				if tr == "" {
					tr = "tcp"
				}
				transports = append(transports, tr)
				if conn.ClientTiming == nil || conn.ClientTiming.BodyBytes != body || conn.ClientTiming.Status != 200 {
					t.Errorf("connection %d: timing %+v", conn.Index, conn.ClientTiming)
				}
			}
			if !slices.Equal(transports, c.transports) {
				t.Errorf("connections over %v, want %v", transports, c.transports)
			}
			if (ch.HTTP3 != nil) != (c.advertised != "") {
				t.Errorf("HTTP/3 fetch %v with %q advertised", ch.HTTP3 != nil, c.advertised)
			}
			if c.advertised == "alt-svc" && !strings.Contains(ch.TCP.Final(0).ClientTiming.AltSvc, "h3=") {
				t.Errorf("Alt-Svc %q", ch.TCP.Final(0).ClientTiming.AltSvc)
			}
		})
	}
}

// TestExactLab measures the built-in server's and Caddy's initial windows actively
// over HTTP/3 through a 40 ms emulated path: what the measurement claims must hold
// the window the server's library has (quic-go's 32 × 1,280 bytes, Caddy's quic-go
// 32 × 1,252), and it is exact (to within a datagram) unless packet numbers are
// missing (the server skips some) or the host stalled the server (then measured
// again, at most twice, and not checkable when the hypervisor took more than
// hoststeal.NoisyShare). A claim that excludes the window is never measured again.
func TestExactLab(t *testing.T) {
	testroot.Require(t, "network namespaces")
	t.Cleanup(func() { netlab.CloseAll() })
	meter := hoststeal.Start()
	var notCheckable int
	for _, srv := range []string{"builtin", "caddy"} {
		t.Run(srv, func(t *testing.T) {
			caddy := srv == "caddy"
			window := quicGoInitialWindowBytes
			if caddy {
				if _, err := os.Stat("/usr/bin/caddy"); err != nil {
					t.Skip("caddy is not installed (apt-get install caddy)")
				}
				window = caddyQuicGoInitialWindowBytes
			}
			var timing []string
			for attempt := 1; attempt <= 3; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				s, err := labserver.Start(ctx, labserver.Config{RTT: 40 * time.Millisecond, TLSVersion: "1.3",
					HTTP3: !caddy, Caddy: caddy, NginxBodySizes: []int64{300_000}, ChainBytes: 2000, Keys: labKeys})
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				r, err := Exact(ctx, h3client.Options{URL: s.URL("/bytes/300000"), Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs, Tool: "test"})
				s.Close()
				cancel()
				if err != nil {
					t.Fatalf("attempt %d: %v", attempt, err)
				}
				var text strings.Builder
				WriteExactText(&text, "lab", []*ExactResult{r})
				t.Logf("attempt %d (%d datagrams held back): %s", attempt, r.Held, text.String())
				if r.Held == 0 {
					t.Fatalf("the probe held nothing back after the request")
				}
				timing = nil
				switch r.Verdict {
				case report.VerdictExact, report.VerdictRange:
					if window < r.WindowBytes || window > r.WindowBytesMax {
						t.Fatalf("window %d to %d bytes, the server's is %d", r.WindowBytes, r.WindowBytesMax, window)
					}
					if r.Verdict == report.VerdictExact {
						return
					}
					timing = append(timing, "not exact: "+r.Reason)
				case report.VerdictLowerBound:
					if r.WindowBytes > window {
						t.Fatalf("window at least %d bytes, the server's is %d", r.WindowBytes, window)
					}
					timing = append(timing, "a lower bound: "+r.Reason)
				default:
					timing = append(timing, r.Verdict+": "+r.Reason)
				}
			}
			notCheckable += meter.Read().Check(t, timing)
		})
	}
	meter.Read().SkipIfNotCheckable(t, notCheckable)
}
