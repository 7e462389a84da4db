package failure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestKindOf: the kind is found through wrapping, and an error without one has
// none; the message is redacted while the wrapped error keeps its URL.
func TestKindOf(t *testing.T) {
	err := New(KindPermission, "loading %s: run with sudo", "https://user:secret@example.com/?token=abc")
	wrapped := fmt.Errorf("starting: %w", err)
	if got := KindOf(wrapped); got != KindPermission {
		t.Errorf("KindOf(wrapped) = %q, want %q", got, KindPermission)
	}
	if got := KindOf(context.Canceled); got != "" {
		t.Errorf("KindOf(context.Canceled) = %q, want none", got)
	}
	if msg := err.Error(); strings.Contains(msg, "secret") || strings.Contains(msg, "abc") || !strings.Contains(msg, "example.com") {
		t.Errorf("message %q: want the host kept, the credentials and the query's value redacted", msg)
	}
	var e *Error
	if !errors.As(wrapped, &e) || !strings.Contains(e.Err.Error(), "secret") {
		t.Errorf("the wrapped error should keep the message as written")
	}
}
