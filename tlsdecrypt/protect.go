package tlsdecrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// errAuthentication is returned when a record does not decrypt and authenticate
// under the keys tried.
var errAuthentication = errors.New("the record did not authenticate")

// etmMode says whether a CBC suite uses encrypt-then-MAC (RFC 7366).
type etmMode int8

const (
	etmUnknown etmMode = iota // decided by the first record that authenticates
	etmOff
	etmOn
)

// recordCipher removes the protection of one direction's records under one set
// of keys, and counts their sequence numbers.
type recordCipher struct {
	suite *suite
	tls13 bool
	aead  cipher.AEAD
	// iv is the nonce mask (TLS 1.3, and ChaCha20-Poly1305 in TLS 1.2) or the
	// 4-byte salt of AES-GCM in TLS 1.2.
	iv []byte
	// CBC suites.
	block cipher.Block
	mac   hash.Hash
	etm   etmMode
	// seq is the sequence number of the next record.
	seq   uint64
	nonce [12]byte
	aad   [13]byte
}

func newAEAD(kind cipherKind, key []byte) (cipher.AEAD, error) {
	if kind == kindChaCha20Poly1305 {
		return chacha20poly1305.New(key)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// newCipher13 makes the cipher of a TLS 1.3 traffic secret.
func newCipher13(s *suite, secret []byte) (*recordCipher, error) {
	key, iv := trafficKeys13(s, secret)
	aead, err := newAEAD(s.kind, key)
	if err != nil {
		return nil, fmt.Errorf("%s keys: %w", s.name, err)
	}
	return &recordCipher{suite: s, tls13: true, aead: aead, iv: iv}, nil
}

// newCipher12 makes the cipher of one direction's TLS 1.2 keys.
func newCipher12(s *suite, keys keys12) (*recordCipher, error) {
	c := &recordCipher{suite: s, iv: keys.iv}
	if s.kind == kindAESCBC {
		block, err := aes.NewCipher(keys.key)
		if err != nil {
			return nil, fmt.Errorf("%s keys: %w", s.name, err)
		}
		c.block = block
		c.mac = hmac.New(s.mac, keys.macKey)
		return c, nil
	}
	aead, err := newAEAD(s.kind, keys.key)
	if err != nil {
		return nil, fmt.Errorf("%s keys: %w", s.name, err)
	}
	c.aead = aead
	return c, nil
}

// plaintextLength is the plaintext size of a record whose body has bodyBytes,
// when the cipher fixes it: TLS 1.2 AEAD suites; -1 when padding hides it (CBC,
// TLS 1.3).
func (c *recordCipher) plaintextLength(bodyBytes int) int {
	if c.tls13 || c.aead == nil {
		return -1
	}
	n := bodyBytes - c.aead.Overhead()
	if c.suite.kind == kindAESGCM {
		n -= 8 // explicit nonce
	}
	return max(n, -1)
}

// xorNonce sets c.nonce to the IV with the sequence number xored into its end.
func (c *recordCipher) xorNonce(seq uint64) {
	copy(c.nonce[:], c.iv)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		c.nonce[4+i] ^= s[i]
	}
}

// additionalData12 fills the TLS 1.2 MAC and AEAD header: sequence number, type,
// version, length.
func (c *recordCipher) additionalData12(seq uint64, header []byte, length int) []byte {
	binary.BigEndian.PutUint64(c.aad[:8], seq)
	c.aad[8], c.aad[9], c.aad[10] = header[0], header[1], header[2]
	binary.BigEndian.PutUint16(c.aad[11:], uint16(length))
	return c.aad[:]
}

// open decrypts the record with sequence number seq (header: its 5 header bytes;
// body: its whole body), appending the plaintext to dst. It returns the content
// type: the inner one in TLS 1.3, the header's otherwise. It does not advance the
// sequence number.
func (c *recordCipher) open(dst []byte, seq uint64, header, body []byte) (plaintext []byte, contentType uint8, err error) {
	switch {
	case c.tls13:
		c.xorNonce(seq)
		plaintext, err = c.aead.Open(dst, c.nonce[:], body, header)
		if err != nil {
			return dst, 0, errAuthentication
		}
		// TLSInnerPlaintext: content, the real type, zero padding.
		content := plaintext[len(dst):]
		end := len(content)
		for end > 0 && content[end-1] == 0 {
			end--
		}
		if end == 0 {
			return dst, 0, errors.New("the decrypted record holds only padding, no content type")
		}
		return plaintext[:len(dst)+end-1], content[end-1], nil
	case c.aead != nil:
		overhead := c.aead.Overhead()
		nonce := c.nonce[:]
		if c.suite.kind == kindAESGCM {
			if len(body) < 8+overhead {
				return dst, 0, errAuthentication
			}
			copy(c.nonce[:4], c.iv)
			copy(c.nonce[4:], body[:8])
			body = body[8:]
		} else {
			if len(body) < overhead {
				return dst, 0, errAuthentication
			}
			c.xorNonce(seq)
		}
		aad := c.additionalData12(seq, header, len(body)-overhead)
		plaintext, err = c.aead.Open(dst, nonce, body, aad)
		if err != nil {
			return dst, 0, errAuthentication
		}
		return plaintext, header[0], nil
	}
	return c.openCBC(dst, seq, header, body)
}

// openCBC decrypts an AES-CBC record of TLS 1.2 and checks its MAC, in the mode
// (encrypt-then-MAC or not) the first authenticated record showed.
func (c *recordCipher) openCBC(dst []byte, seq uint64, header, body []byte) ([]byte, uint8, error) {
	if c.etm != etmOff {
		if plaintext, ok := c.openEncryptThenMAC(dst, seq, header, body); ok {
			c.etm = etmOn
			return plaintext, header[0], nil
		}
		if c.etm == etmOn {
			return dst, 0, errAuthentication
		}
	}
	plaintext, ok := c.openMACThenEncrypt(dst, seq, header, body)
	if !ok {
		return dst, 0, errAuthentication
	}
	c.etm = etmOff
	return plaintext, header[0], nil
}

// decryptCBC decrypts IV-prefixed ciphertext and strips its padding, appending to dst.
func (c *recordCipher) decryptCBC(dst, ivAndCiphertext []byte) ([]byte, bool) {
	if len(ivAndCiphertext) < 2*aes.BlockSize || len(ivAndCiphertext)%aes.BlockSize != 0 {
		return dst, false
	}
	iv, ciphertext := ivAndCiphertext[:aes.BlockSize], ivAndCiphertext[aes.BlockSize:]
	start := len(dst)
	out := append(dst, ciphertext...)
	cipher.NewCBCDecrypter(c.block, iv).CryptBlocks(out[start:], out[start:])
	padding := int(out[len(out)-1])
	if padding+1 > len(out)-start {
		return dst, false
	}
	for _, b := range out[len(out)-1-padding:] {
		if int(b) != padding {
			return dst, false
		}
	}
	return out[:len(out)-1-padding], true
}

func (c *recordCipher) sumMAC(seq uint64, header []byte, parts ...[]byte) []byte {
	length := 0
	for _, part := range parts {
		length += len(part)
	}
	c.mac.Reset()
	c.mac.Write(c.additionalData12(seq, header, length))
	for _, part := range parts {
		c.mac.Write(part)
	}
	return c.mac.Sum(nil)
}

func (c *recordCipher) openEncryptThenMAC(dst []byte, seq uint64, header, body []byte) ([]byte, bool) {
	macBytes := c.mac.Size()
	if len(body) < macBytes {
		return dst, false
	}
	protected, tag := body[:len(body)-macBytes], body[len(body)-macBytes:]
	if !hmac.Equal(c.sumMAC(seq, header, protected), tag) {
		return dst, false
	}
	return c.decryptCBC(dst, protected)
}

func (c *recordCipher) openMACThenEncrypt(dst []byte, seq uint64, header, body []byte) ([]byte, bool) {
	macBytes := c.mac.Size()
	plaintext, ok := c.decryptCBC(dst, body)
	if !ok || len(plaintext)-len(dst) < macBytes {
		return dst, false
	}
	content := plaintext[len(dst) : len(plaintext)-macBytes]
	tag := plaintext[len(plaintext)-macBytes:]
	if !hmac.Equal(c.sumMAC(seq, header, content), tag) {
		return dst, false
	}
	return plaintext[:len(plaintext)-macBytes], true
}
