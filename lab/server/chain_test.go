package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/slowstart/slowstart/tlsrec"
)

// recordingConn keeps a copy of every byte read from the connection.
type recordingConn struct {
	net.Conn
	received bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.received.Write(p[:n])
	return n, err
}

// certificateMessageOnWire finds the TLS 1.2 Certificate handshake message (type 11) in the
// bytes a client received and returns its size, 4-byte handshake header included.
func certificateMessageOnWire(received []byte) (int, error) {
	var handshake []byte
	for len(received) >= 5 {
		recordType, recordLength := received[0], int(received[3])<<8|int(received[4])
		if len(received) < 5+recordLength {
			return 0, fmt.Errorf("truncated TLS record of %d bytes", recordLength)
		}
		if recordType == 20 { // ChangeCipherSpec: what follows is encrypted
			break
		}
		if recordType == 22 {
			handshake = append(handshake, received[5:5+recordLength]...)
		}
		received = received[5+recordLength:]
	}
	for len(handshake) >= 4 {
		messageType, messageLength := handshake[0], int(handshake[1])<<16|int(handshake[2])<<8|int(handshake[3])
		if messageType == 11 {
			return 4 + messageLength, nil
		}
		if len(handshake) < 4+messageLength {
			break
		}
		handshake = handshake[4+messageLength:]
	}
	return 0, errors.New("no Certificate message in the cleartext handshake")
}

// serveTLS runs the built-in server with cert on a loopback listener until the test ends.
func serveTLS(t *testing.T, tlsVersion string, cert tls.Certificate) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, listener, Config{TLSVersion: tlsVersion, Certificate: cert}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return listener.Addr().String()
}

func TestChainSizeOnTheWire(t *testing.T) {
	keys := NewKeyCache()
	tests := []struct {
		targetBytes   int
		intermediates int
		wantKeyType   KeyType
	}{
		{1500, 1, KeyECDSAP256},
		{4000, 2, KeyRSA2048},
		{6900, 2, KeyRSA4096},
		{12000, 2, KeyRSA4096},
	}
	for _, test := range tests {
		t.Run(fmt.Sprintf("%d bytes", test.targetBytes), func(t *testing.T) {
			chain, err := NewChain(ChainConfig{
				TargetBytes:   test.targetBytes,
				Intermediates: test.intermediates,
				IPs:           []netip.Addr{netip.MustParseAddr("127.0.0.1")},
				Keys:          keys,
			})
			if err != nil {
				t.Fatal(err)
			}
			if chain.KeyType != test.wantKeyType {
				t.Errorf("key type %s, want %s", chain.KeyType, test.wantKeyType)
			}
			if got := len(chain.Certificate.Certificate); got != 1+test.intermediates {
				t.Errorf("the server sends %d certificates, want the leaf and %d intermediates", got, test.intermediates)
			}
			for _, tlsVersion := range []string{"1.2", "1.3"} {
				address := serveTLS(t, tlsVersion, chain.Certificate)
				conn, err := net.DialTimeout("tcp", address, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				recorder := &recordingConn{Conn: conn}
				var peerChain [][]byte
				client := tls.Client(recorder, &tls.Config{
					ServerName: DefaultServerName,
					RootCAs:    chain.Roots,
					VerifyConnection: func(state tls.ConnectionState) error {
						for _, certificate := range state.PeerCertificates {
							peerChain = append(peerChain, certificate.Raw)
						}
						return nil
					},
				})
				err = client.Handshake()
				_ = client.Close()
				if err != nil {
					t.Fatalf("TLS %s handshake with the generated chain (verified against its root): %v", tlsVersion, err)
				}
				formulaBytes := tlsrec.CertificateMessageBytes(peerChain, tlsVersion)
				if tlsVersion == "1.3" {
					// Encrypted on the wire: check the formula's difference to TLS 1.2.
					if want := chain.CertificateMessageBytes + 1 + 2*len(peerChain); formulaBytes != want {
						t.Errorf("TLS 1.3 Certificate message: %d bytes by the formula, want %d", formulaBytes, want)
					}
					continue
				}
				wireBytes, err := certificateMessageOnWire(recorder.received.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if wireBytes != formulaBytes || wireBytes != chain.CertificateMessageBytes {
					t.Errorf("Certificate message: %d bytes on the wire, %d by the formula, %d reported", wireBytes, formulaBytes, chain.CertificateMessageBytes)
				}
				if deviation := float64(wireBytes-test.targetBytes) / float64(test.targetBytes); deviation > 0.03 || deviation < -0.03 {
					t.Errorf("Certificate message of %d bytes is %.1f%% off the target of %d", wireBytes, 100*deviation, test.targetBytes)
				}
				t.Logf("target %d bytes: %d on the wire (%s, %d intermediates, %d bytes of padding)",
					test.targetBytes, wireBytes, chain.KeyType, test.intermediates, chain.PaddingBytes)
			}
		})
	}
}

func TestChainVerifiesWithGenerateChain(t *testing.T) {
	cert, roots, err := GenerateChain(ChainConfig{ServerName: "example.test", Intermediates: 3})
	if err != nil {
		t.Fatal(err)
	}
	intermediates := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		certificate, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		intermediates.AddCert(certificate)
	}
	chains, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "example.test", Roots: roots, Intermediates: intermediates})
	if err != nil {
		t.Fatalf("verifying the leaf: %v", err)
	}
	if got := len(chains[0]); got != 5 {
		t.Errorf("verified chain has %d certificates, want leaf + 3 intermediates + root", got)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: roots, Intermediates: intermediates}); err == nil {
		t.Error("the leaf verified for a name it does not carry")
	}
}

func TestNewChainRejects(t *testing.T) {
	keys := NewKeyCache()
	tests := []struct {
		name string
		cfg  ChainConfig
	}{
		{"target below the unpadded chain", ChainConfig{TargetBytes: 900, Intermediates: 2, KeyType: KeyECDSAP256, Keys: keys}},
		{"negative intermediates", ChainConfig{Intermediates: -1, Keys: keys}},
		{"negative target", ChainConfig{TargetBytes: -5, Keys: keys}},
		{"unknown key type", ChainConfig{KeyType: "dsa-1024", Keys: keys}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if _, err := NewChain(test.cfg); err == nil {
				t.Errorf("NewChain(%+v) succeeded, want an error", test.cfg)
			}
		})
	}
}
