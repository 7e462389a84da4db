package quicprobe

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

var labKeys = server.NewKeyCache()

// taps writes the link emulator's view of both TUN devices to two pcap files (link
// type RAW), as tcpdump on each device would.
type taps struct {
	mu    sync.Mutex
	files [2]*os.File
	bufs  [2]*bufio.Writer
	ws    [2]*pcapgo.Writer
}

func newTaps(t *testing.T, dir string) (*taps, [2]string) {
	t.Helper()
	tp := &taps{}
	var paths [2]string
	for i, name := range []string{"client.pcap", "server.pcap"} {
		paths[i] = filepath.Join(dir, name)
		f, err := os.Create(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		tp.files[i], tp.bufs[i] = f, bufio.NewWriter(f)
		tp.ws[i] = pcapgo.NewWriterNanos(tp.bufs[i])
		if err := tp.ws[i].WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
			t.Fatal(err)
		}
	}
	return tp, paths
}

func (tp *taps) tap(device int, data []byte, unixNs int64) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, unixNs), CaptureLength: len(data), Length: len(data)}
	_ = tp.ws[device].WritePacket(ci, data)
}

func (tp *taps) close() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i := range tp.files {
		tp.bufs[i].Flush()
		tp.files[i].Close()
	}
}

// labRun is one probe of a lab HTTP/3 server with the captures at both ends.
type labRun struct {
	res        *Result
	chainBytes int // the TLS 1.3 Certificate message the server sends
	pcaps      [2]string
	keylogPath string
}

