package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/har"
	"github.com/slowstart/slowstart/live"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

// analyzeFlags are the flags of slowstart analyze, read into live.AnalyzeOptions.
type analyzeFlags struct {
	o                      live.AnalyzeOptions
	asJSON, asJSONL, asCSV bool
	har                    string
}

func newAnalyzeCommand() *cobra.Command {
	var f analyzeFlags
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
			return live.Analyze(cmd.Context(), f.options(cmd, args), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the Report as one JSON document (schema slowstart.report/v1, see docs/report.md), connections written as they finish")
	fl.BoolVar(&f.asJSONL, "jsonl", false, "print one JSON line per connection (schema slowstart.connection/v1), as they finish")
	fl.BoolVar(&f.asCSV, "csv", false, "print the rounds as CSV: one row per round, with its connection and IW reading")
	fl.StringVar(&f.o.Server, "server", "", "the server's HOST[:PORT] (or :PORT): only its connections, and its side where the SYN was not captured")
	fl.IntVar(&f.o.Connection, "connection", 0, "only the N-th connection (1-based, in order of first packet)")
	fl.StringVar(&f.o.HTML, "html", "", "also write a self-contained HTML report (works offline) to this file")
	fl.StringVar(&f.har, "har", "", "a HAR of the same page load (from a browser or WebPageTest): its requests placed on the capture's connections, with their rounds and the critical path (docs/browser.md)")
	fl.StringVar(&f.o.KeyLog, "keylog", "", "decrypt TLS and QUIC with the secrets of this key log (the NSS format browsers and curl write with SSLKEYLOGFILE, which is read when this flag is not given): the HTTP requests inside, each with its rounds")
	fl.DurationVar(&f.o.Idle, "idle-timeout", time.Duration(analysis.DefaultIdleNs), "report a connection idle this long (capture time) as it stands, and count its later packets only (0: never; memory then holds every idle connection)")
	return cmd
}

// options reads the flags of an analysis of the files in args.
func (f *analyzeFlags) options(cmd *cobra.Command, args []string) live.AnalyzeOptions {
	o := f.o
	o.Paths, o.Tool, o.Formats = args, "slowstart "+version, nil
	for format, on := range map[string]bool{live.FormatJSON: f.asJSON, live.FormatJSONL: f.asJSONL, live.FormatCSV: f.asCSV} {
		if on {
			o.Formats = append(o.Formats, format)
		}
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	o.WriteHTML = func(path string, rep *report.Report) error { return web.WriteHTMLFile(path, rep, out, errOut) }
	if f.har != "" {
		o.PlaceHAR = func(ctx context.Context, in *live.Input, opts analysis.StreamOptions) error {
			return har.PlaceOnCapture(ctx, in, opts, f.har, func(page *pageload.Page) error {
				return writePageLoad(cmd, page, f.asJSON, o.HTML, "")
			}, errOut)
		}
	}
	return o
}
