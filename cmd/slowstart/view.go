package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/demo"
	"github.com/slowstart/slowstart/field"
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/web"
)

func newViewCommand() *cobra.Command {
	var (
		listen   string
		port     int
		htmlPath string
		server   string
		iface    string
		filter   string
		pcapPath string
		keep     int
		keylog   string
	)
	cmd := &cobra.Command{
		Use:   "view {FILE | --live IFACE}",
		Short: "See a capture, a Report or a live capture in the browser: connections, rounds, windows",
		Long: `Show a capture (pcap or pcapng) or a Report (JSON from 'slowstart analyze --json';
or a page load from 'probe --browser --json', with its requests on their
connections and the critical path; or a store of 'slowstart field --store': a
panel per client network with the distribution of the round trips, the RTT,
round 1's bytes or the response time over time, and the marks of tune's
changes) as a web page: every connection on one time axis grouped by server, each
connection's time-sequence graph with its rounds, the segments of each round
against ideal slow start, and a summary of the initial window and what limited
the transfer. (The initial window, IW, is how many segments a new connection may
send before its first ACK comes back: each round trip after it about doubles.)

By default the page is served on 127.0.0.1 at a free port (or --port) until
Ctrl-C; the URL is printed. --html OUT writes one self-contained HTML file
instead (code and data inline, works offline) to attach to a bug report.

A Report made without packets shows no time-sequence graph: view the capture
itself for that.

--live IFACE captures on an interface instead, for watching a site while you
click around it: each TCP connection is analyzed when it completes (FIN or RST
and then 2 s quiet, or 3 s idle; an idle connection that carries more later is
shown again, updated) with the same analysis as 'analyze', and appears on the
open page at once (a "live" mark and a count in the header). The page keeps the
most recent --keep connections and says how many older ones it dropped.
--filter HOST[:PORT] (or :PORT) keeps only the connections with that server,
filtered in the kernel; --pcap FILE also writes every captured packet to FILE.
Live capture needs root or CAP_NET_RAW (setcap cap_net_raw+ep slowstart).
Ctrl-C stops the capture and the server.`,
		Example: `  slowstart view page.pcap                      # serve at http://127.0.0.1:PORT/
  slowstart view page.pcap --port 8040
  slowstart view page.pcap --html page.html     # one file to share
  slowstart view page.pcap --keylog keys.txt    # TLS decrypted: every request with its rounds
  slowstart view field.db                       # a field store: per network, over time
  slowstart analyze page.pcap --json > r.json && slowstart view r.json
  sudo slowstart view --live eth0 --filter 203.0.113.7:443   # watch one site live
  sudo slowstart view --live lo --filter :8080 --pcap seen.pcap`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65535 {
				return withCode(exitUsage, fmt.Errorf("--port %d: must be 0 (any free port) to 65535", port))
			}
			listenAddr, err := netip.ParseAddr(listen)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--listen %q: not an IP address (e.g. 127.0.0.1, ::1 or 0.0.0.0)", listen))
			}
			if iface != "" {
				switch {
				case len(args) > 0:
					return withCode(exitUsage, fmt.Errorf("view --live takes no FILE (got %q)", args[0]))
				case htmlPath != "":
					return withCode(exitUsage, errors.New("--html writes a file from a capture: it can't be used with --live (use --pcap, then view the file --html)"))
				case server != "":
					return withCode(exitUsage, errors.New("--server is for files: with --live use --filter HOST[:PORT]"))
				}
				if err := checkOutputFile("pcap", pcapPath); err != nil {
					return err
				}
				return viewLive(cmd, liveViewOptions{iface: iface, filter: filter, pcapPath: pcapPath, keep: keep, listen: listenAddr, port: port})
			}
			if len(args) != 1 {
				return withCode(exitUsage, errors.New("view needs a FILE (a capture or a Report), or --live IFACE"))
			}
			if filter != "" || pcapPath != "" || cmd.Flags().Changed("keep") {
				return withCode(exitUsage, errors.New("--filter, --pcap and --keep go with --live"))
			}
			hint, err := analysis.ParseServer(server)
			if err != nil {
				return withCode(exitUsage, err)
			}
			if err := checkOutputFile("html", htmlPath); err != nil {
				return err
			}
			if field.IsStore(args[0]) {
				return viewField(cmd, args[0], htmlPath, listenAddr, port)
			}
			// The address and port to serve on are taken before the file is
			// read: a value that can't be served on is refused before any work.
			var ln net.Listener
			if htmlPath == "" {
				if ln, err = listenForView(listenAddr, port); err != nil {
					return err
				}
				defer ln.Close()
			}
			if page, err := readPageLoad(args[0]); err != nil || page != nil {
				if err != nil {
					return err
				}
				return viewPageLoad(cmd, args[0], page, htmlPath, ln)
			}
			keys, err := loadKeyLog(keylog)
			if err != nil {
				return err
			}
			rep, loadErr := loadForView(cmd, args[0], analysis.Options{Server: hint, Tool: "slowstart " + version, Packets: true, KeyLog: keys})
			if rep == nil {
				return loadErr
			}
			for _, w := range rep.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %s\n", textsafe.Escape(w))
			}
			if htmlPath != "" {
				if err := writeHTMLFile(cmd, htmlPath, rep); err != nil {
					return err
				}
				return loadErr // a damaged capture: the page shows what was readable, exit 3
			}
			h, err := web.NewHandler(rep, web.HandlerOptions{AnyHost: !listenAddr.IsLoopback()})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "slowstart: the view of %s is at http://%s/ (Ctrl-C to stop)\n", args[0], ln.Addr())
			return web.Serve(cmd.Context(), ln, h, nil)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1", "the IP address to serve on; anything but loopback exposes the capture's contents to the network")
	cmd.Flags().IntVar(&port, "port", 0, "the TCP port to serve on (0: any free port)")
	cmd.Flags().StringVar(&htmlPath, "html", "", "write one self-contained HTML file to this path ('-': standard output) instead of serving")
	cmd.Flags().StringVar(&server, "server", "", "(captures) the server's HOST[:PORT] (or :PORT): only its connections, and its side where the SYN was not captured")
	cmd.Flags().StringVar(&iface, "live", "", "capture live on this interface (e.g. eth0, lo) and show each connection as it completes")
	cmd.Flags().StringVar(&filter, "filter", "", "(--live) only connections with this server: HOST[:PORT] or :PORT")
	cmd.Flags().StringVar(&pcapPath, "pcap", "", "(--live) also write every captured packet to this pcap file")
	cmd.Flags().IntVar(&keep, "keep", web.DefaultFeedKeep, "(--live) the most connections the page keeps; older ones are dropped")
	cmd.Flags().StringVar(&keylog, "keylog", "", "(captures) decrypt TLS with the secrets of this key log (NSS format, as SSLKEYLOGFILE writes; $SSLKEYLOGFILE when not given): every request on its connection with its rounds")
	return cmd
}

