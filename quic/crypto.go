package quic

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// initialSaltV1 is the salt of QUIC version 1's initial secrets (RFC 9001 §5.2).
var initialSaltV1 = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a}

// ErrDecrypt reports a packet whose authentication tag did not match: wrong keys, or
// a damaged packet.
var ErrDecrypt = errors.New("quic: packet authentication failed")

// suite is what a TLS 1.3 cipher suite gives QUIC: the hash of its key schedule and
// how to make the packet and header protection.
type suite struct {
	hash   func() hash.Hash
	keyLen int
	aead   func(key []byte) (cipher.AEAD, error)
	hp     func(key []byte) (headerProtector, error)
}

func suiteFor(id uint16) (*suite, error) {
	switch id {
	case tls.TLS_AES_128_GCM_SHA256:
		return &suite{sha256.New, 16, newGCM, newAESHeaderProtector}, nil
	case tls.TLS_AES_256_GCM_SHA384:
		return &suite{sha512.New384, 32, newGCM, newAESHeaderProtector}, nil
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return &suite{sha256.New, 32, chacha20poly1305.New, newChaChaHeaderProtector}, nil
	}
	return nil, fmt.Errorf("quic: cipher suite %#04x is not a TLS 1.3 suite QUIC uses", id)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// headerProtector makes the 5-byte header protection mask from a sample.
type headerProtector interface {
	mask(sample []byte) [5]byte
}

type aesHeaderProtector struct{ block cipher.Block }

func newAESHeaderProtector(key []byte) (headerProtector, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return aesHeaderProtector{block}, nil
}

func (p aesHeaderProtector) mask(sample []byte) [5]byte {
	var out [16]byte
	p.block.Encrypt(out[:], sample[:16])
	return [5]byte(out[:5])
}

type chachaHeaderProtector struct{ key []byte }

func newChaChaHeaderProtector(key []byte) (headerProtector, error) {
	return chachaHeaderProtector{append([]byte(nil), key...)}, nil
}

func (p chachaHeaderProtector) mask(sample []byte) [5]byte {
	// RFC 9001 §5.4.4: counter = sample[0..3] (little endian), nonce = sample[4..15].
	c, err := chacha20.NewUnauthenticatedCipher(p.key, sample[4:16])
	var out [5]byte
	if err != nil {
		return out
	}
	c.SetCounter(binary.LittleEndian.Uint32(sample[:4]))
	c.XORKeyStream(out[:], out[:])
	return out
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context (RFC 8446 §7.1).
func expandLabel(h func() hash.Hash, secret []byte, label string, length int) []byte {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = append(info, byte(length>>8), byte(length), byte(len(full)))
	info = append(info, full...)
	info = append(info, 0)
	out, err := hkdf.Expand(h, secret, string(info), length)
	if err != nil {
		panic(err) // only for lengths beyond 255 hash sizes, never asked here
	}
	return out
}

// Keys protect the packets of one direction at one encryption level.
type Keys struct {
	suite  *suite
	secret []byte
	aead   cipher.AEAD
	iv     []byte
	hp     headerProtector
	// Key, IV and HP are the derived key material (for tests and tools).
	Key, IV, HP []byte
}

// NewKeys derives the packet protection keys of a traffic secret (RFC 9001 §5.1) for a
// TLS 1.3 cipher suite.
func NewKeys(cipherSuite uint16, secret []byte) (*Keys, error) {
	s, err := suiteFor(cipherSuite)
	if err != nil {
		return nil, err
	}
	return newKeys(s, secret, nil)
}

// newKeys derives keys from secret; hp, when set, is kept (header protection keys do
// not change on a key update).
func newKeys(s *suite, secret []byte, hp headerProtector) (*Keys, error) {
	k := &Keys{suite: s, secret: secret}
	k.Key = expandLabel(s.hash, secret, "quic key", s.keyLen)
	k.IV = expandLabel(s.hash, secret, "quic iv", 12)
	var err error
	if k.aead, err = s.aead(k.Key); err != nil {
		return nil, err
	}
	k.iv = k.IV
	if hp != nil {
		k.hp = hp
		return k, nil
	}
	k.HP = expandLabel(s.hash, secret, "quic hp", s.keyLen)
	if k.hp, err = s.hp(k.HP); err != nil {
		return nil, err
	}
	return k, nil
}

// Next returns the keys of the next key phase (RFC 9001 §6.1): a new secret from
// "quic ku", the same header protection.
func (k *Keys) Next() (*Keys, error) {
	next := expandLabel(k.suite.hash, k.secret, "quic ku", k.suite.hash().Size())
	return newKeys(k.suite, next, k.hp)
}

// InitialSecrets returns the client's and the server's Initial secrets for the
// Destination Connection ID of the client's first Initial packet (RFC 9001 §5.2).
func InitialSecrets(dcid []byte) (client, server []byte) {
	initial, err := hkdf.Extract(sha256.New, dcid, initialSaltV1)
	if err != nil {
		panic(err)
	}
	return expandLabel(sha256.New, initial, "client in", 32), expandLabel(sha256.New, initial, "server in", 32)
}

// InitialKeys returns the keys of the client's and the server's Initial packets.
func InitialKeys(dcid []byte) (client, server *Keys) {
	c, s := InitialSecrets(dcid)
	client, err := NewKeys(tls.TLS_AES_128_GCM_SHA256, c)
	if err != nil {
		panic(err)
	}
	server, err = NewKeys(tls.TLS_AES_128_GCM_SHA256, s)
	if err != nil {
		panic(err)
	}
	return client, server
}

// Unprotected is a packet with its protection removed.
type Unprotected struct {
	Number    int64
	KeyPhase  bool   // short headers: the key phase bit
	FirstByte byte   // unprotected
	Payload   []byte // the plaintext frames
}

// RemoveHeaderProtection removes header protection from the packet (the header's
// first byte and the packet number, RFC 9001 §5.4) in place, and returns the first
// byte, the truncated packet number and its length.
func (k *Keys) RemoveHeaderProtection(packet []byte, h *Header) (first byte, truncated uint64, pnBytes int, err error) {
	sampleAt := h.PacketNumberOffset + 4
	if sampleAt+16 > h.Size || h.Size > len(packet) {
		return 0, 0, 0, ErrShort
	}
	mask := k.hp.mask(packet[sampleAt : sampleAt+16])
	if IsLongHeader(packet[0]) {
		packet[0] ^= mask[0] & 0x0f
	} else {
		packet[0] ^= mask[0] & 0x1f
	}
	pnBytes = int(packet[0]&0x03) + 1
	for i := 0; i < pnBytes; i++ {
		packet[h.PacketNumberOffset+i] ^= mask[1+i]
		truncated = truncated<<8 | uint64(packet[h.PacketNumberOffset+i])
	}
	return packet[0], truncated, pnBytes, nil
}

// Open removes header and packet protection from packet (the packet's h.Size bytes
// at its start), in place, and returns its number and payload. largest is the largest
// packet number received so far in the packet's space and direction (-1 for none). On
// an error the packet is left with its header unprotected.
func (k *Keys) Open(packet []byte, h *Header, largest int64) (Unprotected, error) {
	first, truncated, pnBytes, err := k.RemoveHeaderProtection(packet, h)
	if err != nil {
		return Unprotected{}, err
	}
	return k.openUnprotected(packet, h, first, truncated, pnBytes, largest)
}

func (k *Keys) openUnprotected(packet []byte, h *Header, first byte, truncated uint64, pnBytes int, largest int64) (Unprotected, error) {
	pn := DecodePacketNumber(largest, truncated, pnBytes)
	headerEnd := h.PacketNumberOffset + pnBytes
	if h.Size-headerEnd < k.aead.Overhead() {
		return Unprotected{}, ErrShort
	}
	nonce := k.nonce(pn)
	payload, err := k.aead.Open(packet[headerEnd:headerEnd], nonce[:], packet[headerEnd:h.Size], packet[:headerEnd])
	if err != nil {
		return Unprotected{}, ErrDecrypt
	}
	return Unprotected{Number: pn, KeyPhase: !IsLongHeader(first) && first&0x04 != 0, FirstByte: first, Payload: payload}, nil
}

// nonce is the AEAD nonce of packet number pn: the IV with the packet number,
// left-padded to its length, XORed in (RFC 9001 §5.3).
func (k *Keys) nonce(pn int64) [12]byte {
	var nonce [12]byte
	copy(nonce[:], k.iv)
	var pnb [8]byte
	binary.BigEndian.PutUint64(pnb[:], uint64(pn))
	for i := 0; i < 8; i++ {
		nonce[4+i] ^= pnb[i]
	}
	return nonce
}

// Seal protects a packet whose header (with the packet number, unprotected) is
// header and whose frames are payload, for packet number pn; it returns the packet as
// it goes on the wire. It serves tests and fuzzing: this package does not send.
func (k *Keys) Seal(header, payload []byte, pn int64, pnOffset int) []byte {
	nonce := k.nonce(pn)
	out := append([]byte(nil), header...)
	out = k.aead.Seal(out, nonce[:], payload, header)
	mask := k.hp.mask(out[pnOffset+4 : pnOffset+20])
	pnBytes := int(out[0]&0x03) + 1
	if IsLongHeader(out[0]) {
		out[0] ^= mask[0] & 0x0f
	} else {
		out[0] ^= mask[0] & 0x1f
	}
	for i := 0; i < pnBytes; i++ {
		out[pnOffset+i] ^= mask[1+i]
	}
	return out
}
