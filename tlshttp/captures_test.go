package tlshttp

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
)

// The captures in ../testdata/tls were made by TestRealClientsAgainstNginx (see
// its README.md); each comes with its key log and nginx's access log.
func TestCommittedCaptures(t *testing.T) {
	pcaps, err := filepath.Glob("../testdata/tls/*.pcap")
	if err != nil || len(pcaps) == 0 {
		t.Fatalf("no captures in testdata: %v", err)
	}
	for _, pcap := range pcaps {
		base := strings.TrimSuffix(pcap, ".pcap")
		t.Run(filepath.Base(base), func(t *testing.T) {
			keys, err := keylog.ParseFile(base + ".keys")
			if err != nil {
				t.Fatal(err)
			}
			access, err := os.ReadFile(base + ".access.log")
			if err != nil {
				t.Fatal(err)
			}
			entries, err := parseAccessLog(string(access))
			if err != nil || len(entries) == 0 {
				t.Fatalf("access log: %d entries, %v", len(entries), err)
			}
			conns, err := decodeCapture(pcap, keys)
			if err != nil {
				t.Fatal(err)
			}
			compareWithAccessLog(t, conns, entries)
			if strings.Contains(base, "lossy") {
				// Holes filled by retransmissions: decrypted whole when the
				// retransmitted bytes are handed over, not when only new bytes are.
				newOnly, err := decodeCaptureFed(pcap, keys, true)
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range conns {
					if c.filled == 0 {
						t.Errorf("port %d: no hole filled later in a lossy capture", c.client.Port())
					}
					if len(newOnly[i].result.Decryption.Problems) == 0 {
						t.Errorf("port %d: only new bytes handed over, yet no record lost", c.client.Port())
					}
				}
			}
			// Without the key log: nothing, and said so.
			bare, err := decodeCapture(pcap, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range bare {
				if c.result.Decrypted || len(c.result.Exchanges) != 0 || c.result.NoKeysReason == "" {
					t.Errorf("without keys, port %d: %+v", c.client.Port(), c.result)
				}
			}
			compareWithTshark(t, pcap, base+".keys", entries[0].serverPort, conns)
		})
	}
}

// TestZeekKeylogCapture decrypts zeek's tls-1.2-stream-keylog.pcap (a browser
// loading www.heise.de over one TLS 1.2 connection, ECDHE-RSA-AES256-GCM-SHA384)
// with the key log zeek publishes for it. The expected requests are tshark's
// decryption of the same file (../testdata/tls/README.md).
func TestZeekKeylogCapture(t *testing.T) {
	const dir = "../testdata/tls/zeek"
	keys, err := keylog.ParseFile(filepath.Join(dir, "tls-1.2-stream-keylog.keys"))
	if err != nil {
		t.Fatal(err)
	}
	conns, err := decodeCapture(filepath.Join(dir, "tls-1.2-stream-keylog.pcap"), keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	res := conns[0].result
	if !res.Decrypted || res.Protocol != ProtocolHTTP1 || res.CipherSuite != 0xC030 || len(res.Decryption.Problems) != 0 {
		t.Fatalf("decrypted %t protocol %q suite %04x problems %v", res.Decrypted, res.Protocol, res.CipherSuite, res.Decryption.Problems)
	}
	text, err := os.ReadFile(filepath.Join(dir, "tls-1.2-stream-keylog.tshark.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	// Rows alternate: a request (method, uri, host), then its response (status,
	// Content-Length, Content-Type).
	type want struct {
		method, path, host string
		status             int
		length             int64
		contentType        string
	}
	var wants []want
	for _, line := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if f[0] != "" {
			wants = append(wants, want{method: f[0], path: f[1], host: f[2], length: -1})
			continue
		}
		w := &wants[len(wants)-1]
		w.status, _ = strconv.Atoi(f[3])
		if f[4] != "" {
			w.length, _ = strconv.ParseInt(f[4], 10, 64)
		}
		w.contentType = f[5]
	}
	if len(res.Exchanges) != len(wants) {
		t.Fatalf("%d exchanges, tshark shows %d", len(res.Exchanges), len(wants))
	}
	for i, w := range wants {
		x := res.Exchanges[i]
		wantBody := w.length
		if wantBody < 0 {
			wantBody = 0 // 304 responses: no body
		}
		if x.Method != w.method || x.Path != w.path || x.Authority != w.host || x.Status != w.status ||
			x.ContentType != w.contentType || x.BodyBytes != wantBody || !x.Complete {
			t.Errorf("exchange %d: %s %s %s %d %q body %d complete %t; tshark: %s %s %s %d %q Content-Length %d",
				i, x.Method, x.Path, x.Authority, x.Status, x.ContentType, x.BodyBytes, x.Complete,
				w.method, w.path, w.host, w.status, w.contentType, w.length)
		}
		if x.ResponseStart < res.HandshakeEnd[flow.ToClient] || x.ResponseEnd < x.ResponseStart {
			t.Errorf("exchange %d: response %d..%d, handshake end %d", i, x.ResponseStart, x.ResponseEnd, res.HandshakeEnd[flow.ToClient])
		}
	}
}
