package tlshttp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
)

// wire records what both ends of one TCP connection wrote, in order.
type wire struct {
	mu     sync.Mutex
	writes []wireWrite
}

type wireWrite struct {
	dir  flow.Dir
	data []byte
}

type wireConn struct {
	net.Conn
	dir  flow.Dir
	wire *wire
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.wire.mu.Lock()
	c.wire.writes = append(c.wire.writes, wireWrite{c.dir, bytes.Clone(p)})
	c.wire.mu.Unlock()
	return c.Conn.Write(p)
}

func (w *wire) stream(dir flow.Dir) []byte {
	var out []byte
	for _, x := range w.writes {
		if x.dir == dir {
			out = append(out, x.data...)
		}
	}
	return out
}

// feed runs a Conn over the recorded writes, each write one piece.
func (w *wire) feed(keys *keylog.Log) Result {
	c := New(keys)
	var offsets [2]int64
	for i, x := range w.writes {
		c.Write(x.dir, offsets[x.dir], x.data, len(x.data), int64(i+1))
		offsets[x.dir] += int64(len(x.data))
	}
	return c.Close()
}

// servedBody is what the test server sends per path.
var servedBody = map[string]struct {
	status      int
	contentType string
	bytes       int
}{
	"/":         {200, "text/html", 12000},
	"/app.js":   {200, "application/javascript", 90000},
	"/logo.png": {200, "image/png", 30000},
	"/gone":     {404, "text/plain", 9},
}

func servedHandler(w http.ResponseWriter, r *http.Request) {
	s, ok := servedBody[r.URL.Path]
	if !ok {
		http.Error(w, "unknown", 500)
		return
	}
	w.Header().Set("Content-Type", s.contentType)
	w.Header().Set("Content-Length", fmt.Sprint(s.bytes))
	w.WriteHeader(s.status)
	w.Write(bytes.Repeat([]byte("z"), s.bytes))
}

func testCertificate(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "server.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"server.test"}}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// runGoHTTPS makes requests for paths over one TLS connection between net/http's
// client and server on loopback, HTTP/2 or HTTP/1.1, and returns the wire and
// the client's key log.
func runGoHTTPS(t *testing.T, version uint16, h2 bool, paths []string) (*wire, *keylog.Log) {
	t.Helper()
	w := &wire{}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert := testCertificate(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version, NextProtos: []string{"http/1.1"}}
	if h2 {
		serverTLS.NextProtos = []string{"h2", "http/1.1"}
	}
	server := &http.Server{Handler: http.HandlerFunc(servedHandler), TLSConfig: serverTLS}
	recordingListener := &wireListener{Listener: listener, wire: w}
	go server.ServeTLS(recordingListener, "", "")
	defer server.Close()

	var keyLog bytes.Buffer
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, KeyLogWriter: &keyLog, MinVersion: version, MaxVersion: version},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, listener.Addr().String())
			if err != nil {
				return nil, err
			}
			return &wireConn{Conn: conn, dir: flow.ToServer, wire: w}, nil
		},
		ForceAttemptHTTP2: h2,
		MaxConnsPerHost:   1,
	}
	if !h2 {
		transport.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	client := &http.Client{Transport: transport}
	for _, path := range paths {
		resp, err := client.Get("https://server.test" + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if (resp.ProtoMajor == 2) != h2 {
			t.Fatalf("%s answered over %s", path, resp.Proto)
		}
	}
	transport.CloseIdleConnections()
	server.Close()
	keys, err := keylog.Parse(&keyLog)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w, keys
}

type wireListener struct {
	net.Listener
	wire *wire
}

func (l *wireListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: conn, dir: flow.ToClient, wire: l.wire}, nil
}

// recordBounds walks a stream's record headers: an independent reading of where
// records start and end.
func recordBounds(stream []byte) map[int64]int64 {
	bounds := make(map[int64]int64)
	for at := 0; at+5 <= len(stream); {
		end := at + 5 + int(binary.BigEndian.Uint16(stream[at+3:]))
		bounds[int64(at)] = int64(end)
		at = end
	}
	return bounds
}