// loadForView reads path as a Report (JSON) or else analyzes it as a capture.
func loadForView(cmd *cobra.Command, path string, opts analysis.Options) (*report.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, withCode(exitFile, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return nil, withCode(exitFile, fmt.Errorf("%w: give a capture or a Report (JSON from 'slowstart analyze --json')", &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}))
	}
	br := bufio.NewReader(f)
	head, _ := br.Peek(64)
	if first := bytes.TrimLeft(head, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		if err := tooLargeForView(f, path); err != nil {
			return nil, err
		}
		return readReport(br, path)
	}
	return analyzeForPage(cmd, []string{path}, opts)
}

// analyzeForPage streams a capture into a Report small enough for a page: the
// connections that come first, within htmlBudgetBytes, and a warning for the
// rest. A damaged record is a warning of the Report, and the error returned
// with it (exit 3) once the page is made.
func analyzeForPage(cmd *cobra.Command, paths []string, opts analysis.Options) (*report.Report, error) {
	reader, err := openCaptureArgs(paths)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	page := report.NewCollector(htmlBudgetBytes)
	defer tuneGCForBatch()()
	_, warnings, damaged, err := streamCapture(cmd, reader, analysis.StreamOptions{Options: opts, CompactAttempts: true, Emit: page.Add})
	if err != nil {
		return nil, err
	}
	return page.Report(opts.Tool, captureSource(paths, reader.Stats()), warnings), damaged
}

