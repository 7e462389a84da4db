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

// fileError marks an error of reading or writing a file with exit code 3.
func fileError(err error) error { return withCode(exitFile, err) }
