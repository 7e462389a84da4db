package tlsrec

import "testing"

// TestCertificateMessageBytes works the sizes by hand from RFC 5246 §7.4.2 and RFC
// 8446 §4.4.2 for a chain of a 1000-byte leaf and a 900-byte intermediate:
// TLS 1.2: 4 + 3 + (3+1000) + (3+900) = 1913; TLS 1.3 adds the 1-byte request
// context and 2 bytes of empty extensions per certificate: 1913 + 1 + 4 = 1918.
func TestCertificateMessageBytes(t *testing.T) {
	chain := [][]byte{make([]byte, 1000), make([]byte, 900)}
	if got := CertificateMessageBytes(chain, "1.2"); got != 1913 {
		t.Errorf("TLS 1.2: %d, want 1913", got)
	}
	if got := CertificateMessageBytes(chain, "1.3"); got != 1918 {
		t.Errorf("TLS 1.3: %d, want 1918", got)
	}
	if got := CertificateMessageBytes(nil, "1.2"); got != 0 {
		t.Errorf("no chain: %d, want 0", got)
	}
}
