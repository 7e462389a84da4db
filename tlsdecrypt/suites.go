package tlsdecrypt

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"hash"
)

// cipherKind is how a suite protects records.
type cipherKind uint8

const (
	kindAESGCM cipherKind = iota + 1
	kindChaCha20Poly1305
	kindAESCBC // TLS 1.2 only: AES-CBC with an HMAC, MAC-then-encrypt or encrypt-then-MAC
)

// suite is what decryption needs to know of a cipher suite.
type suite struct {
	id    uint16
	name  string
	tls13 bool
	kind  cipherKind
	// keyBytes is the encryption key size.
	keyBytes int
	// hash is the PRF hash (TLS 1.2) or the HKDF hash (TLS 1.3).
	hash func() hash.Hash
	// mac is the record MAC's hash for CBC suites (nil for AEAD suites).
	mac func() hash.Hash
}

// macBytes is the size of a CBC suite's record MAC.
func (s *suite) macBytes() int {
	if s.mac == nil {
		return 0
	}
	return s.mac().Size()
}

// fixedIVBytes is the per-direction IV taken from the key block (TLS 1.2): the
// salt of AES-GCM's nonce, ChaCha20-Poly1305's whole nonce mask, none for CBC
// (its IV travels in each record).
func (s *suite) fixedIVBytes() int {
	switch s.kind {
	case kindAESGCM:
		return 4
	case kindChaCha20Poly1305:
		return 12
	}
	return 0
}

func sha384() hash.Hash { return sha512.New384() }

// suites lists the cipher suites this package decrypts. The key exchange (RSA,
// DHE, ECDHE) does not matter: the key log gives the secret it produced.
var suites = func() map[uint16]*suite {
	m := make(map[uint16]*suite)
	add := func(s suite, ids ...uint16) {
		for _, id := range ids {
			entry := s
			entry.id = id
			m[id] = &entry
		}
	}
	// TLS 1.3 (RFC 8446, appendix B.4).
	add(suite{name: "TLS_AES_128_GCM_SHA256", tls13: true, kind: kindAESGCM, keyBytes: 16, hash: sha256.New}, 0x1301)
	add(suite{name: "TLS_AES_256_GCM_SHA384", tls13: true, kind: kindAESGCM, keyBytes: 32, hash: sha384}, 0x1302)
	add(suite{name: "TLS_CHACHA20_POLY1305_SHA256", tls13: true, kind: kindChaCha20Poly1305, keyBytes: 32, hash: sha256.New}, 0x1303)

	// TLS 1.2 AEAD (RFC 5288, 5289, 7905). Names give the ECDHE-RSA member of
	// each family; the IDs list RSA, DHE-RSA, ECDHE-ECDSA and ECDHE-RSA.
	add(suite{name: "AES_128_GCM_SHA256", kind: kindAESGCM, keyBytes: 16, hash: sha256.New}, 0x009C, 0x009E, 0xC02B, 0xC02F)
	add(suite{name: "AES_256_GCM_SHA384", kind: kindAESGCM, keyBytes: 32, hash: sha384}, 0x009D, 0x009F, 0xC02C, 0xC030)
	add(suite{name: "CHACHA20_POLY1305_SHA256", kind: kindChaCha20Poly1305, keyBytes: 32, hash: sha256.New}, 0xCCA8, 0xCCA9, 0xCCAA)

	// TLS 1.2 CBC (RFC 5246, 5289). The PRF is SHA-256 unless the suite names SHA-384.
	add(suite{name: "AES_128_CBC_SHA", kind: kindAESCBC, keyBytes: 16, hash: sha256.New, mac: sha1.New}, 0x002F, 0x0033, 0xC009, 0xC013)
	add(suite{name: "AES_256_CBC_SHA", kind: kindAESCBC, keyBytes: 32, hash: sha256.New, mac: sha1.New}, 0x0035, 0x0039, 0xC00A, 0xC014)
	add(suite{name: "AES_128_CBC_SHA256", kind: kindAESCBC, keyBytes: 16, hash: sha256.New, mac: sha256.New}, 0x003C, 0x0067, 0xC023, 0xC027)
	add(suite{name: "AES_256_CBC_SHA256", kind: kindAESCBC, keyBytes: 32, hash: sha256.New, mac: sha256.New}, 0x003D, 0x006B)
	add(suite{name: "AES_256_CBC_SHA384", kind: kindAESCBC, keyBytes: 32, hash: sha384, mac: sha384}, 0xC024, 0xC028)
	return m
}()