// maxViewJSONBytes bounds a Report or page load view reads whole: the page of
// a capture keeps what fits in htmlBudgetBytes; a Report far larger than that
// is read as the capture it came from.
const maxViewJSONBytes = 256 << 20

// tooLargeForView refuses a JSON file longer than maxViewJSONBytes before it is
// read (a pipe is refused by readViewJSON once that much was read).
func tooLargeForView(f *os.File, path string) error {
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > maxViewJSONBytes {
		return withCode(exitFile, fmt.Errorf("%s: more than %d MiB of JSON, too much for one page: view the capture itself (its page keeps the connections that fit)", path, maxViewJSONBytes>>20))
	}
	return nil
}

// readViewJSON reads a Report's or a page load's JSON whole, at most
// maxViewJSONBytes of it.
func readViewJSON(r io.Reader, path string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxViewJSONBytes+1))
	if err != nil {
		return nil, withCode(exitFile, fmt.Errorf("%s: %w", path, err))
	}
	if len(data) > maxViewJSONBytes {
		return nil, withCode(exitFile, fmt.Errorf("%s: more than %d MiB of JSON, too much for one page: view the capture itself (its page keeps the connections that fit)", path, maxViewJSONBytes>>20))
	}
	return data, nil
}

// readReport decodes a Report of this schema, or the demo's JSON (its page loads'
// Reports together).
func readReport(r io.Reader, path string) (*report.Report, error) {
	data, err := readViewJSON(r, path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if json.Unmarshal(data, &head) == nil && head.Schema == demo.Schema {
		var out demo.Output
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, withCode(exitFile, fmt.Errorf("%s: not the demo's JSON: %w", path, err))
		}
		return out.Merged(), nil
	}
	var rep report.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rep); err != nil {
		return nil, withCode(exitFile, fmt.Errorf("%s: not a Report (JSON from 'slowstart analyze --json') nor a capture: %w", path, err))
	}
	if rep.Schema != report.Schema {
		return nil, withCode(exitFile, fmt.Errorf("%s: schema %q, this slowstart reads %q: make the Report again with this version", path, rep.Schema, report.Schema))
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
		return fileError(fmt.Errorf("writing the page: %w", err))
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

// listenForView takes the address and port view serves on. An address this
// machine does not have, or a port in use, is a value to change (exit 2); a
// port below 1024 without root, missing privileges (exit 4).
func listenForView(addr netip.Addr, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, withCode(exitUsage, fmt.Errorf("--listen %s: not an address of this machine (see: ip addr); 127.0.0.1 serves this machine only, 0.0.0.0 every address", addr))
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, withCode(exitUsage, fmt.Errorf("--port %d: in use on %s: give another --port, or 0 for any free one", port, addr))
	case errors.Is(err, syscall.EACCES):
		return nil, withCode(exitPermission, fmt.Errorf("--port %d: a port below 1024 needs root: give another --port, or 0 for any free one", port))
	}
	return nil, fmt.Errorf("listening on %s port %d: %w (try another --port)", addr, port, err)
}

type liveViewOptions struct {
	iface, filter, pcapPath string
	keep                    int
	listen                  netip.Addr
	port                    int
}

