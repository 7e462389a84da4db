package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// netnsDir is where `ip netns add NAME` puts named network namespaces.
const netnsDir = "/run/netns"

// netnsHelp is the --netns flag's help, the same in every verb.
const netnsHelp = "work inside this network namespace: a NAME as `ip netns list` shows it, or a path such as /run/netns/NAME"

// addNetnsFlag registers --netns on fl, the same way in every verb.
func addNetnsFlag(fl *pflag.FlagSet, value *string) {
	fl.StringVar(value, "netns", "", netnsHelp)
}

// netnsPath reads a --netns value: a NAME under /run/netns or a path. It returns
// the namespace's path ("" for none), or a usage error when it does not exist.
func netnsPath(value string) (string, error) {
	if value == "" {
		return "", nil
	}
	path := value
	if !strings.Contains(value, "/") {
		path = filepath.Join(netnsDir, value)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", withCode(exitUsage, fmt.Errorf("--netns %s: no such network namespace (%s does not exist; see ip netns list)", value, path))
		}
		return "", withCode(exitUsage, fmt.Errorf("--netns %s: %w", value, err))
	}
	return path, nil
}

// netnsName is netnsPath for the verbs that record a namespace by name (tune's
// backups): the NAME of a namespace under /run/netns, the path of any other.
func netnsName(value string) (string, error) {
	path, err := netnsPath(value)
	if err != nil || path == "" {
		return path, err
	}
	if filepath.Dir(path) == netnsDir {
		return filepath.Base(path), nil
	}
	return path, nil
}

// checkOutputFile makes sure, before any work, that the file a flag names can be
// written, so that a long measurement never ends in an unwritable file. It leaves
// an existing file as it was and removes one it had to create. "" and "-" (standard
// output) pass.
func checkOutputFile(flag, path string) error {
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
	return withCode(exitFile, fmt.Errorf("--%s %s: can't write there: %w", flag, path, unwrapPath(err)))
}

// checkOutputDir makes the directory a flag names (with its parents) and makes
// sure, before any work, that files can be created in it.
func checkOutputDir(flag, dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return withCode(exitFile, fmt.Errorf("--%s %s: can't make the directory: %w", flag, dir, unwrapPath(err)))
	}
	f, err := os.CreateTemp(dir, ".slowstart-write-check-*")
	if err != nil {
		return withCode(exitFile, fmt.Errorf("--%s %s: can't write there: %w", flag, dir, unwrapPath(err)))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileError marks an error of reading or writing a file with exit code 3.
func fileError(err error) error { return withCode(exitFile, err) }
