package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/live"
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
open connections; each is numbered in the order of its first packet. A table of
the connections, one line each (as tshark -z conv,tcp lists them: bytes each way,
handshake RTT, round trips, IW reading), the capture's summary and its warnings
come last. A pipe (- or a FIFO) is followed as it is
written: each connection comes out (flushed) as it finishes, and Ctrl-C reports
what was read, the connections still open as they stand, and exits 130; give
tcpdump -U so that it writes each packet at once. Several files (a rotated capture, a shell
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
  tcpdump -U -i eth0 -w - port 443 | slowstart analyze -   # each connection as it finishes
  slowstart analyze page.pcap --keylog keys.txt     # HTTP requests inside TLS, each with its rounds
  slowstart analyze trace.pcapng --server 203.0.113.7:443 --connection 2`,
		Args: cobra.MinimumNArgs(1),
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
			if err := outpath.CheckFile("html", htmlOut); err != nil {
				return err
			}
			keys, err := loadKeyLog(keylogPath)
			if err != nil {
				return err
			}
			if harPath != "" && (connection > 0 || asJSONL || asCSV) {
				return withCode(exitUsage, errors.New("--har places a page's requests on every connection and writes a page load (text or --json): it can't be used with --connection, --jsonl or --csv"))
			}
			in, err := openAnalyzeInput(cmd.Context(), args)
			if err != nil {
				return err
			}
			defer in.Close()
			if harPath != "" {
				return analyzeCaptureWithHAR(cmd, in, args, analysis.StreamOptions{Options: analysis.Options{Server: hint, Tool: "slowstart " + version, Packets: htmlOut != "", KeyLog: keys}, IdleNs: idleNs(idle), CompactAttempts: true}, harPath, asJSON, htmlOut)
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
			// A capture being written (a pipe) is watched by someone: each
			// connection goes out as it is written, not when a buffer fills.
			flush := func() error { return nil }
			if f, ok := stream.(report.Flusher); ok && in.followed {
				flush = f.Flush
			}
			var page *report.Collector
			if htmlOut != "" {
				page = report.NewCollector(htmlBudgetBytes)
			}
			summary := report.NewSummaryTable()
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
					summary.Add(c)
					if page != nil {
						if err := page.Add(c); err != nil {
							return err
						}
						c.Packets, c.PacketStride = nil, 0
					}
					if err := w.Connection(c); err != nil {
						return err
					}
					return flush()
				},
			}
			if err := w.Begin(tool); err != nil {
				return err
			}
			defer tuneGCForBatch()()
			res, err := feedCapture(cmd, in, opts)
			if err != nil {
				return err
			}
			source := captureSource(args, in.reader.Stats())
			// Warnings go to standard error in every format, so a pipe reading
			// standard output sees only the report; the JSON document keeps them too.
			for _, warn := range res.warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", textsafe.Escape(warn))
			}
			if !res.stopped {
				if err := filterMatchedNothing(found, connection, server, res.stats.Connections); err != nil {
					return err
				}
			}
			endWarnings := res.warnings
			if !asJSON && !asJSONL && !asCSV {
				endWarnings = nil
				// The capture's connections one line each, as tshark -z conv lists them.
				if err := summary.Write(textsafe.Writer(out)); err != nil {
					return err
				}
			}
			if err := w.End(source, endWarnings); err != nil {
				return err
			}
			if res.stopped {
				if page != nil {
					if err := writeHTMLFile(cmd, htmlOut, page.Report(tool, source, res.warnings)); err != nil {
						return err
					}
				}
				return interrupted("interrupted; reported what was read until then (%s); the rest of the capture was not read; nothing left behind", report.Count(int(res.stats.Connections), "connection", "connections"))
			}
			if page != nil {
				if err := writeHTMLFile(cmd, htmlOut, page.Report(tool, source, res.warnings)); err != nil {
					return err
				}
			}
			// nil, or a damaged record's error: everything readable was analyzed
			// and reported.
			return res.damaged
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
	return captureOutcome(reader.Stats(), stats, err)
}

// captureOutcome sorts a stream's end: the capture's warnings, a damaged
// record (reported, exit code 3 after the report), or another failure.
func captureOutcome(capStats capture.Stats, stats analysis.StreamStats, err error) (analysis.StreamStats, []string, error, error) {
	if err != nil && !errors.Is(err, capture.ErrDamaged) {
		return stats, nil, nil, withCode(inputExitCode(err), err)
	}
	warnings := append(analysis.CaptureWarnings(capStats, int(stats.Connections)), analysis.StreamWarnings(stats)...)
	var damaged error
	switch {
	case err != nil:
		warnings = append(warnings, err.Error())
		damaged = withCode(exitFile, err)
	case capStats.Truncated:
		// Its warning says so; the exit code says the file was not whole.
		damaged = withCode(exitFile, fmt.Errorf("the capture ends inside a record (cut short, or still being written): the %d whole records before it were analyzed", capStats.Records))
	}
	return stats, warnings, damaged, nil
}

// analyzeInput is the capture analyze reads: files read to their end, or a
// pipe (standard input, a FIFO) followed as it is written.
type analyzeInput struct {
	reader *capture.Reader
	// followed: a pipe, read as it is written (live.Follow): connections go
	// out as they finish, and the stream's clock goes on while it is quiet.
	followed bool
	// stop ends the reading of the pipe once what it holds is read; nil
	// for files.
	stop  func()
	close []func()
}

func (in *analyzeInput) Close() {
	if in.reader != nil {
		in.reader.Close()
	}
	for i := len(in.close) - 1; i >= 0; i-- {
		in.close[i]()
	}
}

// openAnalyzeInput opens what analyze reads: the files given, or standard
// input for a lone "-". Standard input or a lone FIFO that is a pipe is read
// through a descriptor of its own in non-blocking mode, so that Go's poller
// reads it and a signal (ctx) can cut a read that waits for tcpdump. Its
// errors carry their exit codes.
func openAnalyzeInput(ctx context.Context, paths []string) (*analyzeInput, error) {
	var pipe *os.File
	switch {
	case len(paths) == 1 && paths[0] == "-":
		if fi, err := os.Stdin.Stat(); err == nil && isPipe(fi) {
			pipe = os.Stdin
		}
	case len(paths) == 1:
		if fi, err := os.Stat(paths[0]); err == nil && isPipe(fi) {
			// Opening a FIFO waits for a writer: a signal must not wait with it.
			type opened struct {
				f   *os.File
				err error
			}
			ch := make(chan opened, 1)
			go func() {
				f, err := os.Open(paths[0])
				ch <- opened{f, err}
			}()
			var o opened
			select {
			case o = <-ch:
			case <-ctx.Done():
				// A writer that opened it before the signal has its open
				// returned already, or in a moment.
				select {
				case o = <-ch:
				case <-time.After(fifoOpenGrace):
					return nil, interrupted("interrupted before anything wrote into %s; nothing left behind", paths[0])
				}
			}
			if o.err != nil {
				return nil, withCode(exitFile, fmt.Errorf("capture: opening the capture file: %w", o.err))
			}
			pipe = o.f
		}
	}
	if pipe == nil {
		r, err := openCaptureArgs(paths)
		if err != nil {
			return nil, err
		}
		return &analyzeInput{reader: r}, nil
	}
	in := &analyzeInput{followed: true}
	if pipe != os.Stdin {
		in.close = append(in.close, func() { pipe.Close() })
	}
	f, restore, err := pollable(pipe)
	if err != nil {
		// Not pollable: read it as it comes, a signal then ends the process.
		r, err := capture.NewReader(pipe, capture.WithUDP())
		if err != nil {
			in.Close()
			return nil, withCode(inputExitCode(err), err)
		}
		in.reader = r
		return in, nil
	}
	in.close = append(in.close, restore)
	sp := &stoppablePipe{f: f}
	in.stop = sp.stop
	// Until Follow takes over, a signal ends the wait for the capture's
	// header (which may be in the pipe already).
	stopWaiting := context.AfterFunc(ctx, sp.stop)
	r, err := capture.NewReader(sp, capture.WithUDP())
	stopWaiting()
	if err != nil {
		in.Close()
		if ctx.Err() != nil { // the signal ended the reading
			return nil, interrupted("interrupted before the capture's first packets arrived; nothing left behind")
		}
		return nil, withCode(inputExitCode(err), err)
	}
	in.reader = r
	return in, nil
}

// errPipeStopped ends the reads of a stopped pipe.
var errPipeStopped = errors.New("the reading was stopped")

// stoppablePipe reads a pipe through Go's poller until it is stopped (a
// signal): then what the pipe holds at that moment is still read (tcpdump
// wrote it before the signal), and the reads end there, a read waiting for
// more being cut by a deadline.
type stoppablePipe struct {
	f         *os.File
	mu        sync.Mutex
	stopped   bool
	remaining int // once stopped: the bytes left to read
}

func (p *stoppablePipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	if p.stopped {
		if p.remaining == 0 {
			p.mu.Unlock()
			return 0, errPipeStopped
		}
		b = b[:min(len(b), p.remaining)]
	}
	p.mu.Unlock()
	n, err := p.f.Read(b)
	p.mu.Lock()
	if p.stopped {
		p.remaining = max(0, p.remaining-n)
	}
	p.mu.Unlock()
	return n, err
}

// Stat lets the capture reader see a pipe.
func (p *stoppablePipe) Stat() (os.FileInfo, error) { return p.f.Stat() }

func (p *stoppablePipe) stop() {
	p.mu.Lock()
	again := p.stopped
	p.mu.Unlock()
	if again {
		return
	}
	held := 0
	if raw, err := p.f.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			// TIOCINQ (FIONREAD): the bytes the pipe holds.
			if n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				held = n
			}
		})
	}
	p.mu.Lock()
	p.stopped, p.remaining = true, held
	p.mu.Unlock()
	if held == 0 {
		p.f.SetReadDeadline(time.Now()) // a read waiting for more ends now
	}
}

// fifoOpenGrace is how long a signal waits for the open of a FIFO whose writer
// came just before it.
const fifoOpenGrace = 500 * time.Millisecond

// isPipe reports whether fi is a pipe, a FIFO or a socket: an input that is
// written as it is read.
func isPipe(fi os.FileInfo) bool {
	return fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

// pollable returns a descriptor of f's own in non-blocking mode (a pipe's read
// end is shared by its descriptors), which Go's poller reads and a deadline
// can interrupt; restore closes it and puts f's blocking mode back.
func pollable(f *os.File) (*os.File, func(), error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var fd int
	var dupErr error
	if err := raw.Control(func(orig uintptr) { fd, dupErr = unix.Dup(int(orig)) }); err != nil {
		return nil, nil, err
	}
	if dupErr != nil {
		return nil, nil, dupErr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	// A descriptor in non-blocking mode makes a pollable File.
	nf := os.NewFile(uintptr(fd), f.Name())
	restore := func() {
		unix.SetNonblock(fd, false)
		nf.Close()
	}
	return nf, restore, nil
}

// feedResult is how a capture's analysis ended.
type feedResult struct {
	stats    analysis.StreamStats
	warnings []string
	damaged  error // a damaged record, reported; exit code 3 after the report
	// stopped: a signal ended the reading; what was read was analyzed and
	// reported.
	stopped bool
}

// feedCapture analyzes the input to its end, or until a signal: the stream
// itself is not cancelled then, so the connections read are finished and
// reported. A followed pipe is read as it is written (live.Follow).
func feedCapture(cmd *cobra.Command, in *analyzeInput, opts analysis.StreamOptions) (feedResult, error) {
	ctx := cmd.Context()
	st := analysis.NewStream(context.WithoutCancel(ctx), opts)
	var err error
	if in.followed {
		err = live.Follow(ctx, in.reader, st, live.FollowOptions{Stop: in.stop})
	} else {
		err = analysis.Feed(ctx, in.reader, st)
	}
	stopped := ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err()))
	if stopped {
		err = nil
	}
	stats, closeErr := st.Close()
	if err == nil {
		err = closeErr
	}
	if stopped && in.followed && in.stop == nil {
		// The read in progress could not be cut: the reader is not ours to
		// read from again.
		return feedResult{stats: stats, stopped: true}, nil
	}
	capStats := in.reader.Stats()
	if stopped {
		// A record the signal cut is not the file's end.
		capStats.Truncated = false
	}
	stats, warnings, damaged, err := captureOutcome(capStats, stats, err)
	if err != nil {
		return feedResult{}, err
	}
	return feedResult{stats: stats, warnings: warnings, damaged: damaged, stopped: stopped}, nil
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
func analyzeCaptureWithHAR(cmd *cobra.Command, in *analyzeInput, args []string, opts analysis.StreamOptions, harPath string, asJSON bool, htmlOut string) error {
	harIn, err := loadHAR(harPath)
	if err != nil {
		return err
	}
	servers, named := harIn.Servers()
	defer tuneGCForBatch()()
	var conns []report.Connection
	opts.Emit = func(c *report.Connection) error {
		if server, ok := pageload.ServerOf(c); named && ok && !servers[server] {
			harIn.LeftOut++
			return nil
		}
		conns = append(conns, *c)
		return nil
	}
	res, err := feedCapture(cmd, in, opts)
	if err != nil {
		return err
	}
	if res.stopped {
		return interrupted("interrupted while the capture was read; the page load needs all of it: nothing printed, nothing left behind")
	}
	rep := analysis.NewReport(opts.Tool, conns)
	rep.Source = captureSource(args, in.reader.Stats())
	rep.Warnings = append(rep.Warnings, res.warnings...)
	for _, w := range rep.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	if err := placeHAR(cmd, rep, harIn, asJSON, htmlOut); err != nil {
		return err
	}
	return res.damaged
}
