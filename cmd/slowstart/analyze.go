package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// htmlBudgetBytes bounds the connections a page holds (their JSON), so that the
// page of any capture opens in a browser: docs/view.md.
const htmlBudgetBytes = 20 << 20

func newAnalyzeCommand() *cobra.Command {
	var (
		asJSON, asJSONL, asCSV bool
		server                 string
		connection             int
		htmlOut                string
		keylogPath             string
		idle                   time.Duration
		harPath                string
	)
	cmd := &cobra.Command{
		Use:   "analyze FILE... | -",
		Short: "Rounds, initial window and verdict for every TCP connection in a pcap or pcapng file",
		Long: `Analyze a capture (pcap or pcapng, gzip or not, taken at the client, the server
or in between; - reads standard input) and report, for every TCP (and QUIC)
connection, its round trips: the bytes and segments the server sent in each, why each
round ended (cwnd, rwnd, app, rate, loss, end, incomplete), and the server's initial
congestion window (IW) with a verdict:

  exact         round 1 was cut by the congestion window: this is the IW
  range         the IW lies between two numbers the packets allow (and why)
  lower_bound   the data (or the TLS flight) ended inside round 1, or the round was
                not cut by the window: the IW is at least this
  rwnd_limited  the client's receive window capped round 1
  ambiguous     loss, reordering or a capture gap in round 1

The initial window (IW) is what a server may send on a new connection before it
waits a round trip; it decides how many round trips a page costs.

Connections are reported as they finish (both sides closed, or idle for
--idle-timeout, or the capture's end), so any capture size runs in the memory of its
open connections; each is numbered in the order of its first packet. The capture's
summary and its warnings come last. Several files (a rotated capture, a shell
glob) are read as one capture, merged in time order. A damaged record mid-file is
skipped where the format allows reading on, and a file cut inside a record (cut
short, or still being written) is read up to the cut: the report of everything
readable is printed, a warning names the record, and the exit code is 3.
--server or --connection matching no connection is refused (exit 2) before
anything is printed.`,
		Example: `  slowstart analyze page.pcap
  slowstart analyze page.pcap --json | jq '.connections[].initial_window'
  slowstart analyze big.pcap.gz --jsonl > conns.jsonl
  slowstart analyze ring-*.pcap                      # rotated files, merged in time order
  tcpdump -i eth0 -w - port 443 | slowstart analyze - --csv > rounds.csv
  slowstart analyze page.pcap --keylog keys.txt     # HTTP requests inside TLS, each with its rounds
  slowstart analyze trace.pcapng --server 203.0.113.7:443 --connection 2`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: abandonOnInterrupt,
		RunE: func(cmd *cobra.Command, args []string) error {
			hint, err := analysis.ParseServer(server)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if connection < 0 {
				return withCode(exitUsage, fmt.Errorf("--connection must be 1 or more"))
			}
			formats := 0
			for _, on := range []bool{asJSON, asJSONL, asCSV} {
				if on {
					formats++
				}
			}
			if formats > 1 {
				return withCode(exitUsage, errors.New("--json, --jsonl and --csv are one output each: pick one"))
			}
			if idle < 0 {
				return withCode(exitUsage, errors.New("--idle-timeout must be positive (0: never)"))
			}
			if err := checkOutputFile("html", htmlOut); err != nil {
				return err
			}
			keys, err := loadKeyLog(keylogPath)
			if err != nil {
				return err
			}
			if harPath != "" && (connection > 0 || asJSONL || asCSV) {
				return withCode(exitUsage, errors.New("--har places a page's requests on every connection and writes a page load (text or --json): it can't be used with --connection, --jsonl or --csv"))
			}
			reader, err := openCaptureArgs(args)
			if err != nil {
				return err
			}
			defer reader.Close()
			if harPath != "" {
				return analyzeCaptureWithHAR(cmd, reader, args, analysis.StreamOptions{Options: analysis.Options{Server: hint, Tool: "slowstart " + version, Packets: htmlOut != "", KeyLog: keys}, IdleNs: idleNs(idle), CompactAttempts: true}, harPath, asJSON, htmlOut)
			}

			out := cmd.OutOrStdout()
			var stream report.StreamWriter
			switch {
			case asJSON:
				stream = report.NewJSONStream(out)
			case asJSONL:
				stream = report.NewJSONLStream(out)
			case asCSV:
				stream = report.NewRoundsCSVStream(out)
			default:
				stream = report.NewTextStream(textsafe.Writer(out))
			}
			// Nothing is written before the first connection: a filter that
			// matches none is refused before a summary or a JSON header.
			w := &beginLater{StreamWriter: stream}
			var page *report.Collector
			if htmlOut != "" {
				page = report.NewCollector(htmlBudgetBytes)
			}
			found := false
			tool := "slowstart " + version
			opts := analysis.StreamOptions{
				Options: analysis.Options{Server: hint, Tool: tool, Packets: htmlOut != "", KeyLog: keys},
				IdleNs:  idleNs(idle),
				// The page's packet lists: a SYN flood in the memory analyze takes.
				CompactAttempts: true,
				Emit: func(c *report.Connection) error {
					if connection > 0 && c.Index != connection {
						return nil
					}
					found = true
					if page != nil {
						if err := page.Add(c); err != nil {
							return err
						}
						c.Packets, c.PacketStride = nil, 0
					}
					return w.Connection(c)
				},
			}
			if err := w.Begin(tool); err != nil {
				return err
			}
			defer tuneGCForBatch()()
			stats, warnings, damaged, err := streamCapture(cmd, reader, opts)
			if err != nil {
				return err
			}
			source := captureSource(args, reader.Stats())
			// Warnings go to standard error in every format, so a pipe reading
			// standard output sees only the report; the JSON document keeps them too.
			for _, warn := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", textsafe.Escape(warn))
			}
			if err := filterMatchedNothing(found, connection, server, stats.Connections); err != nil {
				return err
			}
			endWarnings := warnings
			if !asJSON && !asJSONL && !asCSV {
				endWarnings = nil
			}
			if err := w.End(source, endWarnings); err != nil {
				return err
			}
			if page != nil {
				if err := writeHTMLFile(cmd, htmlOut, page.Report(tool, source, warnings)); err != nil {
					return err
				}
			}
			// nil, or a damaged record's error: everything readable was analyzed
			// and reported.
			return damaged
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the Report as one JSON document (schema slowstart.report/v1, see docs/report.md), connections written as they finish")
	cmd.Flags().BoolVar(&asJSONL, "jsonl", false, "print one JSON line per connection (schema slowstart.connection/v1), as they finish")
	cmd.Flags().BoolVar(&asCSV, "csv", false, "print the rounds as CSV: one row per round, with its connection and IW reading")
	cmd.Flags().StringVar(&server, "server", "", "the server's HOST[:PORT] (or :PORT): only its connections, and its side where the SYN was not captured")
	cmd.Flags().IntVar(&connection, "connection", 0, "only the N-th connection (1-based, in order of first packet)")
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write a self-contained HTML report (works offline) to this file")
	cmd.Flags().StringVar(&harPath, "har", "", "a HAR of the same page load (from a browser or WebPageTest): its requests placed on the capture's connections, with their rounds and the critical path (docs/browser.md)")
	cmd.Flags().StringVar(&keylogPath, "keylog", "", "decrypt TLS and QUIC with the secrets of this key log (the NSS format browsers and curl write with SSLKEYLOGFILE, which is read when this flag is not given): the HTTP requests inside, each with its rounds")
	cmd.Flags().DurationVar(&idle, "idle-timeout", time.Duration(analysis.DefaultIdleNs), "report a connection idle this long (capture time) as it stands, and count its later packets only (0: never; memory then holds every idle connection)")
	return cmd
}

// beginLater holds a StreamWriter's Begin until the first connection or the
// end, so that nothing is written for a run refused after reading the capture.
type beginLater struct {
	report.StreamWriter
	tool   string
	begun  bool
	called bool
}

func (b *beginLater) Begin(tool string) error {
	b.tool, b.called = tool, true
	return nil
}

func (b *beginLater) begin() error {
	if b.begun || !b.called {
		return nil
	}
	b.begun = true
	return b.StreamWriter.Begin(b.tool)
}

func (b *beginLater) Connection(c *report.Connection) error {
	if err := b.begin(); err != nil {
		return err
	}
	return b.StreamWriter.Connection(c)
}

func (b *beginLater) End(source report.Source, warnings []string) error {
	if err := b.begin(); err != nil {
		return err
	}
	return b.StreamWriter.End(source, warnings)
}

// filterMatchedNothing refuses (exit 2, before anything is printed) a
// --connection or --server that no connection of the capture matched: the
// value does not fit this capture.
func filterMatchedNothing(found bool, connection int, server string, connections int64) error {
	switch {
	case found:
		return nil
	case connection > 0 && server != "":
		return withCode(exitUsage, fmt.Errorf("--connection %d: the capture has %d connection(s) with the server %s", connection, connections, server))
	case connection > 0:
		return withCode(exitUsage, fmt.Errorf("--connection %d: the capture has %d connection(s); analyze without it lists them", connection, connections))
	case server != "":
		return withCode(exitUsage, fmt.Errorf("--server %s: no connection of the capture has that server; analyze without --server lists them", server))
	}
	return nil
}

// idleNs turns --idle-timeout into StreamOptions.IdleNs (negative: never).
func idleNs(d time.Duration) int64 {
	if d == 0 {
		return -1
	}
	return int64(d)
}

// openCaptureArgs opens the capture files given (several are merged in time
// order, as one capture), or standard input for a lone "-"; its errors carry
// their exit codes.
func openCaptureArgs(paths []string) (*capture.Reader, error) {
	for _, p := range paths {
		if p == "-" && len(paths) > 1 {
			return nil, withCode(exitUsage, errors.New("\"-\" (standard input) is read alone, not with other files"))
		}
	}
	var r *capture.Reader
	var err error
	switch {
	case paths[0] == "-":
		r, err = capture.NewReader(os.Stdin, capture.WithUDP())
	case len(paths) == 1:
		r, err = capture.Open(paths[0], capture.WithUDP())
	default:
		r, err = capture.OpenFiles(paths, capture.WithUDP())
	}
	if err != nil {
		return nil, withCode(inputExitCode(err), err)
	}
	return r, nil
}

// streamCapture runs a stream with opts over the capture to its end. It returns
// the stream's counts and the capture's warnings; a damaged record (skipped:
// everything readable was analyzed) or a file cut inside a record is among them
// and is returned as damaged as well, with exit code 3, for after the report.
// err is any other failure.
func streamCapture(cmd *cobra.Command, reader *capture.Reader, opts analysis.StreamOptions) (stats analysis.StreamStats, warnings []string, damaged, err error) {
	stats, err = analysis.Drain(cmd.Context(), reader, opts)
	if err != nil && !errors.Is(err, capture.ErrDamaged) {
		return stats, nil, nil, withCode(inputExitCode(err), err)
	}
	st := reader.Stats()
	warnings = append(analysis.CaptureWarnings(st, int(stats.Connections)), analysis.StreamWarnings(stats)...)
	switch {
	case err != nil:
		warnings = append(warnings, err.Error())
		damaged = withCode(exitFile, err)
	case st.Truncated:
		// Its warning says so; the exit code says the file was not whole.
		damaged = withCode(exitFile, fmt.Errorf("the capture ends inside a record (cut short, or still being written): the %d whole records before it were analyzed", st.Records))
	}
	return stats, warnings, damaged, nil
}

// captureSource describes the files read (Path is the first, or "standard
// input"; Paths lists them all when there were several).
func captureSource(paths []string, st capture.Stats) report.Source {
	source := analysis.FileSource(paths[0], st)
	switch {
	case len(paths) == 1 && paths[0] == "-":
		source.Path = "standard input"
	case len(paths) > 1:
		source.Path = fmt.Sprintf("%s and %d more", paths[0], len(paths)-1)
		if len(paths) == 2 {
			source.Path = paths[0] + " and " + paths[1]
		}
		source.Paths = append([]string(nil), paths...)
	}
	return source
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

// inputExitCode is the exit code of a capture that can't be read: 3 for a
// file missing, unreadable (a directory, a symbolic link loop, no permission),
// empty, cut inside its header, damaged or not a capture.
func inputExitCode(err error) int {
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, capture.ErrNotCapture), errors.Is(err, capture.ErrEmpty), errors.Is(err, capture.ErrDamaged),
		errors.Is(err, capture.ErrTruncated):
		return exitFile
	}
	return exitFailure
}

