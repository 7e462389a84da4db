// Command slowstart tells how many round trips the first load of a page really
// takes, and why: the TCP initial congestion window, slow start, the receive window
// and TLS flights. This package is CLI wiring only: flags, help and exit codes; one
// file per verb.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/units"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes, documented in docs/cli.md.
const (
	exitOK          = 0
	exitFailure     = 1 // the work failed (an internal or environment error)
	exitUsage       = 2 // bad arguments or flags
	exitInput       = 3 // the input can't be read: missing file, not a capture, empty
	exitPermission  = 4 // missing privileges (the lab and live captures need root)
	exitInterrupted = 130
)

// exitError carries an exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "slowstart",
		Short: "How many round trips does the first load of a page really take, and why?",
		Long: `slowstart measures and explains the round trips of a page load.

A new TCP connection may send only its initial window (Linux: 10 segments, about
14.6 KB) before waiting a round trip for acknowledgements; the window then about
doubles each round (slow start). slowstart finds those rounds in live probes and
captures and tells what limited each one: the congestion window, the client's receive window,
the application, loss, or the end of the data.

` + units.Help,
		Example: `  sudo slowstart probe                        # the demo: a far-away server with IW 3, 10 and 32
  sudo slowstart probe https://example.com/   # a first visit to your page, round by round
  sudo slowstart probe --exact https://example.com/
  slowstart analyze page.pcap                 # rounds, initial window and verdict per connection
  slowstart model --size 160KB --rtt 130ms --rate 15mbit --iw 3,10,32
  sudo slowstart lab run --rtt 70ms --rate 1.2mbit --iw 3 --size 42KB --trials 10`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(exitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(newAnalyzeCommand(), newViewCommand(), newLabCommand())
	root.AddCommand(newProbeCommand(), newModelCommand())
	root.AddCommand(newTuneCommand())
	root.AddCommand(newCompareCommand(), newWatchCommand())
	root.AddCommand(newSurveyCommand())
	return root
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "slowstart: %v\n", err)
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case isUsageError(err):
		return exitUsage
	}
	return exitFailure
}

// isUsageError recognizes cobra's own argument errors (unknown command, wrong
// number of arguments), which it does not type.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires ", "invalid argument"} {
		if len(msg) >= len(p) && (msg[:len(p)] == p || containsWord(msg, p)) {
			return true
		}
	}
	return false
}

func containsWord(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// writeJSON writes v as indented JSON (two spaces), the form every --json of
// the commands takes.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
