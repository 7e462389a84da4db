package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

func newViewCommand() *cobra.Command {
	var (
		listen   string
		port     int
		htmlPath string
		server   string
	)
	cmd := &cobra.Command{
		Use:   "view FILE",
		Short: "See a capture or a Report in the browser: connections, rounds, windows",
		Long: `Show a capture (pcap or pcapng) or a Report (JSON from 'slowstart analyze --json')
as a web page: every connection on one time axis grouped by server, each
connection's time-sequence graph with its rounds, the segments of each round
against ideal slow start, and a summary of the initial window and what limited
the transfer.

By default the page is served on 127.0.0.1 at a free port (or --port) until
Ctrl-C; the URL is printed. --html OUT writes one self-contained HTML file
instead (code and data inline, works offline) to attach to a bug report.

A Report made without packets shows no time-sequence graph: view the capture
itself for that.

Exit codes: 0 success, 2 bad arguments, 3 the file can't be read as a capture
or a Report, 1 other failures.`,
		Example: `  slowstart view page.pcap                      # serve at http://127.0.0.1:PORT/
  slowstart view page.pcap --port 8040
  slowstart view page.pcap --html page.html     # one file to share
  slowstart analyze page.pcap --json > r.json && slowstart view r.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hint, err := analysis.ParseServer(server)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if port < 0 || port > 65535 {
				return withCode(exitUsage, fmt.Errorf("--port %d: must be 0 (any free port) to 65535", port))
			}
			listenAddr, err := netip.ParseAddr(listen)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--listen %q: not an IP address (e.g. 127.0.0.1, ::1 or 0.0.0.0)", listen))
			}
			rep, err := loadForView(cmd, args[0], analysis.Options{Server: hint, Tool: "slowstart " + version, Packets: true})
			if err != nil {
				return err
			}
			for _, w := range rep.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", w)
			}
			if htmlPath != "" {
				return writeHTMLFile(cmd, htmlPath, rep)
			}
			h, err := web.NewHandler(rep, web.HandlerOptions{AnyHost: !listenAddr.IsLoopback()})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(listenAddr.String(), strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("listening on %s port %d: %w (try another --port)", listenAddr, port, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "slowstart: the view of %s is at http://%s/ (Ctrl-C to stop)\n", args[0], ln.Addr())
			return web.Serve(cmd.Context(), ln, h, nil)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1", "the IP address to serve on; anything but loopback exposes the capture's contents to the network")
	cmd.Flags().IntVar(&port, "port", 0, "the TCP port to serve on (0: any free port)")
	cmd.Flags().StringVar(&htmlPath, "html", "", "write one self-contained HTML file to this path ('-': standard output) instead of serving")
	cmd.Flags().StringVar(&server, "server", "", "(captures) the server's HOST[:PORT] (or :PORT): only its connections, and its side where the SYN was not captured")
	return cmd
}

// loadForView reads path as a Report (JSON) or else analyzes it as a capture.
func loadForView(cmd *cobra.Command, path string, opts analysis.Options) (*report.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, withCode(exitInput, err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(64)
	if first := bytes.TrimLeft(head, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		return readReport(br, path)
	}
	rep, err := analysis.File(cmd.Context(), path, opts)
	if err != nil {
		return nil, withCode(inputExitCode(err), err)
	}
	return rep, nil
}

// readReport decodes a Report of this schema.
func readReport(r io.Reader, path string) (*report.Report, error) {
	var rep report.Report
	dec := json.NewDecoder(r)
	if err := dec.Decode(&rep); err != nil {
		return nil, withCode(exitInput, fmt.Errorf("%s: not a Report (JSON from 'slowstart analyze --json') nor a capture: %w", path, err))
	}
	if rep.Schema != report.Schema {
		return nil, withCode(exitInput, fmt.Errorf("%s: schema %q, this slowstart reads %q: make the Report again with this version", path, rep.Schema, report.Schema))
	}
	return &rep, nil
}

func writeHTMLFile(cmd *cobra.Command, path string, rep *report.Report) error {
	if path == "-" {
		return web.WriteHTML(cmd.OutOrStdout(), rep)
	}
	var b bytes.Buffer
	if err := web.WriteHTML(&b, rep); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the page: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: wrote %s (%s); open it in a browser\n", path, sizeText(b.Len()))
	return nil
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}
