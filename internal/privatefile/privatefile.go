// Package privatefile opens the files slowstart writes that can hold secrets
// (captures with plaintext requests, TLS key logs, stores of URLs and errors)
// readable and writable by their owner only (mode 0600), also when the file
// existed before with a wider mode: the mode of an existing file is tightened,
// not left as it was.
//
// It is not for files meant to be shared as they are written (plots, CSVs of
// results) nor for what a shell redirection writes.
package privatefile

import (
	"fmt"
	"os"
)

// Mode is the mode of every file this package opens.
const Mode os.FileMode = 0o600

// Create opens path for writing from its start (made, or emptied when it
// exists), mode 0600.
func Create(path string) (*os.File, error) {
	return open(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
}

// Append opens path for appending (made when missing), mode 0600: a key log
// that several runs add to.
func Append(path string) (*os.File, error) {
	return open(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND)
}

// OpenReadWrite opens path for reading and writing (made when missing), mode
// 0600: a store.
func OpenReadWrite(path string) (*os.File, error) {
	return open(path, os.O_RDWR|os.O_CREATE)
}

func open(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, flags, Mode)
	if err != nil {
		return nil, err
	}
	if err := Tighten(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Tighten makes an open regular file's mode 0600 when it allows more (a file
// made before with 0644). Anything else (a terminal, a pipe, /dev/null: a
// key log sent to /dev/stderr) is left alone.
func Tighten(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&^Mode == 0 {
		return nil
	}
	if err := f.Chmod(Mode); err != nil {
		return fmt.Errorf("%s is readable by others (mode %v) and can't be made private: %w (remove it, or name another file)", f.Name(), info.Mode().Perm(), err)
	}
	return nil
}
