//go:build linux

package exact

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/server"
)

// labServerName is the name on the test certificates.
const labServerName = "exact.slowstart.test"

// labSpec is one emulated path and server.
type labSpec struct {
	iw         int     // the server route's initcwnd
	rttMs      int     // round-trip time of the emulated path
	tls        string  // "", "1.2" or "1.3"
	http2      bool    // offer HTTP/2 (by ALPN over TLS)
	nginx      bool    // nginx instead of the built-in server
	lossRate   float64 // random loss server→client
	seed       uint64  // of the loss
	bodyBytes  int64   // the body nginx serves at /bytes/N (the built-in server serves any N)
	chainBytes int     // certificate chain over TLS (0: 4 KB)
	ipv6       bool    // connect over IPv6
}

func (s labSpec) String() string {
	name := fmt.Sprintf("iw%d-rtt%d", s.iw, s.rttMs)
	if s.tls != "" {
		name += "-tls" + s.tls
	} else {
		name += "-http"
	}
	if s.http2 {
		name += "-h2"
	}
	if s.nginx {
		name += "-nginx"
	}
	if s.ipv6 {
		name += "-ipv6"
	}
	if s.lossRate > 0 {
		name += fmt.Sprintf("-loss%g-seed%d", s.lossRate*100, s.seed)
	}
	return name
}

// labTrial is a running trial: a client namespace to measure from and a server.
type labTrial struct {
	trial  *labpath.Path
	server netip.AddrPort
	netns  string // the client namespace's path
	scheme string
}

// url is the URL of /bytes/N on the trial's server.
func (l *labTrial) url(bodyBytes int64) string {
	return fmt.Sprintf("%s://%s/bytes/%d", l.scheme, l.server, bodyBytes)
}

// needRoot skips the test without root, except in CI, where it fails.
func needRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces, nf_tables and packet capture")
}

// keys and chains are shared by the tests of the package: making keys is slow.
var labKeys = struct {
	once sync.Once
	keys *server.KeyCache
	mu   sync.Mutex
	by   map[int]*server.Chain
}{by: map[int]*server.Chain{}}

func labChain(t *testing.T, bytes int) *server.Chain {
	t.Helper()
	labKeys.once.Do(func() { labKeys.keys = server.NewKeyCache() })
	labKeys.mu.Lock()
	defer labKeys.mu.Unlock()
	if c, ok := labKeys.by[bytes]; ok {
		return c
	}
	c, err := server.NewChain(server.ChainConfig{ServerName: labServerName, Intermediates: 1, TargetBytes: bytes, Keys: labKeys.keys})
	if err != nil {
		t.Fatalf("certificate chain of %d bytes: %v", bytes, err)
	}
	labKeys.by[bytes] = c
	return c
}

// startLab brings up a trial with spec's path and server, and registers its
// teardown (server, emulator, namespaces) with t.Cleanup, which also checks
// that no nftables table of the package is left in the client namespace.
func startLab(t *testing.T, spec labSpec) *labTrial {
	t.Helper()
	needRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	// The emulated path: half the RTT each way, loss on the data path only.
	path, err := labpath.Start(ctx, labpath.Config{RTT: time.Duration(spec.rttMs) * time.Millisecond, InitCwnd: spec.iw,
		LossRate: spec.lossRate, Seed: spec.seed, IPv6: spec.ipv6})
	if err != nil {
		cancel()
		t.Fatalf("start the trial's path: %v", err)
	}
	lt := &labTrial{trial: path, netns: path.ClientNetns, scheme: "http"}
	var stops []func()
	t.Cleanup(func() {
		if tables, err := Tables(lt.netns); err != nil {
			t.Errorf("list nftables tables in %s: %v", lt.netns, err)
		} else if len(tables) > 0 {
			t.Errorf("nftables tables left in the client namespace: %v", tables)
		}
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		cancel()
		names := []string{path.ClientNamespace, path.ServerNamespace}
		if err := path.Close(); err != nil {
			t.Errorf("close the trial's path: %v", err)
		}
		for _, name := range names {
			if _, err := os.Stat(netlab.NetnsDir + "/" + name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace %s is left behind", name)
			}
		}
	})

	port := uint16(80)
	var chain *server.Chain
	if spec.tls != "" {
		port, lt.scheme = 443, "https"
		chainBytes := spec.chainBytes
		if chainBytes == 0 {
			chainBytes = 4000
		}
		chain = labChain(t, chainBytes)
	}
	lt.server = netip.AddrPortFrom(path.ServerAddr, port)
	serveCtx, stopServe := context.WithCancel(ctx)
	if spec.nginx {
		cfg := server.NginxConfig{
			Address:    lt.server.String(),
			TLSVersion: spec.tls,
			HTTP2:      spec.http2,
			BodySizes:  []int64{spec.bodyBytes},
			Dial:       path.Dial,
		}
		if chain != nil {
			cfg.Certificate = chain.Certificate
		}
		ng, err := server.StartNginx(serveCtx, cfg, path.WrapCommand(labpath.Server))
		if err != nil {
			stopServe()
			t.Fatalf("start nginx: %v", err)
		}
		stops = append(stops, func() {
			stopServe()
			ng.Stop()
		})
		return lt
	}
	listener, err := path.Listen(labpath.Server, "tcp", lt.server.String())
	if err != nil {
		stopServe()
		t.Fatalf("listen: %v", err)
	}
	cfg := server.Config{TLSVersion: spec.tls, HTTP2: spec.http2}
	if chain != nil {
		cfg.Certificate = chain.Certificate
	}
	served := make(chan error, 1)
	go func() { served <- server.Serve(serveCtx, listener, cfg) }()
	stops = append(stops, func() {
		stopServe()
		if err := <-served; err != nil {
			t.Errorf("built-in server: %v", err)
		}
	})
	return lt
}

// measureLab measures the trial's server from its client namespace.
func measureLab(t *testing.T, lt *labTrial, opts Options) *Result {
	t.Helper()
	opts.Netns = lt.netns
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Measure(ctx, opts)
	if err != nil {
		t.Fatalf("measure %s: %v", opts.URL, err)
	}
	return res
}

// describeRuns is the runs in one line each, for failure messages.
func describeRuns(res *Result) string {
	var b strings.Builder
	for _, r := range res.Runs {
		fmt.Fprintf(&b, "\n  run %d: %s, %d segments of %d bytes (%d bytes, probe %d, flight %d, rwnd %d), rtt %.1f ms: %s %s",
			r.Index, r.Outcome, r.Segments, r.SegmentBytes, r.Bytes, r.LossProbeBytes, r.FlightBytes, r.ReceiveWindowBytes, r.HandshakeRTTMs, r.Reason, r.Error)
	}
	return b.String()
}
