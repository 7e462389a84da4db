package live

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/gctune"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/report"
)

// HTMLBudgetBytes bounds the connections a page holds (their JSON), so that
// the page of any capture opens in a browser: docs/view.md.
const HTMLBudgetBytes = 20 << 20

// Output formats of Analyze.
const (
	FormatText  = ""
	FormatJSON  = "json"
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// AnalyzeOptions are an analysis as slowstart analyze runs it.
type AnalyzeOptions struct {
	// Paths are the capture files (merged in time order), or "-" alone for
	// standard input.
	Paths []string
	// Server (HOST[:PORT] or :PORT, analysis.ParseServer) keeps only its
	// connections; Connection, when positive, only the N-th.
	Server     string
	Connection int
	// Formats are the formats asked for (FormatText when none): one at most.
	Formats []string
	// HTML, when set, is a file WriteHTML writes the page of the connections to.
	HTML      string
	WriteHTML func(path string, rep *report.Report) error
	// KeyLog decrypts TLS and QUIC (keylog.Open's path: $SSLKEYLOGFILE when "").
	KeyLog string
	// Idle reports a connection idle this long as it stands (0: never).
	Idle time.Duration
	// PlaceHAR, when set, takes over once the input is open: a HAR's page
	// load placed on the whole capture (package har), with the stream's options.
	PlaceHAR func(ctx context.Context, in *Input, opts analysis.StreamOptions) error
	// Tool names the program in the Report.
	Tool string
}

// Analyze reports every connection of the capture on out as it finishes, in
// the format asked for, then the capture's table of connections and its
// summary; warnings go to errOut. A damaged capture is reported whole and
// then returned (fault.File); a signal reports what was read (fault.Interrupted).
func Analyze(ctx context.Context, o AnalyzeOptions, out, errOut io.Writer) error {
	opts, err := o.streamOptions()
	if err != nil {
		return err
	}
	in, err := OpenInput(ctx, o.Paths)
	if err != nil {
		return err
	}
	defer in.Close()
	if o.PlaceHAR != nil {
		return o.PlaceHAR(ctx, in, opts)
	}
	a := newAnalysis(o, out, in.Followed())
	opts.Emit = a.emit
	if a.page != nil {
		opts.PacketsAfter = a.page.KeepsAfter // the page's connections only
	}
	if err := a.w.Begin(o.Tool); err != nil {
		return err
	}
	defer gctune.ForBatch()()
	res, err := in.Feed(ctx, opts)
	if err != nil {
		return err
	}
	return a.end(o, in, res, out, errOut)
}

// streamOptions checks the options and makes the stream's.
func (o AnalyzeOptions) streamOptions() (analysis.StreamOptions, error) {
	hint, err := analysis.ParseServer(o.Server)
	switch {
	case err != nil:
		return analysis.StreamOptions{}, fault.Mark(fault.Usage, err)
	case o.Connection < 0:
		return analysis.StreamOptions{}, fault.Usagef("--connection must be 1 or more")
	case len(o.Formats) > 1:
		return analysis.StreamOptions{}, fault.Usagef("--json, --jsonl and --csv are one output each: pick one")
	case o.Idle < 0:
		return analysis.StreamOptions{}, fault.Usagef("--idle-timeout must be positive (0: never)")
	}
	if err := outpath.CheckFile("html", o.HTML); err != nil {
		return analysis.StreamOptions{}, err
	}
	keys, err := keylog.Open(o.KeyLog)
	if err != nil {
		return analysis.StreamOptions{}, err
	}
	if o.PlaceHAR != nil && (o.Connection > 0 || o.format() == FormatJSONL || o.format() == FormatCSV) {
		return analysis.StreamOptions{}, fault.Usagef("--har places a page's requests on every connection and writes a page load (text or --json): it can't be used with --connection, --jsonl or --csv")
	}
	idle := int64(o.Idle)
	if o.Idle == 0 {
		idle = -1
	}
	// CompactAttempts: the page's packet lists of a SYN flood in the memory
	// analyze takes.
	return analysis.StreamOptions{Options: analysis.Options{Server: hint, Tool: o.Tool, Packets: o.HTML != "", KeyLog: keys},
		IdleNs: idle, CompactAttempts: true}, nil
}

func (o AnalyzeOptions) format() string {
	if len(o.Formats) == 0 {
		return FormatText
	}
	return o.Formats[0]
}

// analysisOutput is where Analyze's connections go as they finish.
type analysisOutput struct {
	connection int
	w          *beginLater
	flush      func() error
	page       *report.Collector
	summary    *report.SummaryTable
	found      bool
}

func newAnalysis(o AnalyzeOptions, out io.Writer, followed bool) *analysisOutput {
	var stream report.StreamWriter
	switch o.format() {
	case FormatJSON:
		stream = report.NewJSONStream(out)
	case FormatJSONL:
		stream = report.NewJSONLStream(out)
	case FormatCSV:
		stream = report.NewRoundsCSVStream(out)
	default:
		stream = report.NewTextStream(textsafe.Writer(out))
	}
	// Nothing is written before the first connection: a filter that matches
	// none is refused before a summary or a JSON header.
	a := &analysisOutput{connection: o.Connection, w: &beginLater{StreamWriter: stream}, summary: report.NewSummaryTable(),
		flush: func() error { return nil }}
	// A capture being written (a pipe) is watched by someone: each connection
	// goes out as it is written, not when a buffer fills.
	if f, ok := stream.(report.Flusher); ok && followed {
		a.flush = f.Flush
	}
	if o.HTML != "" {
		a.page = report.NewCollector(HTMLBudgetBytes)
	}
	return a
}

func (a *analysisOutput) emit(c *report.Connection) error {
	if a.connection > 0 && c.Index != a.connection {
		return nil
	}
	a.found = true
	a.summary.Add(c)
	if a.page != nil {
		if err := a.page.Add(c); err != nil {
			return err
		}
		c.Packets, c.PacketStride = nil, 0
	}
	if err := a.w.Connection(c); err != nil {
		return err
	}
	return a.flush()
}

// end writes what comes after the connections: the warnings, the table of
// connections (text), the summary, the page.
func (a *analysisOutput) end(o AnalyzeOptions, in *Input, res Fed, out, errOut io.Writer) error {
	source := Source(o.Paths, in.Stats())
	// Warnings go to standard error in every format, so a pipe reading
	// standard output sees only the report; the JSON document keeps them too.
	for _, warn := range res.Warnings {
		fmt.Fprintf(errOut, "slowstart: warning: %s\n", textsafe.Escape(warn))
	}
	if !res.Stopped {
		if err := filterMatchedNothing(a.found, o.Connection, o.Server, res.Stats.Connections); err != nil {
			return err
		}
	}
	endWarnings := res.Warnings
	if o.format() == FormatText {
		endWarnings = nil
		// The capture's connections one line each, as tshark -z conv lists them.
		if err := a.summary.Write(textsafe.Writer(out)); err != nil {
			return err
		}
	}
	if err := a.w.End(source, endWarnings); err != nil {
		return err
	}
	if a.page != nil {
		if err := o.WriteHTML(o.HTML, a.page.Report(o.Tool, source, res.Warnings)); err != nil {
			return err
		}
	}
	if res.Stopped {
		return fault.Interruptedf("interrupted; reported what was read until then (%s); the rest of the capture was not read; nothing left behind", report.Count(int(res.Stats.Connections), "connection", "connections"))
	}
	// nil, or a damaged record's error: everything readable was analyzed and
	// reported.
	return res.Damaged
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

// filterMatchedNothing refuses (a usage error, before anything is printed) a
// --connection or --server that no connection of the capture matched: the
// value does not fit this capture.
func filterMatchedNothing(found bool, connection int, server string, connections int64) error {
	switch {
	case found:
		return nil
	case connection > 0 && server != "":
		return fault.Usagef("--connection %d: the capture has %d connection(s) with the server %s", connection, connections, server)
	case connection > 0:
		return fault.Usagef("--connection %d: the capture has %d connection(s); analyze without it lists them", connection, connections)
	case server != "":
		return fault.Usagef("--server %s: no connection of the capture has that server; analyze without --server lists them", server)
	}
	return nil
}
