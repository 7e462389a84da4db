//go:build linux

package tlshttp

import (
	"crypto/tls"
	"slices"
	"strconv"
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/tlsdecrypt"
)

// realCase is a scenario and what its connections must show besides what
// nginx's log and tshark say.
type realCase struct {
	scenario
	version uint16
	suite   uint16 // 0: not checked
	// connections is how many connections carry requests; resumed says the
	// later ones resume the first one's session.
	connections int
	resumed     bool
	keyUpdate   bool
	// helloRetry: the server asked for another key share (two ClientHellos).
	helloRetry bool
	// earlyData: the last connection's request went as 0-RTT data.
	earlyData bool
	// holes: the capture has holes in the server's stream, filled later.
	holes bool
}

func TestRealClientsAgainstNginx(t *testing.T) {
	needs(t, "curl", "chromium", "openssl", "tshark")
	l := startLab(t)
	tls12 := []string{"--tlsv1.2", "--tls-max", "1.2"}
	with := func(base []string, more ...string) []string { return append(slices.Clone(base), more...) }
	cases := []realCase{
		{scenario: curlScenario("curl-tls13-h2", portTLS13H2, []string{"--http2", "--tlsv1.3"}, "/a.bin", "/b.bin", "/missing", "/small.txt"),
			version: tls.VersionTLS13, suite: tls.TLS_AES_256_GCM_SHA384, connections: 1},
		{scenario: curlScenario("curl-tls13-h2-aes128", portTLS13H2, []string{"--http2", "--tlsv1.3", "--tls13-ciphers", "TLS_AES_128_GCM_SHA256"}, "/b.bin", "/a.bin"),
			version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, connections: 1},
		{scenario: curlScenario("curl-tls13-h1-chacha", portTLS13H1, []string{"--http1.1", "--tlsv1.3", "--tls13-ciphers", "TLS_CHACHA20_POLY1305_SHA256"}, "/b.bin", "/missing", "/a.bin"),
			version: tls.VersionTLS13, suite: tls.TLS_CHACHA20_POLY1305_SHA256, connections: 1},
		{scenario: curlScenario("curl-tls12-h2-ecdsa-aes128gcm", portTLS12H2, with(tls12, "--http2", "--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256"), "/a.bin", "/b.bin"),
			version: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, connections: 1},
		{scenario: curlScenario("curl-tls12-h1-rsa-aes256gcm", portTLS12H1, with(tls12, "--http1.1", "--ciphers", "ECDHE-RSA-AES256-GCM-SHA384"), "/b.bin", "/small.txt"),
			version: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, connections: 1},
		{scenario: curlScenario("curl-tls12-h1-rsa-chacha", portTLS12H1, with(tls12, "--http1.1", "--ciphers", "ECDHE-RSA-CHACHA20-POLY1305"), "/a.bin", "/missing"),
			version: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, connections: 1},
		{scenario: curlScenario("curl-tls12-h1-cbc-sha-etm", portTLS12H1, with(tls12, "--http1.1", "--ciphers", "ECDHE-RSA-AES128-SHA"), "/b.bin", "/small.txt"),
			version: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, connections: 1},
		{scenario: curlScenario("curl-tls12-h1-cbc-sha384-mte", portTLS12MtE, with(tls12, "--http1.1", "--ciphers", "ECDHE-ECDSA-AES256-SHA384"), "/a.bin", "/small.txt"),
			version: tls.VersionTLS12, suite: 0xC024, connections: 1},
		{scenario: curlScenario("curl-tls12-h1-cbc-sha256-rsa-mte", portTLS12MtE, with(tls12, "--http1.1", "--ciphers", "AES128-SHA256"), "/a.bin"),
			version: tls.VersionTLS12, suite: tls.TLS_RSA_WITH_AES_128_CBC_SHA256, connections: 1},
		{scenario: curlScenario("curl-tls12-h1-resumed", portTLS12H1, with(tls12, "--http1.1", "-H", "Connection: close"), "/small.txt", "/a.bin"),
			version: tls.VersionTLS12, connections: 2, resumed: true},
		{scenario: curlScenario("curl-tls13-h1-resumed", portTLS13H1, []string{"--http1.1", "--tlsv1.3", "-H", "Connection: close"}, "/small.txt", "/a.bin"),
			version: tls.VersionTLS13, connections: 2, resumed: true},
		{scenario: keyUpdateScenario("openssl-tls13-h1-keyupdate", portTLS13H1), version: tls.VersionTLS13, connections: 1, keyUpdate: true},
		{scenario: earlyDataScenario("tiny-openssl-tls13-h1-early-data", portTLS13RTT), version: tls.VersionTLS13, connections: 2, resumed: true, earlyData: true},
		{scenario: lossyCurlScenario("curl-tls13-h2-lossy", portTLS13Loss, []string{"--http2", "--tlsv1.3"}, "/b.bin", "/a.bin", "/small.txt"),
			version: tls.VersionTLS13, connections: 1, holes: true},
		{scenario: lossyCurlScenario("curl-tls12-h1-lossy", portTLS12Loss, with(tls12, "--http1.1"), "/b.bin", "/a.bin"),
			version: tls.VersionTLS12, connections: 1, holes: true},
		{scenario: curlScenario("curl-tls13-h2-hello-retry", portTLS13HRR, []string{"--http2", "--tlsv1.3", "--curves", "X25519:secp384r1"}, "/a.bin", "/small.txt"),
			version: tls.VersionTLS13, connections: 1, helloRetry: true},
		{scenario: chromiumScenario("chromium-tls13-h2-hello-retry", portTLS13HRR, "/tiny/index.html", 4), version: tls.VersionTLS13, helloRetry: true},
		{scenario: chromiumScenario("chromium-tls13-h2", portTLS13H2, "/page/index.html", 4), version: tls.VersionTLS13, connections: 1},
		{scenario: chromiumScenario("chromium-tls12-h2", portTLS12H2, "/page/index.html", 4), version: tls.VersionTLS12, connections: 1},
		{scenario: chromiumScenario("chromium-tls12-h1", portTLS12H1, "/page/index.html", 4), version: tls.VersionTLS12},
		// Small ones, kept in testdata/ for the tests without root (see its README).
		{scenario: curlScenario("tiny-curl-tls13-h2", portTLS13H2, []string{"--http2", "--tlsv1.3"}, "/small.txt", "/tiny/app.js", "/missing"),
			version: tls.VersionTLS13, connections: 1},
		{scenario: curlScenario("tiny-curl-tls12-h1-cbc", portTLS12H1, with(tls12, "--http1.1", "--ciphers", "ECDHE-RSA-AES128-SHA"), "/small.txt", "/tiny/style.css"),
			version: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, connections: 1},
		{scenario: chromiumScenario("tiny-chromium-tls13-h2", portTLS13H2, "/tiny/index.html", 4), version: tls.VersionTLS13, connections: 1},
		{scenario: keyUpdateScenario("tiny-openssl-tls13-h1-keyupdate", portTLS13H1), version: tls.VersionTLS13, connections: 1, keyUpdate: true},
		{scenario: lossyCurlScenario("tiny-curl-tls13-h2-lossy", portTLS13Loss, []string{"--http2", "--tlsv1.3"}, "/tiny/img.png", "/tiny/app.js", "/small.txt"),
			version: tls.VersionTLS13, connections: 1, holes: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := l.runScenario(t, c.scenario)
			checkRealCase(t, c, files)
		})
	}
}

