package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://example.com/", "https://example.com/"},
		{"https://alice:s3cret@example.com:8443/a/b?token=abc&x=1&flag#frag", "https://REDACTED@example.com:8443/a/b?token=REDACTED&x=REDACTED&flag"},
		{"https://alice@example.com/", "https://REDACTED@example.com/"},
		{"https://ghp_0123456789@github.com/", "https://REDACTED@github.com/"},
		{"http://[2001:db8::1]/p?q=", "http://[2001:db8::1]/p?q=REDACTED"},
		{"::not a url", "REDACTED"},
	} {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestText: every URL in a message is redacted, as net/http, TLS and the
// probe write them, and the secrets of known URLs wherever they appear.
func TestText(t *testing.T) {
	const secretWords = "s3cret|tok3nvalue|hunter22|abc123xyz|bob"
	for _, c := range []struct {
		name, text string
		known      []string
		want       string
	}{
		{"net/http's quoted URL with a stripped password",
			`Get "https://bob:***@other.example/next?sig=tok3nvalue": dial tcp 192.0.2.1:443: connect: connection refused`, nil,
			`Get "https://REDACTED@other.example/next?sig=REDACTED": dial tcp 192.0.2.1:443: connect: connection refused`},
		{"a redirect's target in the probe's words",
			"https://example.com/ redirects to https://bob:hunter22@other.example/x?token=abc123xyz, which can't be probed: unsupported scheme", nil,
			"https://example.com/ redirects to https://REDACTED@other.example/x?token=REDACTED, which can't be probed: unsupported scheme"},
		{"punctuation after a URL stays",
			"stopped at https://other.example/p?k=tok3nvalue. Try again (see https://example.com/help).", nil,
			"stopped at https://other.example/p?k=REDACTED. Try again (see https://example.com/help)."},
		{"a known URL's password outside a URL",
			"tls: failed to verify certificate: x509: certificate is valid for s3cret.example, not example.com", []string{"https://alice:s3cret@example.com/"},
			"tls: failed to verify certificate: x509: certificate is valid for REDACTED.example, not example.com"},
		{"a known URL's query value outside a URL",
			"the server answered 403 for token tok3nvalue", []string{"https://example.com/?token=tok3nvalue"},
			"the server answered 403 for token REDACTED"},
		{"no URL, nothing changes", "a capture file (12 bytes) is not a pcap file: give a file written by tcpdump -w", nil,
			"a capture file (12 bytes) is not a pcap file: give a file written by tcpdump -w"},
		{"a short query value is not replaced everywhere", "round 1 of 10", []string{"https://example.com/?x=1"}, "round 1 of 10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Text(c.text, c.known...)
			if got != c.want {
				t.Errorf("Text:\n got %q\nwant %q", got, c.want)
			}
			for _, w := range strings.Split(secretWords, "|") {
				if strings.Contains(got, w) && !strings.Contains(c.want, w) {
					t.Errorf("%q left in %q", w, got)
				}
			}
		})
	}
}