// viewLive captures on o.iface and serves the live view until Ctrl-C.
func viewLive(cmd *cobra.Command, o liveViewOptions) error {
	ctx := cmd.Context()
	hint, err := analysis.ParseServer(o.filter)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--filter: %w", err))
	}
	if o.keep <= 0 {
		return withCode(exitUsage, fmt.Errorf("--keep %d: must be at least 1", o.keep))
	}
	filt := capture.Filter{Remote: hint.Addr, Port: hint.Port}
	captureCtx, stopCapture := context.WithCancel(ctx)
	defer stopCapture()
	lv, err := capture.OpenLive(captureCtx, capture.LiveOptions{Interface: o.iface, Filter: filt})
	switch {
	case errors.Is(err, capture.ErrPermission):
		return withCode(exitPermission, fmt.Errorf("capturing on %s: %w", o.iface, err))
	case errors.Is(err, capture.ErrNoInterface):
		return withCode(exitUsage, fmt.Errorf("--live %s: %w (see: ip link)", o.iface, err))
	case err != nil:
		return fmt.Errorf("capturing on %s: %w", o.iface, err)
	}
	defer lv.Close()

	var pw *capture.PcapWriter
	var pcapFile *os.File
	if o.pcapPath != "" {
		pcapFile, err = privatefile.Create(o.pcapPath)
		if err != nil {
			return fileError(fmt.Errorf("--pcap: %w", err))
		}
		defer pcapFile.Close()
		if pw, err = capture.NewPcapWriter(pcapFile, 0); err != nil {
			return fmt.Errorf("--pcap: %w", err)
		}
		lv.Tee(pw)
	}

	ln, err := listenForView(o.listen, o.port)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "slowstart: capturing on %s (%s); the live view is at http://%s/ (Ctrl-C to stop)\n", o.iface, filt, ln.Addr())
	view := web.LiveView{Source: lv, Listener: ln, Interface: o.iface, Filter: filt.String(), Keep: o.keep,
		Analysis: analysis.Options{Server: hint, Tool: "slowstart " + version, Packets: true},
		AnyHost:  !o.listen.IsLoopback(),
		OnConnection: func(c report.Connection, err error) {
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: warning: %v\n", err)
				return
			}
			fmt.Fprintf(out, "slowstart: connection #%d %s → %s: %s\n", c.Index, c.Client, c.Server, liveSummary(&c))
		}}
	sum, runErr := view.Run(ctx, stopCapture)
	var said []string
	if pw != nil {
		lv.Tee(nil)
		if err := pw.Flush(); err != nil {
			return fileError(fmt.Errorf("--pcap: %w", err))
		}
		if err := pcapFile.Close(); err != nil {
			return fileError(fmt.Errorf("--pcap: %w", err))
		}
		said = append(said, fmt.Sprintf("wrote %s (%d packets)", o.pcapPath, lv.Stats().Packets))
	}
	said = append(said, fmt.Sprintf("%s from %s (%d dropped by the kernel)", report.Count(int(sum.Connections), "connection", "connections"), report.Count(int(sum.Packets), "TCP packet", "TCP packets"), sum.KernelDrops))
	if runErr != nil && ctx.Err() == nil {
		return runErr
	}
	if ctx.Err() != nil {
		return interrupted("interrupted; %s", strings.Join(said, "; "))
	}
	for _, s := range said {
		fmt.Fprintf(cmd.ErrOrStderr(), "slowstart: %s\n", s)
	}
	return nil
}

// liveSummary says a connection's round trips and initial window in a few words.
func liveSummary(c *report.Connection) string {
	s := fmt.Sprintf("%s (%s of data)", report.Count(c.RoundTrips.Total, "round trip", "round trips"), report.Count(len(c.Rounds), "round", "rounds"))
	if iw := c.InitialWindow; iw != nil && iw.Verdict != report.VerdictNone {
		s += fmt.Sprintf(", IW %s (%s)", report.Count(iw.Segments, "segment", "segments"), iw.Verdict)
	}
	return s
}