// SuiteSupported reports whether records of the cipher suite id can be decrypted
// (given the keys).
func SuiteSupported(id uint16) bool { return suites[id] != nil }

// SuiteName names a supported suite: the TLS 1.3 name, or for TLS 1.2 the cipher
// and hash ("AES_128_GCM_SHA256"); a hex code for others.
func SuiteName(id uint16) string {
	if s := suites[id]; s != nil {
		return s.name
	}
	return fmt.Sprintf("0x%04X", id)
}

// prf12 is the TLS 1.2 PRF (RFC 5246, section 5): P_hash(secret, label + seed).
func prf12(h func() hash.Hash, secret []byte, label string, seed []byte, length int) []byte {
	labelSeed := append([]byte(label), seed...)
	out := make([]byte, 0, length+h().Size())
	mac := hmac.New(h, secret)
	mac.Write(labelSeed)
	a := mac.Sum(nil) // A(1)
	for len(out) < length {
		mac.Reset()
		mac.Write(a)
		mac.Write(labelSeed)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:length]
}

// keys12 are one direction's keys from the TLS 1.2 key block.
type keys12 struct {
	macKey, key, iv []byte
}

// keyBlock12 derives both directions' keys from the master secret (RFC 5246,
// section 6.3): client MAC key, server MAC key, client key, server key, client
// IV, server IV.
func keyBlock12(s *suite, masterSecret, clientRandom, serverRandom []byte) (client, server keys12) {
	macBytes, ivBytes := s.macBytes(), s.fixedIVBytes()
	seed := append(append([]byte(nil), serverRandom...), clientRandom...)
	block := prf12(s.hash, masterSecret, "key expansion", seed, 2*(macBytes+s.keyBytes+ivBytes))
	take := func(n int) []byte {
		taken := block[:n:n]
		block = block[n:]
		return taken
	}
	client.macKey, server.macKey = take(macBytes), take(macBytes)
	client.key, server.key = take(s.keyBytes), take(s.keyBytes)
	client.iv, server.iv = take(ivBytes), take(ivBytes)
	return client, server
}

// hkdfExpandLabel is HKDF-Expand-Label of RFC 8446, section 7.1.
func hkdfExpandLabel(h func() hash.Hash, secret []byte, label string, context []byte, length int) []byte {
	fullLabel := "tls13 " + label
	info := make([]byte, 0, 4+len(fullLabel)+len(context))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(len(fullLabel)))
	info = append(info, fullLabel...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	out, err := hkdf.Expand(h, secret, string(info), length)
	if err != nil {
		// Only a length beyond 255 hash blocks fails; the lengths here are fixed and small.
		panic(fmt.Sprintf("tlsdecrypt: HKDF-Expand-Label %q: %v", label, err))
	}
	return out
}

// trafficKeys13 derives a TLS 1.3 record key and IV from a traffic secret (RFC
// 8446, section 7.3).
func trafficKeys13(s *suite, secret []byte) (key, iv []byte) {
	return hkdfExpandLabel(s.hash, secret, "key", nil, s.keyBytes), hkdfExpandLabel(s.hash, secret, "iv", nil, 12)
}

// nextSecret13 is the traffic secret after a KeyUpdate (RFC 8446, section 7.2).
func nextSecret13(s *suite, secret []byte) []byte {
	return hkdfExpandLabel(s.hash, secret, "traffic upd", nil, s.hash().Size())
}
