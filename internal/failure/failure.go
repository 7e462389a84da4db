// Package failure is the error of a known kind that the measuring clients return
// (the probe, the browser's page load, the lab's page): a caller tells failures
// apart, and maps them to exit codes, by their kind instead of by their message.
// It names the kinds more than one client returns; each client names its own
// beside them.
//
// It writes no messages: each client says what failed and what to do.
package failure

import (
	"errors"
	"fmt"

	"github.com/slowstart/slowstart/internal/redact"
)

// Kinds that more than one client returns.
const (
	KindURL        = "url"        // the URL or an option is malformed
	KindPermission = "permission" // capturing packets or making namespaces needs privileges this process lacks
	KindInterface  = "interface"  // the capture interface does not exist
	KindCapture    = "capture"    // the capture failed otherwise
)

// Error is a failure of a known kind. Its message is one line that says what
// failed and what to do.
type Error struct {
	Kind string
	Err  error
}

// Error is the message with every URL in it redacted (package redact): the
// clients' errors name the URL given, the targets of its redirects and the
// pages a browser loaded.
func (e *Error) Error() string { return redact.Text(e.Err.Error()) }
func (e *Error) Unwrap() error { return e.Err }

// New returns an Error of kind with a message formatted as fmt.Errorf does.
func New(kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the kind of an Error in err's chain, or "" when there is none.
func KindOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
