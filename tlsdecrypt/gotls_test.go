package tlsdecrypt

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/streamtest"
	"github.com/slowstart/slowstart/keylog"
)

// wireLog records, in order, what each side of a connection wrote: the order a
// capture between them would show.
type wireLog struct {
	mu     sync.Mutex
	writes []wireWrite
}

type wireWrite struct {
	dir  flow.Dir
	data []byte
}

type loggingConn struct {
	net.Conn
	dir flow.Dir
	log *wireLog
}

func (c *loggingConn) Write(p []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes = append(c.log.writes, wireWrite{c.dir, bytes.Clone(p)})
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}

// stream concatenates what one side wrote.
func (l *wireLog) stream(dir flow.Dir) []byte {
	var out []byte
	for _, w := range l.writes {
		if w.dir == dir {
			out = append(out, w.data...)
		}
	}
	return out
}

// goSession is a TLS connection between crypto/tls's client and server: the bytes
// on the wire, the key log the client wrote, and the application bytes each side
// sent.
type goSession struct {
	wire                 *wireLog
	keys                 *keylog.Log
	request, response    []byte
	version, cipherSuite uint16
	alpn                 string
	resumed              bool
}

func testCertificate(t testing.TB, rsaKey bool) tls.Certificate {
	t.Helper()
	template := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "server.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"server.test"},
	}
	var public, private any
	if rsaKey {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		public, private = &key.PublicKey, key
	} else {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		public, private = &key.PublicKey, key
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, public, private)
	if err != nil {
		t.Fatalf("creating a test certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: private}
}

// runGoTLS runs a crypto/tls client and server over net.Pipe: the client sends
// request, the server answers with response in writes of at most chunk bytes,
// then both close.
func runGoTLS(t testing.TB, version, suite uint16, certificate tls.Certificate, request, response []byte, chunk int) goSession {
	t.Helper()
	return newGoTLSPair(version, suite, certificate).run(t, request, response, chunk)
}

// goTLSPair is a client and server configuration kept across connections, so
// that the second connection resumes the first one's session.
type goTLSPair struct {
	version, suite uint16
	server         *tls.Config
	cache          tls.ClientSessionCache
}

func newGoTLSPair(version, suite uint16, certificate tls.Certificate) *goTLSPair {
	p := &goTLSPair{version: version, suite: suite, cache: tls.NewLRUClientSessionCache(1)}
	p.server = &tls.Config{
		Certificates: []tls.Certificate{certificate},
		MinVersion:   version, MaxVersion: version,
		NextProtos: []string{"http/1.1"},
	}
	if suite != 0 {
		p.server.CipherSuites = []uint16{suite}
	}
	return p
}

// tcpPair connects two TCP sockets over loopback (net.Pipe has no buffer, and
// TLS 1.3 servers write their tickets while the client writes its Finished).
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on loopback: %v", err)
	}
	defer listener.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, _ := listener.Accept()
		accepted <- conn
	}()
	client, err = net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatalf("connecting over loopback: %v", err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accepting a loopback connection failed")
	}
	return client, server
}

// run makes one connection: the client sends request, the server answers with
// response in writes of at most chunk bytes, then both close.
func (p *goTLSPair) run(t testing.TB, request, response []byte, chunk int) goSession {
	t.Helper()
	version, suite := p.version, p.suite
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wire := &wireLog{}
	clientEnd, serverEnd := tcpPair(t)
	var keyLog bytes.Buffer
	serverConfig := p.server
	clientConfig := &tls.Config{
		ServerName: "server.test", InsecureSkipVerify: true, // self-signed test certificate
		MinVersion: version, MaxVersion: version,
		NextProtos:         []string{"h2", "http/1.1"},
		KeyLogWriter:       &keyLog,
		ClientSessionCache: p.cache,
	}
	if suite != 0 {
		clientConfig.CipherSuites = []uint16{suite}
	}
	server := tls.Server(&loggingConn{serverEnd, flow.ToClient, wire}, serverConfig)
	client := tls.Client(&loggingConn{clientEnd, flow.ToServer, wire}, clientConfig)

	state, _ := streamtest.TLSExchange(ctx, t, client, server, request, response, chunk)
	keys, err := keylog.Parse(&keyLog)
	if err != nil {
		t.Fatal(err)
	}
	return goSession{wire: wire, keys: keys, request: request, response: response,
		version: state.Version, cipherSuite: state.CipherSuite, alpn: state.NegotiatedProtocol, resumed: state.DidResume}
}

// decrypted is what a Decryptor gave for a connection.
type decrypted struct {
	records []Record // plaintexts copied
	appData [2][]byte
	summary Summary
}

// piece is one Write call.
type piece struct {
	dir    flow.Dir
	offset int64
	data   []byte
	length int
}

// wirePieces turns the wire log into Write calls, one per write, in order.
func wirePieces(l *wireLog) []piece {
	var out []piece
	var offsets [2]int64
	for _, w := range l.writes {
		out = append(out, piece{w.dir, offsets[w.dir], w.data, len(w.data)})
		offsets[w.dir] += int64(len(w.data))
	}
	return out
}

func runDecryptor(keys *keylog.Log, pieces []piece) decrypted {
	var out decrypted
	d := New(Config{Keys: keys, OnRecord: func(r *Record) {
		copied := *r
		copied.Plaintext = bytes.Clone(r.Plaintext)
		copied.HandshakeTypes = bytes.Clone(r.HandshakeTypes)
		out.records = append(out.records, copied)
		if r.ContentType == 23 && !r.Lost {
			out.appData[r.Dir] = append(out.appData[r.Dir], r.Plaintext...)
		}
	}})
	for i, p := range pieces {
		d.Write(p.dir, p.offset, p.data, p.length, int64(i+1))
	}
	d.Close()
	out.summary = d.Summary()
	return out
}