func TestGoHTTPS(t *testing.T) {
	paths := []string{"/", "/app.js", "/logo.png", "/gone", "/app.js"}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, h2 := range []bool{false, true} {
			name := tls.VersionName(version) + " HTTP/1.1"
			if h2 {
				name = tls.VersionName(version) + " HTTP/2"
			}
			t.Run(name, func(t *testing.T) {
				w, keys := runGoHTTPS(t, version, h2, paths)
				res := w.feed(keys)
				wantProtocol := ProtocolHTTP1
				if h2 {
					wantProtocol = ProtocolHTTP2
				}
				if !res.Decrypted || res.Protocol != wantProtocol || res.Version != version {
					t.Fatalf("decrypted %t protocol %q version %04x, want %q %04x (%+v)", res.Decrypted, res.Protocol, res.Version, wantProtocol, version, res.Decryption)
				}
				if len(res.Exchanges) != len(paths) {
					t.Fatalf("%d exchanges, want %d: %+v", len(res.Exchanges), len(paths), res.Exchanges)
				}
				client, server := w.stream(flow.ToServer), w.stream(flow.ToClient)
				clientRecords, serverRecords := recordBounds(client), recordBounds(server)
				lastEnd := int64(0)
				for i, x := range res.Exchanges {
					want := servedBody[paths[i]]
					if x.Method != "GET" || x.Path != paths[i] || x.Status != want.status || x.ContentType != want.contentType ||
						x.BodyBytes != int64(want.bytes) || !x.Complete || x.Incomplete || x.Authority != "server.test" {
						t.Errorf("exchange %d: %+v, want GET %s %d %q with %d body bytes, complete", i, x, paths[i], want.status, want.contentType, want.bytes)
					}
					if _, ok := clientRecords[x.RequestOffset]; !ok || x.RequestOffset < res.HandshakeEnd[flow.ToServer] {
						t.Errorf("exchange %d: request at %d is not a client record start after the handshake (%d)", i, x.RequestOffset, res.HandshakeEnd[flow.ToServer])
					}
					if _, ok := serverRecords[x.ResponseStart]; !ok || x.ResponseStart < res.HandshakeEnd[flow.ToClient] {
						t.Errorf("exchange %d: response starts at %d, not a server record start after the handshake", i, x.ResponseStart)
					}
					isEnd := false
					for _, end := range serverRecords {
						isEnd = isEnd || end == x.ResponseEnd
					}
					if !isEnd || x.ResponseEnd <= x.ResponseStart {
						t.Errorf("exchange %d: response ends at %d, not a record end after its start %d", i, x.ResponseEnd, x.ResponseStart)
					}
					// The ciphertext can't be smaller than the plaintext it carried.
					var spanned int64
					for _, s := range x.ResponseSpans {
						spanned += s.End - s.Start
					}
					if spanned < x.Bytes || x.Bytes <= x.BodyBytes {
						t.Errorf("exchange %d: records span %d bytes for %d plaintext bytes (%d body)", i, spanned, x.Bytes, x.BodyBytes)
					}
					if x.RequestNs <= 0 || x.FirstByteNs < x.RequestNs || x.LastByteNs < x.FirstByteNs {
						t.Errorf("exchange %d: times request %d first %d last %d out of order", i, x.RequestNs, x.FirstByteNs, x.LastByteNs)
					}
					// Requests are sent one after another here.
					if x.ResponseStart < lastEnd {
						t.Errorf("exchange %d response at %d before the previous one ended at %d", i, x.ResponseStart, lastEnd)
					}
					lastEnd = x.ResponseEnd
				}
				for _, r := range res.NonApplication {
					if r.Dir == flow.ToClient && r.Offset < res.HandshakeEnd[flow.ToClient] {
						t.Errorf("non-application record at %d before the handshake end", r.Offset)
					}
				}
			})
		}
	}
}

// TestLostRecords drops one 1448-byte segment in the middle of a response's
// body (its record is not captured whole). TLS 1.2 with AES-GCM fixes the lost
// plaintext's length, so HTTP/1.1 framing survives and every exchange is whole;
// TLS 1.3 hides it, so the exchange it cut, and those after it, say so.
func TestLostRecords(t *testing.T) {
	paths := []string{"/", "/app.js", "/logo.png"}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			w, keys := runGoHTTPS(t, version, false, paths)
			whole := w.feed(keys)
			if len(whole.Exchanges) != len(paths) {
				t.Fatalf("%d exchanges in the whole capture", len(whole.Exchanges))
			}
			// The segment 30 000 bytes into /app.js's response: inside its body.
			target := whole.Exchanges[1].ResponseStart + 30000
			c := New(keys)
			var offsets [2]int64
			dropped := false
			for i, x := range w.writes {
				for at := 0; at < len(x.data); at += 1448 {
					segment := x.data[at:min(at+1448, len(x.data))]
					offset := offsets[x.dir]
					offsets[x.dir] += int64(len(segment))
					if x.dir == flow.ToClient && !dropped && offset <= target && target < offset+int64(len(segment)) {
						dropped = true
						continue
					}
					c.Write(x.dir, offset, segment, len(segment), int64(i+1))
				}
			}
			if !dropped {
				t.Fatal("no segment dropped")
			}
			res := c.Close()
			if len(res.Decryption.Problems) == 0 {
				t.Error("a record was lost without a problem reported")
			}
			if len(res.Exchanges) != len(paths) {
				t.Fatalf("%d exchanges, want %d", len(res.Exchanges), len(paths))
			}
			for i, x := range res.Exchanges {
				want := servedBody[paths[i]]
				if x.Path != paths[i] || (x.Status != 0 && x.Status != want.status) {
					t.Errorf("exchange %d: %s %d, want %s %d", i, x.Path, x.Status, paths[i], want.status)
				}
				cut := version == tls.VersionTLS13 && i >= 1
				if cut {
					if !x.Incomplete || x.Reason != ReasonRecordLost || x.Complete {
						t.Errorf("exchange %d after a lost TLS 1.3 record: complete %t incomplete %t %q", i, x.Complete, x.Incomplete, x.Reason)
					}
					continue
				}
				if !x.Complete || x.Incomplete || x.BodyBytes != int64(want.bytes) || x.Bytes != whole.Exchanges[i].Bytes {
					t.Errorf("exchange %d: complete %t incomplete %t (%s), body %d bytes %d; want whole, %d and %d",
						i, x.Complete, x.Incomplete, x.Reason, x.BodyBytes, x.Bytes, want.bytes, whole.Exchanges[i].Bytes)
				}
			}
		})
	}
}