// analyzeCaptureWithHAR analyzes the whole capture into one Report (a page load
// needs every connection at once) and places the HAR's requests on it. The HAR
// is read first: when its requests name their servers, the connections to
// other servers are counted and left out as they finish, so that memory holds
// the page's connections, not every one of a large capture.
func analyzeCaptureWithHAR(cmd *cobra.Command, reader *capture.Reader, args []string, opts analysis.StreamOptions, harPath string, asJSON bool, htmlOut string) error {
	in, err := loadHAR(harPath)
	if err != nil {
		return err
	}
	servers, named := in.Servers()
	defer tuneGCForBatch()()
	var conns []report.Connection
	opts.Emit = func(c *report.Connection) error {
		if server, ok := pageload.ServerOf(c); named && ok && !servers[server] {
			in.LeftOut++
			return nil
		}
		conns = append(conns, *c)
		return nil
	}
	_, warnings, damaged, err := streamCapture(cmd, reader, opts)
	if err != nil {
		return err
	}
	rep := analysis.NewReport(opts.Tool, conns)
	rep.Source = captureSource(args, reader.Stats())
	rep.Warnings = append(rep.Warnings, warnings...)
	for _, w := range rep.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	if err := placeHAR(cmd, rep, in, asJSON, htmlOut); err != nil {
		return err
	}
	return damaged
}