func TestGoTLS(t *testing.T) {
	ecdsaCert := testCertificate(t, false)
	rsaCert := testCertificate(t, true)
	request := []byte("GET / HTTP/1.1\r\nHost: server.test\r\n\r\n")
	response := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80 000 bytes: several full records
	tests := []struct {
		name    string
		version uint16
		suite   uint16
		cert    tls.Certificate
	}{
		{"1.3", tls.VersionTLS13, 0, ecdsaCert},
		{"1.2 ECDHE-ECDSA-AES128-GCM-SHA256", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ecdsaCert},
		{"1.2 ECDHE-RSA-AES256-GCM-SHA384", tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, rsaCert},
		{"1.2 ECDHE-ECDSA-CHACHA20-POLY1305", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, ecdsaCert},
		{"1.2 ECDHE-RSA-AES128-CBC-SHA", tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, rsaCert},
		{"1.2 ECDHE-ECDSA-AES256-CBC-SHA", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, ecdsaCert},
		{"1.2 ECDHE-RSA-AES128-CBC-SHA256", tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, rsaCert},
		{"1.2 RSA-AES128-GCM-SHA256", tls.VersionTLS12, tls.TLS_RSA_WITH_AES_128_GCM_SHA256, rsaCert},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			pair := newGoTLSPair(test.version, test.suite, test.cert)
			for _, resumed := range []bool{false, true} {
				session := pair.run(t, request, response, 20000)
				if test.suite != 0 && session.cipherSuite != test.suite {
					t.Fatalf("negotiated suite %04x, want %04x", session.cipherSuite, test.suite)
				}
				if session.resumed != resumed {
					t.Fatalf("resumed %t, want %t", session.resumed, resumed)
				}
				got := runDecryptor(session.keys, wirePieces(session.wire))
				if resumed && test.version == tls.VersionTLS12 {
					// crypto/tls writes no CLIENT_RANDOM line for a resumed TLS 1.2
					// session: nothing may be decrypted, and it is said why.
					if got.summary.Keys || len(got.records) != 0 || got.summary.NoKeysReason == "" {
						t.Errorf("resumed TLS 1.2 without its key: %d records, summary %+v", len(got.records), got.summary)
					}
					continue
				}
				checkSession(t, session, got)
				// TLS 1.3 session tickets come after the server's Finished and are
				// not application data.
				tickets := 0
				for _, r := range got.records {
					if r.Dir == flow.ToClient && r.AfterHandshake && r.ContentType == 22 && bytes.Equal(r.HandshakeTypes, []byte{4}) {
						tickets++
					}
				}
				if test.version == tls.VersionTLS13 && tickets == 0 {
					t.Errorf("resumed=%t: no NewSessionTicket record after the server's handshake", resumed)
				}
			}
		})
	}
}

// checkSession checks a whole, cleanly captured connection: every protected
// record decrypted, the application data equal to what each side sent, and the
// handshake ending where the last record with a Finished ended.
func checkSession(t *testing.T, session goSession, got decrypted) {
	t.Helper()
	s := got.summary
	if !s.Keys || s.Version != session.version || s.CipherSuite != session.cipherSuite || s.ALPN != session.alpn {
		t.Fatalf("summary %+v, want keys for version %04x suite %04x ALPN %q", s, session.version, session.cipherSuite, session.alpn)
	}
	if len(s.Problems) != 0 {
		t.Fatalf("problems: %v", s.Problems)
	}
	if !bytes.Equal(got.appData[flow.ToServer], session.request) {
		t.Errorf("client application data %q, want %q", got.appData[flow.ToServer], session.request)
	}
	if !bytes.Equal(got.appData[flow.ToClient], session.response) {
		t.Errorf("server application data: %d bytes, want the %d sent", len(got.appData[flow.ToClient]), len(session.response))
	}
	for dir := range 2 {
		stream := session.wire.stream(flow.Dir(dir))
		var finishedEnd int64 = -1
		var next int64 = -1
		for _, r := range got.records {
			if r.Dir != flow.Dir(dir) {
				continue
			}
			if r.Lost {
				t.Errorf("record at %d lost: %s", r.Offset, r.Reason)
			}
			if next >= 0 && r.Offset < next {
				t.Errorf("record at %d overlaps the previous one ending at %d", r.Offset, next)
			}
			next = r.End
			if int(r.End) > len(stream) || stream[r.Offset] != r.OuterType {
				t.Errorf("record at %d..%d does not match the stream's record header", r.Offset, r.End)
			}
			if bytes.Contains(r.HandshakeTypes, []byte{20}) {
				finishedEnd = r.End
			}
			if (r.End <= finishedEnd || finishedEnd < 0) && r.AfterHandshake {
				t.Errorf("record at %d before the Finished marked after the handshake", r.Offset)
			}
			if r.ContentType == 23 && !r.AfterHandshake {
				t.Errorf("application data at %d before the handshake ended", r.Offset)
			}
		}
		if next != int64(len(stream)) {
			t.Errorf("dir %d: records end at %d, stream at %d", dir, next, len(stream))
		}
		if s.Dirs[dir].HandshakeEnd != finishedEnd || finishedEnd < 0 {
			t.Errorf("dir %d: handshake end %d, want %d (the end of the record with the Finished)", dir, s.Dirs[dir].HandshakeEnd, finishedEnd)
		}
	}
}
