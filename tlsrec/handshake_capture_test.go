package tlsrec

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/streamtest"
)

// tlsSession is what one TLS connection put on the wire, and what each side's
// crypto/tls said about it afterwards.
type tlsSession struct {
	clientStream, serverStream []byte
	clientState, serverState   tls.ConnectionState
	serverName                 string
	clientALPN                 []string
}

// selfSignedCertificate makes a certificate whose size is driven by the number of
// names in it, so that the server's flight spans several segments.
func selfSignedCertificate(t testing.TB, names int) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating a test key: %v", err)
	}
	template := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "server.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"server.test"},
	}
	for i := range names {
		template.DNSNames = append(template.DNSNames, fmt.Sprintf("name-%04d.server.test", i))
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("creating a test certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// runTLS runs a crypto/tls client and server over net.Pipe with the version forced,
// sends a request and a response of responseBytes, and returns the bytes each side
// wrote.
func runTLS(t testing.TB, version uint16, certificate tls.Certificate, responseBytes int) tlsSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clientEnd, serverEnd := net.Pipe()
	clientConn := &streamtest.RecordingConn{Conn: clientEnd}
	serverConn := &streamtest.RecordingConn{Conn: serverEnd}
	session := tlsSession{serverName: "server.test", clientALPN: []string{"h2", "http/1.1"}}

	server := tls.Server(serverConn, &tls.Config{
		Certificates: []tls.Certificate{certificate},
		MinVersion:   version,
		MaxVersion:   version,
		NextProtos:   []string{"http/1.1"},
	})
	client := tls.Client(clientConn, &tls.Config{
		ServerName:         session.serverName,
		InsecureSkipVerify: true, // the test certificate is self-signed
		MinVersion:         version,
		MaxVersion:         version,
		NextProtos:         session.clientALPN,
	})
	request := []byte("GET / HTTP/1.1\r\nHost: server.test\r\n\r\n")

	session.clientState, session.serverState = streamtest.TLSExchange(ctx, t, client, server, request, bytes.Repeat([]byte("x"), responseBytes), 0)
	session.clientStream = clientConn.Bytes()
	session.serverStream = serverConn.Bytes()
	return session
}
