package tlsrec

// CertificateMessageBytes is the size on the wire of the TLS Certificate handshake
// message that carries chain (DER certificates, leaf first), handshake header included:
//
//	TLS 1.2: 4 (type, length) + 3 (list length) + Σ (3 + len(cert))
//	TLS 1.3: 4 (type, length) + 1 (empty request context) + 3 (list length)
//	         + Σ (3 + len(cert) + 2 (empty extensions))
//
// tlsVersion is "1.3" for the TLS 1.3 form; anything else gives the TLS 1.2 form.
// In TLS 1.3 the message travels encrypted, with 17 more bytes of record overhead per
// record (content type and AEAD tag) besides the 5-byte record header both versions have.
// An empty chain gives 0 (no Certificate message).
func CertificateMessageBytes(chain [][]byte, tlsVersion string) int {
	if len(chain) == 0 {
		return 0
	}
	total := 4 + 3
	perCertificate := 3
	if tlsVersion == "1.3" {
		total++
		perCertificate += 2
	}
	for _, certificate := range chain {
		total += perCertificate + len(certificate)
	}
	return total
}
