package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/slowstart/slowstart/tlsrec"
)

// KeyType names the key pair of the certificates of a chain.
type KeyType string

// Key types. KeyAuto picks by the target size: ECDSA P-256 below 2500 bytes, RSA-2048
// below 6000 bytes, RSA-4096 above, so that little of a chain is padding.
const (
	KeyAuto      KeyType = ""
	KeyECDSAP256 KeyType = "ecdsa-p256"
	KeyRSA2048   KeyType = "rsa-2048"
	KeyRSA4096   KeyType = "rsa-4096"
)

// DefaultServerName is the DNS name of generated leaf certificates when none is given.
const DefaultServerName = "slowstart.test"

// oidNetscapeComment is the Netscape certificate comment extension (2.16.840.1.113730.1.13):
// a non-critical free-text extension every verifier ignores, used here as padding.
var oidNetscapeComment = asn1.ObjectIdentifier{2, 16, 840, 1, 113730, 1, 13}

// ChainConfig describes a certificate chain to generate.
type ChainConfig struct {
	// ServerName is the leaf's DNS name (subject alternative name and common name);
	// DefaultServerName when empty.
	ServerName string
	// MoreNames are more DNS names of the leaf (subject alternative names).
	MoreNames []string
	// IPs are added to the leaf as IP subject alternative names.
	IPs []netip.Addr
	// Intermediates is the number of intermediate CAs between the root and the leaf.
	Intermediates int
	// TargetBytes is the size of the Certificate handshake message to hit (see
	// tlsrec.CertificateMessageBytes, TLS 1.2 form); 0 generates the chain without padding.
	TargetBytes int
	// KeyType is the key of every certificate in the chain; KeyAuto picks by TargetBytes.
	KeyType KeyType
	// Keys caches key pairs across calls (RSA-4096 takes seconds to generate); nil
	// generates fresh keys.
	Keys *KeyCache
	// NotBefore starts the validity (30 days); zero means an hour ago.
	NotBefore time.Time
}

// Chain is a generated certificate chain.
type Chain struct {
	// Certificate is what the server sends: the leaf, then the intermediates from the one
	// that signed the leaf up to the one the root signed; the root is not sent.
	Certificate tls.Certificate
	// Roots holds the root CA, for the client's tls.Config.RootCAs.
	Roots *x509.CertPool
	// Root is the root CA certificate.
	Root *x509.Certificate
	// KeyType is the key type used (resolved when KeyAuto was asked).
	KeyType KeyType
	// CertificateMessageBytes is the achieved size of the TLS 1.2 Certificate message.
	CertificateMessageBytes int
	// PaddingBytes is the length of the padding comment in the leaf (0 when none).
	PaddingBytes int
}

// GenerateChain makes a root CA, cfg.Intermediates intermediate CAs and a leaf for
// cfg.ServerName and cfg.IPs, padded so that the Certificate message has about
// cfg.TargetBytes bytes. It returns the server's certificate and the pool of roots a
// client must trust. NewChain returns the same with the achieved size.
func GenerateChain(cfg ChainConfig) (tls.Certificate, *x509.CertPool, error) {
	chain, err := NewChain(cfg)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return chain.Certificate, chain.Roots, nil
}

