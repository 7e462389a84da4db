// Command slowstart tells how many round trips the first load of a page really
// takes, and why: the TCP initial congestion window, slow start, the receive window
// and TLS flights. This package is CLI wiring only: flags, help and exit codes; one
// file per verb.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/units"
)

// version and commit are set at build time (make build: -ldflags "-X main.version=...
// -X main.commit=..."); without them, the commit comes from the Go toolchain's build
// information when it recorded one.
var (
	version = "dev"
	commit  = ""
)

// versionString is what --version prints: the version and the commit.
func versionString() string {
	return fmt.Sprintf("%s (commit %s, %s)", version, buildCommit(), runtime.Version())
}

// buildCommit is the commit the binary was built from: set at build time, or
// the Go toolchain's record of it, or "unknown".
func buildCommit() string {
	c := commit
	if c == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	return c
}

// Exit codes: one per kind of problem, the same in every verb (the README's table).
const (
	exitOK          = 0
	exitFailure     = 1   // the work failed (an internal or environment error, a failed measurement)
	exitUsage       = 2   // bad arguments, flags or values, refused before any work
	exitFile        = 3   // a file can't be read (missing, unreadable, damaged, not the format) or written
	exitPermission  = 4   // missing privileges (the lab, live captures and nftables need root)
	exitNetwork     = 5   // the server could not be reached or spoken to
	exitInterrupted = 130 // SIGINT (Ctrl-C) or SIGTERM
)

// withCode marks err with the fault kind of an exit code (package fault): the
// kinds, not the codes, travel with errors, and exitCode maps them back.
func withCode(code int, err error) error {
	kind := fault.Failed
	for k, c := range exitCodes {
		if c == code {
			kind = k
		}
	}
	return fault.Mark(kind, err)
}

// exitCodes are the exit codes of the fault kinds.
var exitCodes = map[fault.Kind]int{
	fault.Failed:      exitFailure,
	fault.Usage:       exitUsage,
	fault.File:        exitFile,
	fault.Permission:  exitPermission,
	fault.Network:     exitNetwork,
	fault.Interrupted: exitInterrupted,
}

// exitCode is the exit code of a verb's error: its fault kind's, or for an
// unmarked error 130 when it is a cancellation, 2 for cobra's own argument
// errors, and 1 otherwise.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case fault.Marked(err):
		return exitCodes[fault.Of(err)]
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case isUsageError(err):
		return exitUsage
	}
	return exitFailure
}

// interrupted is what a verb returns when a signal stopped it: one line saying
// what it kept or removed. Without it, main says "interrupted; nothing left behind".
func interrupted(format string, args ...any) error {
	return fault.Interruptedf(format, args...)
}

// annotationAbandon marks a verb that holds nothing to clean up: on a signal the
// process exits at once instead of waiting for the verb to wind down.
const annotationAbandon = "slowstart/abandon-on-interrupt"

var abandonOnInterrupt = map[string]string{annotationAbandon: "true"}

func newRootCommand() *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:   "slowstart",
		Short: "How many round trips does the first load of a page really take, and why?",
		Long: `slowstart measures and explains the round trips of a page load.

A new TCP connection may send only its initial window (Linux: 10 segments, about
14.6 KB) before waiting a round trip for acknowledgements; the window then about
doubles each round (slow start). slowstart finds those rounds in live probes and
captures and tells what limited each one: the congestion window, the client's receive window,
the application, loss, or the end of the data.

` + units.Help + `

` + exitCodesHelp,
		Example: `  sudo slowstart probe                        # the demo: a far-away server with IW 3, 10 and 32
  sudo slowstart probe https://example.com/   # a first visit to your page, round by round
  sudo slowstart probe --exact https://example.com/
  slowstart analyze page.pcap                 # rounds, initial window and verdict per connection
  slowstart model --size 160KB --rtt 130ms --rate 15mbit --iw 3,10,32
  sudo slowstart lab run --rtt 70ms --rate 1.2mbit --iw 3 --size 42KB --runs 10
  sudo slowstart clean                        # remove what a killed run left behind`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			setLogging(cmd.ErrOrStderr(), verbose)
		},
	}
	root.SetVersionTemplate("slowstart {{.Version}}\n")
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "print diagnostics (log lines) to standard error")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(exitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(newAnalyzeCommand(), newViewCommand(), newLabCommand())
	root.AddCommand(newProbeCommand(), newModelCommand())
	root.AddCommand(newTuneCommand())
	root.AddCommand(newCompareCommand(), newWatchCommand())
	root.AddCommand(newSurveyCommand(), newCleanCommand())
	root.AddCommand(newFieldCommand())
	addExitCodes(root)
	notesToStderr(root)
	return root
}

