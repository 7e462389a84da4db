package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/failure"
)

// TestOutputsArePrivate: the key log and the capture a probe writes are
// readable by their owner only, also when they existed with mode 0644 (a key
// log was appended to as it was, a capture of plaintext requests made 0644).
func TestOutputsArePrivate(t *testing.T) {
	for _, existed := range []bool{false, true} {
		dir := t.TempDir()
		o := Options{KeylogPath: filepath.Join(dir, "keys.txt"), PcapPath: filepath.Join(dir, "probe.pcap")}
		if existed {
			for _, p := range []string{o.KeylogPath, o.PcapPath} {
				if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		out, err := openOutputs(&o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintln(out.keylog, "CLIENT_RANDOM 00 00"); err != nil {
			t.Fatal(err)
		}
		if err := out.close(); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{o.KeylogPath, o.PcapPath} {
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("%s (existed before: %v): mode %v, want 0600", filepath.Base(p), existed, info.Mode().Perm())
			}
		}
		if keys, _ := os.ReadFile(o.KeylogPath); existed && !strings.HasPrefix(string(keys), "old\n") {
			t.Errorf("the key log was not appended to: %q", keys)
		}
	}
}

// TestErrorsAreRedacted: a probe's error names its URL and its redirects'
// targets without their credentials or query values, whichever error it
// wraps.
func TestErrorsAreRedacted(t *testing.T) {
	inner := errors.New(`Get "https://bob:***@other.example/next?sig=tok3nvalue": dial tcp 192.0.2.1:443: connect: connection refused`)
	for _, err := range []error{
		failure.New(KindHTTP, "%s redirects to %s, which can't be probed: %v", "https://alice:s3cret@example.com/?token=abc123xyz", "https://bob:hunter22@other.example/next?sig=tok3nvalue", inner),
		&Error{Kind: KindRefused, Err: fmt.Errorf("https://alice:s3cret@example.com/?token=abc123xyz: %w", inner)},
	} {
		msg := err.Error()
		for _, secret := range []string{"alice", "s3cret", "abc123xyz", "bob", "hunter22", "tok3nvalue"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%q in %q", secret, msg)
			}
		}
		if !strings.Contains(msg, "https://REDACTED@other.example/next?sig=REDACTED") {
			t.Errorf("%q does not name the redirect's target, redacted", msg)
		}
	}
}
