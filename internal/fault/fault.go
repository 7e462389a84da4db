// Package fault classifies an error by what the user does about it: a value
// to change (Usage), a file to fix (File), privileges to get (Permission), a
// server that could not be reached (Network), or a signal that stopped the work
// (Interrupted). The packages that do a verb's work mark their errors with a
// kind; the command maps each kind to its exit code (the README's table), so a
// kind is decided once, where the error is made.
//
// It is not for errors a caller inspects otherwise (wrap those as usual, and
// mark the outermost), nor for logging.
package fault

import (
	"errors"
	"fmt"
)

// Kind is what the user does about an error.
type Kind int

const (
	// Failed is the kind of an unmarked error: the work failed (an internal or
	// environment error, a failed measurement).
	Failed Kind = iota
	// Usage: bad arguments, flags or values, refused before any work.
	Usage
	// File: a file can't be read (missing, unreadable, damaged, not the
	// format) or written.
	File
	// Permission: missing privileges (namespaces, live captures, nftables).
	Permission
	// Network: the server could not be reached or spoken to.
	Network
	// Interrupted: a signal stopped the work; the message says what was kept
	// or removed.
	Interrupted
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Usage:
		return "usage"
	case File:
		return "file"
	case Permission:
		return "permission"
	case Network:
		return "network"
	case Interrupted:
		return "interrupted"
	}
	return "failed"
}

// Error is an error marked with its kind.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Mark marks err with kind k; nil stays nil. A mark on an error already marked
// replaces it for Of, the outermost mark being the one that counts.
func Mark(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// Of returns the kind of err's outermost mark, or Failed when it has none.
func Of(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Failed
}

// Marked reports whether err carries a mark.
func Marked(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Usagef makes a Usage error, as fmt.Errorf does (%w wraps).
func Usagef(format string, args ...any) error { return Mark(Usage, fmt.Errorf(format, args...)) }

// Filef makes a File error.
func Filef(format string, args ...any) error { return Mark(File, fmt.Errorf(format, args...)) }

// Permissionf makes a Permission error.
func Permissionf(format string, args ...any) error {
	return Mark(Permission, fmt.Errorf(format, args...))
}

// Interruptedf makes an Interrupted error: one line saying what the work kept
// or removed when a signal stopped it.
func Interruptedf(format string, args ...any) error {
	return Mark(Interrupted, fmt.Errorf(format, args...))
}

// Failedf makes an error marked Failed: the work failed, whatever kind the
// errors it wraps carry.
func Failedf(format string, args ...any) error { return Mark(Failed, fmt.Errorf(format, args...)) }