// NewChain generates a chain as GenerateChain does and reports what it achieved. The
// padding is a Netscape comment extension in the leaf, sized by a few re-signings of the
// leaf; the result is within a few bytes of the target (ECDSA signatures vary by a byte or
// two). It fails when the chain without padding is already larger than the target: ask
// for fewer intermediates or a smaller key type.
func NewChain(cfg ChainConfig) (*Chain, error) {
	if cfg.Intermediates < 0 || cfg.Intermediates > 8 {
		return nil, fmt.Errorf("a chain with %d intermediates is not supported: use 0 to 8", cfg.Intermediates)
	}
	if cfg.TargetBytes < 0 {
		return nil, fmt.Errorf("target chain size %d is negative", cfg.TargetBytes)
	}
	keyType := cfg.KeyType
	if keyType == KeyAuto {
		switch {
		case cfg.TargetBytes != 0 && cfg.TargetBytes < 2500:
			keyType = KeyECDSAP256
		case cfg.TargetBytes != 0 && cfg.TargetBytes < 6000:
			keyType = KeyRSA2048
		case cfg.TargetBytes != 0:
			keyType = KeyRSA4096
		default:
			keyType = KeyECDSAP256
		}
	}
	keys := cfg.Keys
	if keys == nil {
		keys = NewKeyCache()
	}
	// One key pair signs and is certified by every certificate of the chain: sizes on the
	// wire depend on the key type only, and generation stays fast. Explicit subject key
	// identifiers keep the certificates apart for chain building.
	key, err := keys.Key(keyType)
	if err != nil {
		return nil, err
	}
	serverName := cfg.ServerName
	if serverName == "" {
		serverName = DefaultServerName
	}
	notBefore := cfg.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour).Truncate(time.Minute)
	}
	notAfter := notBefore.Add(30 * 24 * time.Hour)

	// The root, then each intermediate signed by the previous CA.
	rootTemplate := caTemplate("slowstart lab root CA", 1, notBefore, notAfter)
	root, err := signCertificate(rootTemplate, rootTemplate, key)
	if err != nil {
		return nil, err
	}
	issuer := root
	intermediates := make([][]byte, 0, cfg.Intermediates)
	for i := 1; i <= cfg.Intermediates; i++ {
		template := caTemplate(fmt.Sprintf("slowstart lab intermediate CA %d", i), int64(i+1), notBefore, notAfter)
		intermediate, err := signCertificate(template, issuer, key)
		if err != nil {
			return nil, err
		}
		intermediates = append([][]byte{intermediate.Raw}, intermediates...)
		issuer = intermediate
	}

	leafTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(int64(cfg.Intermediates + 2)),
		Subject:      pkix.Name{Organization: []string{"slowstart lab"}, CommonName: serverName},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     append([]string{serverName}, cfg.MoreNames...),
	}
	if _, isRSA := key.(*rsa.PrivateKey); isRSA {
		leafTemplate.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	for _, ip := range cfg.IPs {
		leafTemplate.IPAddresses = append(leafTemplate.IPAddresses, ip.AsSlice())
	}

	paddingBytes := 0
	var leaf *x509.Certificate
	var messageBytes int
	for attempt := 0; ; attempt++ {
		leafTemplate.ExtraExtensions = nil
		if paddingBytes > 0 {
			comment, err := asn1.MarshalWithParams(paddingText(paddingBytes), "ia5")
			if err != nil {
				return nil, fmt.Errorf("encoding the padding of the leaf certificate: %w", err)
			}
			leafTemplate.ExtraExtensions = []pkix.Extension{{Id: oidNetscapeComment, Value: comment}}
		}
		leaf, err = signCertificate(leafTemplate, issuer, key)
		if err != nil {
			return nil, err
		}
		messageBytes = tlsrec.CertificateMessageBytes(append([][]byte{leaf.Raw}, intermediates...), "1.2")
		missingBytes := cfg.TargetBytes - messageBytes
		if cfg.TargetBytes == 0 || missingBytes == 0 || attempt == 6 {
			break
		}
		if paddingBytes == 0 {
			if missingBytes < 0 {
				return nil, fmt.Errorf("a chain of %s keys with %d intermediates already takes %d bytes, more than the target of %d: use fewer intermediates or a smaller key type",
					keyType, cfg.Intermediates, messageBytes, cfg.TargetBytes)
			}
			// The extension's own header (OID, lengths) takes about 20 bytes.
			missingBytes -= 20
			if missingBytes <= 0 {
				break // too close to the target for an extension: the unpadded chain it is
			}
		}
		paddingBytes = max(paddingBytes+missingBytes, 1)
	}

	roots := x509.NewCertPool()
	roots.AddCert(root)
	certificate := tls.Certificate{
		Certificate: append([][]byte{leaf.Raw}, intermediates...),
		PrivateKey:  key,
		Leaf:        leaf,
	}
	return &Chain{
		Certificate:             certificate,
		Roots:                   roots,
		Root:                    root,
		KeyType:                 keyType,
		CertificateMessageBytes: messageBytes,
		PaddingBytes:            paddingBytes,
	}, nil
}

// RootPEM returns the root CA certificate in PEM, for clients that read a CA file (curl).
func (c *Chain) RootPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Root.Raw})
}

// CertificateChainPEM returns the chain of cert in PEM, leaf first (nginx's ssl_certificate).
func CertificateChainPEM(cert tls.Certificate) []byte {
	var out []byte
	for _, der := range cert.Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// PrivateKeyPEM returns the private key of cert as PKCS #8 PEM (nginx's ssl_certificate_key).
func PrivateKeyPEM(cert tls.Certificate) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the certificate's private key as PKCS #8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func caTemplate(commonName string, serial int64, notBefore, notAfter time.Time) *x509.Certificate {
	name := pkix.Name{Organization: []string{"slowstart lab"}, CommonName: commonName}
	keyID := sha256.Sum256([]byte(commonName))
	return &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               name,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID[:20],
	}
}

func signCertificate(template, issuer *x509.Certificate, key crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, template, issuer, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate for %q: %w", template.Subject.CommonName, err)
	}
	certificate, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate just made for %q: %w", template.Subject.CommonName, err)
	}
	return certificate, nil
}

// paddingText is a printable comment of exactly n bytes.
func paddingText(n int) string {
	const sentence = "slowstart lab padding to reach a chosen certificate chain size. "
	return strings.Repeat(sentence, n/len(sentence)+1)[:n]
}

// KeyCache holds one key pair per key type, generated on first use. It is safe for
// concurrent use; share one per process to pay for RSA-4096 generation once.
type KeyCache struct {
	mu   sync.Mutex
	keys map[KeyType]crypto.Signer
}

// NewKeyCache returns an empty cache.
func NewKeyCache() *KeyCache {
	return &KeyCache{keys: make(map[KeyType]crypto.Signer)}
}

// Key returns the cached key pair of keyType, generating it on first use.
func (c *KeyCache) Key(keyType KeyType) (crypto.Signer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key, ok := c.keys[keyType]; ok {
		return key, nil
	}
	var key crypto.Signer
	var err error
	switch keyType {
	case KeyECDSAP256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyRSA2048:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case KeyRSA4096:
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		return nil, fmt.Errorf("key type %q is not supported: use %q, %q or %q", keyType, KeyECDSAP256, KeyRSA2048, KeyRSA4096)
	}
	if err != nil {
		return nil, fmt.Errorf("generating a %s key: %w", keyType, err)
	}
	c.keys[keyType] = key
	return key, nil
}

var errNoCertificate = errors.New("no certificate: make one with NewChain or GenerateChain")
