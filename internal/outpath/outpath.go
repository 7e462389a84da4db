// Package outpath checks, before any work, that the files and directories a
// verb will write can be written, so that a long measurement never ends in an
// output it can't write. Its errors name the flag and are marked fault.File.
//
// It writes nothing the verb keeps: a file it had to create to check is removed.
package outpath

import (
	"errors"
	"os"

	"github.com/slowstart/slowstart/internal/fault"
)

// CheckFile makes sure the file flag names can be written. It leaves an
// existing file as it was and removes one it had to create. "" and "-"
// (standard output) pass.
func CheckFile(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		f.Close()
		return os.Remove(path)
	}
	if errors.Is(err, os.ErrExist) {
		if f, err = os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
			return nil
		}
	}
	return fault.Filef("--%s %s: can't write there: %w", flag, path, Unwrap(err))
}

// CheckDir makes the directory flag names (with its parents) and makes sure
// files can be created in it. "" passes.
func CheckDir(flag, dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fault.Filef("--%s %s: can't make the directory: %w", flag, dir, Unwrap(err))
	}
	f, err := os.CreateTemp(dir, ".slowstart-write-check-*")
	if err != nil {
		return fault.Filef("--%s %s: can't write there: %w", flag, dir, Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// Unwrap drops a *PathError's repetition of the path, for a message that
// names the path already.
func Unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
