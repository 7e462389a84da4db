package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/report"
)

func newAnalyzeCommand() *cobra.Command {
	var (
		asJSON     bool
		server     string
		connection int
		htmlOut    string
		keylogPath string
		harPath    string
	)
	cmd := &cobra.Command{
		Use:   "analyze FILE",
		Short: "Rounds, initial window and verdict for every TCP connection in a pcap or pcapng file",
		Long: `Analyze a capture (pcap or pcapng, taken at the client, the server or in between)
and report, for every TCP connection, its round trips: the bytes and segments the
server sent in each, why each round ended (cwnd, rwnd, app, loss, end), and the
server's initial congestion window (IW) with a verdict:

  exact         round 1 was cut by the congestion window: this is the IW
  lower_bound   the data (or the TLS flight) ended inside round 1: the IW is at least this
  rwnd_limited  the client's receive window capped round 1
  ambiguous     loss or reordering in round 1

The initial window (IW) is what a server may send on a new connection before it
waits a round trip; it decides how many round trips a page costs.`,
		Example: `  slowstart analyze page.pcap
  slowstart analyze page.pcap --json | jq '.connections[].initial_window'
  slowstart analyze trace.pcapng --server 203.0.113.7:443 --connection 2`,
		Args:        cobra.ExactArgs(1),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			hint, err := analysis.ParseServer(server)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if connection < 0 {
				return withCode(exitUsage, fmt.Errorf("--connection must be 1 or more"))
			}
			if err := checkOutputFile("html", htmlOut); err != nil {
				return err
			}
			keys, err := loadKeyLog(keylogPath)
			if err != nil {
				return err
			}
			defer tuneGCForBatch()()
			if harPath != "" && connection > 0 {
				return withCode(exitUsage, errors.New("--har places a page's requests on every connection: it can't be used with --connection"))
			}
			rep, err := analysis.File(cmd.Context(), args[0], analysis.Options{Server: hint, Tool: "slowstart " + version, Packets: htmlOut != "", KeyLog: keys})
			if err != nil {
				return withCode(inputExitCode(err), err)
			}
			if harPath != "" {
				return analyzeWithHAR(cmd, rep, harPath, asJSON, htmlOut)
			}
			if connection > 0 {
				if connection > len(rep.Connections) {
					return withCode(exitUsage, fmt.Errorf("--connection %d: the capture has %d connection(s)", connection, len(rep.Connections)))
				}
				rep.Connections = rep.Connections[connection-1 : connection]
			}
			for _, w := range rep.Warnings {
				fmt.Fprintf(os.Stderr, "slowstart: warning: %s\n", textsafe.Escape(w))
			}
			if htmlOut != "" {
				if err := writeHTMLFile(cmd, htmlOut, rep); err != nil {
					return err
				}
				for i := range rep.Connections {
					rep.Connections[i].Packets = nil
				}
			}
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), rep)
			}
			rep.Warnings = nil // already on stderr
			return report.WriteText(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the Report as JSON (schema slowstart.report/v1, see docs/report.md)")
	cmd.Flags().StringVar(&server, "server", "", "the server's HOST[:PORT] (or :PORT): only its connections, and its side where the SYN was not captured")
	cmd.Flags().IntVar(&connection, "connection", 0, "only the N-th connection (1-based, in order of first packet)")
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write a self-contained HTML report (works offline) to this file")
	cmd.Flags().StringVar(&harPath, "har", "", "a HAR of the same page load (from a browser or WebPageTest): its requests placed on the capture's connections, with their rounds and the critical path (docs/browser.md)")
	cmd.Flags().StringVar(&keylogPath, "keylog", "", "decrypt TLS and QUIC with the secrets of this key log (the NSS format browsers and curl write with SSLKEYLOGFILE, which is read when this flag is not given): the HTTP requests inside, each with its rounds")
	return cmd
}

// loadKeyLog reads the key log of --keylog, or of $SSLKEYLOGFILE when the flag
// is empty; nil when there is none.
func loadKeyLog(path string) (*keylog.Log, error) {
	if path == "" {
		path = os.Getenv("SSLKEYLOGFILE")
		if path == "" {
			return nil, nil
		}
		if _, err := os.Stat(path); err != nil {
			return nil, nil // an exported variable for clients to write to: nothing there yet
		}
	}
	keys, err := keylog.ParseFile(path)
	if err != nil {
		return nil, fileError(fmt.Errorf("--keylog: %w", err))
	}
	if keys.Len() == 0 {
		return nil, fileError(fmt.Errorf("--keylog %s holds no secrets (%d lines skipped): give the file SSLKEYLOGFILE named when the client ran", path, keys.Skipped))
	}
	return keys, nil
}

func inputExitCode(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, capture.ErrNotCapture), errors.Is(err, capture.ErrEmpty), errors.Is(err, capture.ErrDamaged):
		return exitFile
	}
	return exitFailure
}