// probeLab starts a lab server (built-in HTTP/3 or Caddy) with a chain of chainBytes,
// probes it over HTTP/3 from the client namespace with a 1,200-byte Initial, and
// returns the probe's result and the captures of the link emulator at both ends.
func probeLab(t *testing.T, caddy bool, chainBytes int, rttMs int, bodyBytes int64) labRun {
	t.Helper()
	dir := t.TempDir()
	if keep := os.Getenv("SLOWSTART_KEEP_CAPTURES"); keep != "" {
		// Keep the captures and key log to look at (tshark -o tls.keylog_file:keys.txt).
		dir = filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tp, pcaps := newTaps(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := probe.StartLabServer(ctx, probe.LabServerConfig{RTT: time.Duration(rttMs) * time.Millisecond, TLSVersion: "1.3",
		HTTP3: !caddy, Caddy: caddy, NginxBodySizes: []int64{bodyBytes}, ChainBytes: chainBytes, Keys: labKeys, Tap: tp.tap})
	if err != nil {
		tp.close()
		t.Fatalf("starting the lab server: %v", err)
	}
	keylogPath := filepath.Join(dir, "keys.txt")
	kf, err := os.Create(keylogPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, Options{URL: s.URL(fmt.Sprintf("/bytes/%d", bodyBytes)), Netns: s.Netns, Resolve: s.Resolve(), RootCAs: s.RootCAs,
		ClassicKeyShare: true, InitialPacketBytes: 1200, Keylog: kf, PacketLog: true, Timeout: 30 * time.Second})
	kf.Close()
	if cerr := s.Close(); cerr != nil {
		t.Errorf("closing the lab server: %v", cerr)
	}
	tp.close()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if res.BodyBytes != bodyBytes {
		t.Fatalf("body %d bytes, want %d", res.BodyBytes, bodyBytes)
	}
	// The TLS 1.3 Certificate message: 4 + 1 + 3 + Σ(3 + DER + 2), from the chain the
	// server was given (the lab reports it in the TLS 1.2 form: 4 + 3 + Σ(3 + DER)).
	c := res.Final()
	certs := 0
	if c.ClientTiming != nil && c.ClientTiming.ChainBytes > 0 {
		certs = c.ClientTiming.ChainBytes
	}
	return labRun{res: res, chainBytes: certs, pcaps: pcaps, keylogPath: keylogPath}
}

// TestHTTP3Lab probes the built-in HTTP/3 server and Caddy through the emulated path
// with a small and a large certificate chain, and checks the handshake round trips
// against what the chain and the amplification limit predict, the server's first
// flight against the limit, and the analysis of both captures against the probe.
func TestHTTP3Lab(t *testing.T) {
	testroot.Require(t, "network namespaces")
	t.Cleanup(func() { netlab.CloseAll() })
	const rttMs = 40
	const bodyBytes = 200_000
	for _, srv := range []string{"builtin", "caddy"} {
		for _, chain := range []int{1500, 9000} {
			t.Run(fmt.Sprintf("%s/chain%d", srv, chain), func(t *testing.T) {
				if srv == "caddy" {
					if _, err := os.Stat("/usr/bin/caddy"); err != nil {
						t.Skip("caddy is not installed (apt-get install caddy)")
					}
				}
				run := probeLab(t, srv == "caddy", chain, rttMs, bodyBytes)
				c := run.res.Final()
				var text strings.Builder
				report.WriteText(&text, run.res.Report)
				t.Log("\n" + text.String())
				checkPrediction(t, c, chain)
				checkFirstFlight(t, c)
				if srv == "builtin" {
					checkQuicGoWindow(t, c)
				}
				keys, err := keylog.ParseFile(run.keylogPath)
				if err != nil {
					t.Fatal(err)
				}
				for i, vantage := range []string{report.VantageClient, report.VantageServer} {
					fromFile := analyzeFile(t, run.pcaps[i], keys)
					compareWithProbe(t, vantage, c, fromFile)
				}
				compareWithTshark(t, run.pcaps[0], run.keylogPath, keys)
			})
		}
	}
}

// checkPrediction: the server's handshake flight (the chain plus about 700 bytes of
// ServerHello, EncryptedExtensions, CertificateVerify, Finished and QUIC headers) fits
// in three times the client's single 1,200-byte Initial when the chain is small (one
// round trip before the request can be answered), and does not when the chain is
// larger than that budget (one round trip more).
func checkPrediction(t *testing.T, c *report.Connection, chainBytes int) {
	t.Helper()
	budget := 3 * 1200
	want := 0
	switch {
	case chainBytes+700 < budget:
		want = 1
	case chainBytes > budget:
		want = 2
	default:
		t.Fatalf("chain %d bytes is too close to the %d-byte budget to predict", chainBytes, budget)
	}
	if c.RoundTrips.TLS != want {
		t.Errorf("chain %d bytes: %d handshake round trips, want %d", chainBytes, c.RoundTrips.TLS, want)
	}
	q := c.QUIC
	if q.ClientInitialBytes != 1200 {
		t.Errorf("the client's first flight was %d bytes, want one 1,200-byte Initial", q.ClientInitialBytes)
	}
	if (want == 2) != q.AmplificationLimited {
		t.Errorf("amplification limited %v with %d handshake round trips", q.AmplificationLimited, want)
	}
	var diag bool
	for _, d := range c.Diagnoses {
		if d.Kind == quicanalysis.DiagnosisCertificateChain {
			diag = true
			t.Logf("diagnosis: %s", d.Text)
		}
	}
	if diag != (want == 2) {
		t.Errorf("certificate_chain diagnosis %v, want %v", diag, want == 2)
	}
}

// checkFirstFlight: before the client's address is validated the server may send three
// times what it received (RFC 9000 §8.1). quic-go checks the limit before each packet
// and sends full ones, so it may pass the limit by less than one datagram: with a
// 1,200-byte Initial and 1,280-byte datagrams it sends 3 × 1,280 = 3,840 bytes where
// the RFC allows 3,600. When the flight is larger than the limit the server uses it to
// within one datagram; when smaller, the whole flight leaves at once.
func checkFirstFlight(t *testing.T, c *report.Connection) {
	t.Helper()
	q := c.QUIC
	limit := 3 * q.ClientInitialBytes
	if q.ServerFirstFlightBytes >= limit+c.MSS {
		t.Errorf("the server sent %d bytes before the client's first acknowledgement, a datagram or more beyond 3 × %d", q.ServerFirstFlightBytes, q.ClientInitialBytes)
	}
	if q.ServerFirstFlightBytes > limit {
		t.Logf("the server passed the amplification limit by %d bytes (%d sent, 3 × %d = %d allowed)", q.ServerFirstFlightBytes-limit, q.ServerFirstFlightBytes, q.ClientInitialBytes, limit)
	}
	if q.AmplificationLimited && q.ServerFirstFlightBytes <= limit-c.MSS {
		t.Errorf("amplification limited, but the first flight (%d bytes) left more than a datagram (%d) of the %d-byte budget", q.ServerFirstFlightBytes, c.MSS, limit)
	}
	if !q.AmplificationLimited && q.ServerFirstFlightBytes < c.TLS.ServerFlightBytes {
		t.Errorf("not amplification limited, but the first flight (%d bytes) is less than the handshake flight (%d)", q.ServerFirstFlightBytes, c.TLS.ServerFlightBytes)
	}
}

// quicGoInitialWindowBytes is quic-go's initial congestion window: 32 packets of its
// initial 1,280-byte packet size (internal/congestion/cubic_sender.go).
const quicGoInitialWindowBytes = 32 * 1280

// checkQuicGoWindow: the first response round of the built-in server is cut by its
// window, which a sender may overshoot by less than one datagram.
func checkQuicGoWindow(t *testing.T, c *report.Connection) {
	t.Helper()
	iw := c.InitialWindow
	if iw.Verdict != report.VerdictExact {
		t.Errorf("IW verdict %s (%s), want exact", iw.Verdict, iw.Reason)
		return
	}
	if iw.Bytes < quicGoInitialWindowBytes || iw.Bytes-c.MSS >= quicGoInitialWindowBytes {
		t.Errorf("IW %d bytes in flight (datagrams up to %d): quic-go's window of %d bytes is not within one datagram below it", iw.Bytes, c.MSS, quicGoInitialWindowBytes)
	}
}

func analyzeFile(t *testing.T, path string, keys *keylog.Log) *report.Connection {
	t.Helper()
	src, err := quicanalysis.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rep, err := quicanalysis.Run(context.Background(), src, "test", report.Source{Kind: "file", Path: path}, quicanalysis.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Connections) != 1 {
		t.Fatalf("%s: %d QUIC connections, want 1", path, len(rep.Connections))
	}
	return &rep.Connections[0]
}

// compareWithProbe checks the analysis of a capture against the probe's.
func compareWithProbe(t *testing.T, vantage string, probed, captured *report.Connection) {
	t.Helper()
	if captured.Vantage != vantage {
		t.Errorf("%s capture: vantage %s", vantage, captured.Vantage)
	}
	if captured.QUIC.Decrypted != "all" {
		t.Errorf("%s capture: decrypted %s (%v)", vantage, captured.QUIC.Decrypted, captured.Notes)
	}
	type pair struct {
		name      string
		got, want int
	}
	for _, p := range []pair{
		{"handshake round trips", captured.RoundTrips.TLS, probed.RoundTrips.TLS},
		{"client first-flight bytes", captured.QUIC.ClientInitialBytes, probed.QUIC.ClientInitialBytes},
		{"server first-flight bytes", captured.QUIC.ServerFirstFlightBytes, probed.QUIC.ServerFirstFlightBytes},
		{"certificate bytes", captured.QUIC.CertificateBytes, probed.QUIC.CertificateBytes},
	} {
		if p.got != p.want {
			t.Errorf("%s capture: %s %d, the probe's %d", vantage, p.name, p.got, p.want)
		}
	}
	// The rounds of the response and the IW reading depend on times: the probe's are
	// the client socket's, the captures' the link emulator's, and a datagram that
	// arrives within the margin of an acknowledgement's return may fall in either
	// round. Those are compared when both read the window as exact.
	if ci, pi := captured.InitialWindow, probed.InitialWindow; ci.Verdict == report.VerdictExact && pi.Verdict == report.VerdictExact && ci.Bytes != pi.Bytes {
		t.Errorf("%s capture: IW exact %d bytes, the probe's exact %d", vantage, ci.Bytes, pi.Bytes)
	}
	if captured.HandshakeRTTMs == nil || *captured.HandshakeRTTMs < 40 {
		t.Errorf("%s capture: handshake RTT %v, want at least the path's 40 ms", vantage, captured.HandshakeRTTMs)
	}
}