// checkRealCase decodes a scenario's capture and checks it against nginx's log,
// tshark's decryption, and what the case says of its connections.
func checkRealCase(t *testing.T, c realCase, files scenarioFiles) {
	t.Helper()
	keys, err := keylog.ParseFile(files.keys)
	if err != nil {
		t.Fatal(err)
	}
	conns, err := decodeCapture(files.pcap, keys)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseAccessLog(files.access)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != c.requests {
		t.Fatalf("nginx logged %d requests, the client made %d", len(entries), c.requests)
	}
	compareWithAccessLog(t, conns, entries)
	compareWithTshark(t, files.pcap, files.keys, c.port, conns)

	var used []connResult
	for _, conn := range conns {
		if len(conn.result.Exchanges) > 0 {
			used = append(used, conn)
		}
		first := len(used) == 1 && len(conn.result.Exchanges) > 0
		res := conn.result
		if !res.Decrypted {
			continue
		}
		if res.Version != c.version || (c.suite != 0 && res.CipherSuite != c.suite) {
			t.Errorf("port %d: version %04x suite %s, want %04x %s", conn.client.Port(), res.Version,
				tlsdecrypt.SuiteName(res.CipherSuite), c.version, tlsdecrypt.SuiteName(c.suite))
		}
		for dir := range 2 {
			if res.HandshakeEnd[dir] < 0 || res.HandshakeEndInferred[dir] {
				t.Errorf("port %d dir %d: handshake end %d (inferred %t), want the end of its Finished record",
					conn.client.Port(), dir, res.HandshakeEnd[dir], res.HandshakeEndInferred[dir])
			}
		}
		// What follows a TLS 1.3 server's full handshake and is not HTTP: its
		// session tickets (nginx sends two, OpenSSL's default).
		if res.Version == tls.VersionTLS13 && first {
			tickets := 0
			for _, r := range res.NonApplication {
				if r.Dir == flow.ToClient && slices.Contains(r.HandshakeTypes, 4) {
					tickets++
				}
			}
			if tickets == 0 {
				t.Errorf("port %d: no NewSessionTicket records after the server's handshake", conn.client.Port())
			}
		}
		if c.keyUpdate {
			for _, dir := range []flow.Dir{flow.ToServer, flow.ToClient} {
				found := false
				for _, r := range res.NonApplication {
					found = found || (r.Dir == dir && slices.Contains(r.HandshakeTypes, 24))
				}
				if !found {
					t.Errorf("port %d: no KeyUpdate from the %s side", conn.client.Port(), dir)
				}
			}
		}
	}
	if c.connections > 0 && len(used) != c.connections {
		t.Errorf("%d connections carried requests, want %d", len(used), c.connections)
	}
	if c.holes {
		for _, conn := range used {
			if conn.holes == 0 || conn.filled == 0 {
				t.Errorf("port %d: %d holes in the server's stream, %d filled later; want both (the loss rule did not act)", conn.client.Port(), conn.holes, conn.filled)
			}
		}
		// Handed only the new bytes of each segment, the holes stay holes: records
		// are lost, and said to be.
		newOnly, err := decodeCaptureFed(files.pcap, keys, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, conn := range newOnly {
			if len(conn.result.Exchanges) > 0 && len(conn.result.Decryption.Problems) == 0 {
				t.Errorf("port %d: the holes left no trace when only new bytes were handed over", conn.client.Port())
			}
		}
	}
	if c.earlyData {
		// The request decrypted from 0-RTT data: its record was sent before the
		// client's Finished.
		last := used[len(used)-1].result
		if len(last.Exchanges) != 1 || !last.Exchanges[0].EarlyData || last.Exchanges[0].RequestOffset >= last.HandshakeEnd[flow.ToServer] {
			t.Errorf("early-data connection: exchanges %+v, client handshake end %d; want one request before it",
				last.Exchanges, last.HandshakeEnd[flow.ToServer])
		}
	}
	if c.helloRetry {
		// Independent reading: tshark shows two ClientHellos on the connection.
		hellos := make(map[int]int)
		for _, row := range tsharkFields(t, files.pcap, files.keys, "tls.handshake.type == 1", "tcp.srcport") {
			port, _ := strconv.Atoi(row[0])
			hellos[port]++
		}
		for _, conn := range used {
			if hellos[int(conn.client.Port())] != 2 {
				t.Errorf("port %d: %d ClientHellos, want 2 (a HelloRetryRequest)", conn.client.Port(), hellos[int(conn.client.Port())])
			}
		}
	}
	if c.resumed {
		// Independent reading: tshark shows a Certificate message only on the
		// connection that did the full handshake.
		certificates := make(map[int]int)
		for _, row := range tsharkFields(t, files.pcap, files.keys, "tls.handshake.type == 11", "tcp.dstport") {
			port, _ := strconv.Atoi(row[0])
			certificates[port]++
		}
		for i, conn := range used {
			if full := certificates[int(conn.client.Port())] > 0; full != (i == 0) {
				t.Errorf("connection %d (port %d): full handshake %t; the later connections must resume", i, conn.client.Port(), full)
			}
		}
	}
}
