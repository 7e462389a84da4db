package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
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

// renamed registers old as the deprecated name of the flag new, for one
// release: it sets new's value (and marks new as given), --help does not
// list it, and pflag says on standard error, in one line, that it is
// deprecated and what to use instead. README's table of flags lists it.
func renamed(fl *pflag.FlagSet, old, new string) {
	target := fl.Lookup(new)
	if target == nil {
		panic("renamed: no flag --" + new)
	}
	fl.AddFlag(&pflag.Flag{Name: old, Usage: "the old name of --" + new, Value: alias{target}, DefValue: target.DefValue,
		NoOptDefVal: target.NoOptDefVal, Deprecated: "use --" + new + " instead", Hidden: true})
}

// alias is the value of a flag's old name: the new flag's value.
type alias struct{ target *pflag.Flag }

func (a alias) Set(s string) error {
	if err := a.target.Value.Set(s); err != nil {
		return err
	}
	a.target.Changed = true
	return nil
}

func (a alias) String() string { return a.target.Value.String() }
func (a alias) Type() string   { return a.target.Value.Type() }

// notesToStderr sends the notices pflag prints while it parses (a deprecated
// flag's) to standard error, on every command, where cobra would print them
// to standard output when one is set.
func notesToStderr(c *cobra.Command) {
	c.Flags().SetOutput(writerFunc(func(b []byte) (int, error) { return c.ErrOrStderr().Write(b) }))
	for _, sub := range c.Commands() {
		notesToStderr(sub)
	}
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// mergeArgs returns a merge's output and inputs: the output from --flag, or,
// in the form of earlier releases (kept for one release, with a one-line
// notice on standard error), the first argument.
func mergeArgs(cmd *cobra.Command, flag, out string, args []string) (string, []string, error) {
	if out != "" {
		return out, args, nil
	}
	if len(args) < 2 {
		return "", nil, withCode(exitUsage, fmt.Errorf("--%s OUT is required (%s --%s OUT INPUT ...)", flag, cmd.CommandPath(), flag))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "The output as the first argument of %s has been deprecated, use --%s %s instead\n", cmd.CommandPath(), flag, args[0])
	return args[0], args[1:], nil
}