// exitCodesHelp is the table of exit codes, the same for every verb.
const exitCodesHelp = `Exit codes (every verb): 0 success; 1 the work failed; 2 bad arguments or values
(nothing was done); 3 a file can't be read or written (missing, damaged, not the
format, unwritable output); 4 missing privileges; 5 the server could not be
reached or spoken to; 130 interrupted (Ctrl-C or SIGTERM).`

// addExitCodes ends the help of every verb with the table of exit codes.
func addExitCodes(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.Runnable() && !strings.Contains(sub.Long, "Exit codes") {
			sub.Long = strings.TrimRight(sub.Long, "\n") + "\n\n" + exitCodesHelp
		}
		addExitCodes(sub)
	}
}

// setLogging sends log/slog diagnostics (and the log package's) to w when
// verbose, and nowhere otherwise: standard output stays the result, and standard
// error holds only what a user must read.
func setLogging(w io.Writer, verbose bool) {
	if verbose {
		slog.SetDefault(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
		return
	}
	slog.SetDefault(slog.New(slog.DiscardHandler))
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the command line and returns the exit code. SIGINT and SIGTERM cancel
// the command's context; the verb winds down (removing what it made) and the
// process exits 130 with one line on standard error. A verb that holds nothing
// (annotationAbandon) is not waited for; a second signal exits at once.
func run(args []string) int {
	setLogging(os.Stderr, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)

	root := newRootCommand()
	root.SetArgs(args)
	if isTerminal(os.Stdout) {
		// A last guard: nothing from a list, a server or a capture can send
		// control sequences to the terminal.
		root.SetOut(textsafe.Writer(os.Stdout))
	}
	caught, exit, err := wait(ctx, cancel, root, args, signals)
	if exit {
		return exitInterrupted
	}
	if caught {
		if fault.Of(err) == fault.Interrupted {
			fmt.Fprintf(os.Stderr, "slowstart: %v\n", err)
		} else {
			fmt.Fprintln(os.Stderr, "slowstart: interrupted; nothing left behind")
		}
		return exitInterrupted
	}
	if err == nil {
		return exitOK
	}
	// Every URL in a message (given, a redirect's target, inside a TLS or
	// net/http error) without its credentials or query values.
	fmt.Fprintf(os.Stderr, "slowstart: %v\n", textsafe.Escape(redact.Text(oneLine(err))))
	return exitCode(err)
}

// wait runs the command line and waits for it to end. A first signal
// cancels its context; the process exits at once (exit true) on a second
// signal, or on the first when the verb holds nothing to clean up.
func wait(ctx context.Context, cancel func(), root *cobra.Command, args []string, signals <-chan os.Signal) (caught, exit bool, err error) {
	done := make(chan error, 1)
	go func() {
		_, err := root.ExecuteContextC(ctx)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return caught, false, err
		case <-signals:
			if caught {
				fmt.Fprintln(os.Stderr, "slowstart: interrupted again; stopping now (slowstart clean removes what is left)")
				return true, true, nil
			}
			caught = true
			cancel()
			if c := runningCommand(root, args); c != nil && c.Annotations[annotationAbandon] != "" {
				fmt.Fprintln(os.Stderr, "slowstart: interrupted; nothing left behind")
				return true, true, nil
			}
		}
	}
}

// runningCommand finds the verb args name, without running it.
func runningCommand(root *cobra.Command, args []string) *cobra.Command {
	c, _, err := root.Find(args)
	if err != nil {
		return nil
	}
	return c
}

// oneLine flattens an error's message to one line: errors joined with
// errors.Join would print one per line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// isUsageError recognizes cobra's own argument errors (unknown command, wrong
// number of arguments), which it does not type.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires ", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
