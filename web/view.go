package web

// This file runs the view verb as slowstart view does: a capture, a Report, a
// page load or a field store served (or written as one file), or a live
// capture served as it is analyzed.

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

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/fault"
	"github.com/slowstart/slowstart/internal/gctune"
	"github.com/slowstart/slowstart/internal/outpath"
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/live"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// ViewOptions are a view as slowstart view shows it: a file (Path), or a live
// capture (Live).
type ViewOptions struct {
	// Path is the capture, Report, page load or field store to show.
	Path string
	// Live, instead, is an interface to capture on; Pcap a file to write its
	// packets to; Keep the most connections the page keeps (KeepGiven: set
	// by the user, which only a live view takes).
	Live, Pcap string
	Keep       int
	KeepGiven  bool
	// Listen is where the page is served: an IP address, ADDR:PORT or :PORT
	// (port 0: any free one). Port is the port of an address given without
	// one (the old --port).
	Listen string
	Port   int
	// HTML, when set, is a file to write the page to instead of serving it
	// ("-": out).
	HTML string
	// Server (HOST[:PORT] or :PORT) keeps only its connections; a live view
	// filters them in the kernel.
	Server string
	// KeyLog decrypts TLS (keylog.Open's path).
	KeyLog string
	Tool   string
	// Schemas read JSON of other schemas than a Report's into the Report
	// to show (the demo's, whose package the view does not import).
	Schemas map[string]ReportReader
	// FieldStore reads path as a field store's view; ok is false when it is
	// not one (package field, which the view does not import).
	FieldStore func(ctx context.Context, path string) (v *FieldView, ok bool, err error)
}

// ReportReader reads JSON of a schema into a Report.
type ReportReader func(data []byte) (*report.Report, error)

// loadForView reads path as a Report (JSON) or else analyzes it as a capture.
func loadForView(ctx context.Context, path string, opts analysis.Options, schemas map[string]ReportReader) (*report.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fault.Mark(fault.File, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return nil, fault.Mark(fault.File, fmt.Errorf("%w: give a capture or a Report (JSON from 'slowstart analyze --json')", &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}))
	}
	br := bufio.NewReader(f)
	head, _ := br.Peek(64)
	if first := bytes.TrimLeft(head, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		if err := tooLargeForView(f, path); err != nil {
			return nil, err
		}
		return readReport(br, path, schemas)
	}
	return analyzeForPage(ctx, []string{path}, opts)
}

// analyzeForPage streams a capture into a Report small enough for a page: the
// connections that come first, within live.HTMLBudgetBytes, and a warning for the
// rest. A damaged record is a warning of the Report, and the error returned
// with it (exit 3) once the page is made.
func analyzeForPage(ctx context.Context, paths []string, opts analysis.Options) (*report.Report, error) {
	page := report.NewCollector(live.HTMLBudgetBytes)
	defer gctune.ForBatch()()
	source, warnings, damaged, err := live.Drain(ctx, paths, analysis.StreamOptions{Options: opts, CompactAttempts: true, Emit: page.Add,
		PacketsAfter: page.KeepsAfter})
	if err != nil {
		return nil, err
	}
	return page.Report(opts.Tool, source, warnings), damaged
}

// maxViewJSONBytes bounds a Report or page load view reads whole: the page of
// a capture keeps what fits in live.HTMLBudgetBytes; a Report far larger than that
// is read as the capture it came from.
const maxViewJSONBytes = 256 << 20

// tooLargeForView refuses a JSON file longer than maxViewJSONBytes before it is
// read (a pipe is refused by readViewJSON once that much was read).
func tooLargeForView(f *os.File, path string) error {
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > maxViewJSONBytes {
		return fault.Mark(fault.File, fmt.Errorf("%s: more than %d MiB of JSON, too much for one page: view the capture itself (its page keeps the connections that fit)", path, maxViewJSONBytes>>20))
	}
	return nil
}

// readViewJSON reads a Report's or a page load's JSON whole, at most
// maxViewJSONBytes of it.
func readViewJSON(r io.Reader, path string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxViewJSONBytes+1))
	if err != nil {
		return nil, fault.Mark(fault.File, fmt.Errorf("%s: %w", path, err))
	}
	if len(data) > maxViewJSONBytes {
		return nil, fault.Mark(fault.File, fmt.Errorf("%s: more than %d MiB of JSON, too much for one page: view the capture itself (its page keeps the connections that fit)", path, maxViewJSONBytes>>20))
	}
	return data, nil
}

// readReport decodes a Report of this schema, or the demo's JSON (its page loads'
// Reports together).
func readReport(r io.Reader, path string, schemas map[string]ReportReader) (*report.Report, error) {
	data, err := readViewJSON(r, path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if json.Unmarshal(data, &head) == nil && schemas[head.Schema] != nil {
		rep, err := schemas[head.Schema](data)
		if err != nil {
			return nil, fault.Mark(fault.File, fmt.Errorf("%s: %w", path, err))
		}
		return rep, nil
	}
	var rep report.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rep); err != nil {
		return nil, fault.Mark(fault.File, fmt.Errorf("%s: not a Report (JSON from 'slowstart analyze --json') nor a capture: %w", path, err))
	}
	if rep.Schema != report.Schema {
		return nil, fault.Mark(fault.File, fmt.Errorf("%s: schema %q, this slowstart reads %q: make the Report again with this version", path, rep.Schema, report.Schema))
	}
	return &rep, nil
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

// Listen takes the address and port view serves on. An address this
// machine does not have, or a port in use, is a value to change (exit 2); a
// port below 1024 without root, missing privileges (exit 4).
func Listen(at netip.AddrPort) (net.Listener, error) {
	addr, port := at.Addr(), at.Port()
	ln, err := net.Listen("tcp", at.String())
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, fault.Mark(fault.Usage, fmt.Errorf("--listen %s: not an address of this machine (see: ip addr); 127.0.0.1 serves this machine only, 0.0.0.0 every address", addr))
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fault.Mark(fault.Usage, fmt.Errorf("--listen %s: port %d is in use: give another port, or 0 for any free one", at, port))
	case errors.Is(err, syscall.EACCES):
		return nil, fault.Mark(fault.Permission, fmt.Errorf("--listen %s: a port below 1024 needs root: give another port, or 0 for any free one", at))
	}
	return nil, fmt.Errorf("listening on %s port %d: %w (try another port)", addr, port, err)
}

// listenAddress reads where the page is served: --listen (an IP address,
// ADDR:PORT or :PORT) and the port of an address given without one.
func listenAddress(listen string, port int) (netip.AddrPort, error) {
	if port < 0 || port > 65535 {
		return netip.AddrPort{}, fault.Usagef("--port %d: must be 0 (any free port) to 65535", port)
	}
	if addr, err := netip.ParseAddr(listen); err == nil {
		return netip.AddrPortFrom(addr, uint16(port)), nil
	}
	if strings.HasPrefix(listen, ":") {
		listen = "127.0.0.1" + listen
	}
	at, err := netip.ParseAddrPort(listen)
	if err != nil {
		return at, fault.Usagef("--listen %q: not an IP address with or without a port (e.g. 127.0.0.1, ::1, 0.0.0.0, 127.0.0.1:8040 or :8040)", listen)
	}
	return at, nil
}

// viewLive captures on o.Live and serves the live view until Ctrl-C.
func viewLive(ctx context.Context, o ViewOptions, listen netip.AddrPort, out, errOut io.Writer) error {
	hint, err := analysis.ParseServer(o.Server)
	if err != nil {
		return fault.Mark(fault.Usage, fmt.Errorf("--server: %w", err))
	}
	if o.Keep <= 0 {
		return fault.Mark(fault.Usage, fmt.Errorf("--keep %d: must be at least 1", o.Keep))
	}
	filt := capture.Filter{Remote: hint.Addr, Port: hint.Port}
	captureCtx, stopCapture := context.WithCancel(ctx)
	defer stopCapture()
	lv, err := capture.OpenLive(captureCtx, capture.LiveOptions{Interface: o.Live, Filter: filt, Ring: true}) // whole packets of a busy link, for as long as the view runs
	switch {
	case errors.Is(err, capture.ErrPermission):
		return fault.Mark(fault.Permission, fmt.Errorf("capturing on %s: %w", o.Live, err))
	case errors.Is(err, capture.ErrNoInterface):
		return fault.Mark(fault.Usage, fmt.Errorf("--live %s: %w (see: ip link)", o.Live, err))
	case err != nil:
		return fmt.Errorf("capturing on %s: %w", o.Live, err)
	}
	defer lv.Close()

	var pw *capture.PcapWriter
	var pcapFile *os.File
	if o.Pcap != "" {
		pcapFile, err = privatefile.Create(o.Pcap)
		if err != nil {
			return fault.Mark(fault.File, fmt.Errorf("--pcap: %w", err))
		}
		defer pcapFile.Close()
		if pw, err = capture.NewPcapWriter(pcapFile, 0); err != nil {
			return fmt.Errorf("--pcap: %w", err)
		}
		lv.Tee(pw)
	}

	ln, err := Listen(listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "slowstart: capturing on %s (%s); the live view is at http://%s/ (Ctrl-C to stop)\n", o.Live, filt, ln.Addr())
	view := LiveView{Source: lv, Listener: ln, Interface: o.Live, Filter: filt.String(), Keep: o.Keep,
		Analysis: analysis.Options{Server: hint, Tool: o.Tool, Packets: true},
		AnyHost:  !listen.Addr().IsLoopback(),
		OnConnection: func(c report.Connection, err error) {
			if err != nil {
				fmt.Fprintf(errOut, "slowstart: warning: %v\n", err)
				return
			}
			fmt.Fprintf(out, "slowstart: connection #%d %s → %s: %s\n", c.Index, c.Client, c.Server, liveSummary(&c))
		}}
	sum, runErr := view.Run(ctx, stopCapture)
	var said []string
	if pw != nil {
		lv.Tee(nil)
		if err := pw.Flush(); err != nil {
			return fault.Mark(fault.File, fmt.Errorf("--pcap: %w", err))
		}
		if err := pcapFile.Close(); err != nil {
			return fault.Mark(fault.File, fmt.Errorf("--pcap: %w", err))
		}
		said = append(said, fmt.Sprintf("wrote %s (%d packets)", o.Pcap, lv.Stats().Packets))
	}
	said = append(said, fmt.Sprintf("%s from %s (%d dropped by the kernel)", report.Count(int(sum.Connections), "connection", "connections"), report.Count(int(sum.Packets), "TCP packet", "TCP packets"), sum.KernelDrops))
	if runErr != nil && ctx.Err() == nil {
		return runErr
	}
	if ctx.Err() != nil {
		return fault.Interruptedf("interrupted; %s", strings.Join(said, "; "))
	}
	for _, s := range said {
		fmt.Fprintf(errOut, "slowstart: %s\n", s)
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

// readPageLoad reads path as a page load's JSON (probe --browser --json); nil
// when the file is something else (a capture, a Report).
func readPageLoad(path string) (*pageload.Page, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fault.Mark(fault.File, err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(256)
	if first := bytes.TrimLeft(head, " \t\r\n"); len(first) == 0 || first[0] != '{' || !bytes.Contains(head, []byte(pageload.Schema)) {
		return nil, nil
	}
	if err := tooLargeForView(f, path); err != nil {
		return nil, err
	}
	data, err := readViewJSON(br, path)
	if err != nil {
		return nil, err
	}
	var page pageload.Page
	if err := json.Unmarshal(data, &page); err != nil || page.Schema != pageload.Schema {
		return nil, nil // not a page load after all: read as a Report
	}
	if page.Report == nil || page.Report.Schema != report.Schema {
		return nil, fault.Mark(fault.File, fmt.Errorf("%s: a page load without its Report (schema %s): make it again with this version", path, report.Schema))
	}
	return &page, nil
}

// viewPageLoad shows a page load: as one HTML file, or served on ln (taken
// before the file was read) until Ctrl-C.
func viewPageLoad(ctx context.Context, path string, page *pageload.Page, htmlPath string, ln net.Listener, out, errOut io.Writer) error {
	if htmlPath != "" {
		if err := outpath.CheckFile("html", htmlPath); err != nil {
			return err
		}
		return WritePageHTMLFile(htmlPath, page.Report, page, out, errOut)
	}
	anyHost := true
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		anyHost = !a.IP.IsLoopback()
	}
	h, err := NewPageHandler(page.Report, page, HandlerOptions{AnyHost: anyHost})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "slowstart: the view of %s is at http://%s/ (Ctrl-C to stop)\n", path, ln.Addr())
	return Serve(ctx, ln, h, nil)
}

// View shows o.Path, or the live capture o.Live, in the browser until ctx
// ends, or writes its page to o.HTML. Its errors are marked with their fault
// kind; a damaged capture's page is made of what was readable, then its error
// returned (fault.File).
func View(ctx context.Context, o ViewOptions, out, errOut io.Writer) error {
	listen, err := listenAddress(o.Listen, o.Port)
	if err != nil {
		return err
	}
	if o.Live != "" {
		switch {
		case o.Path != "":
			return fault.Usagef("view --live takes no FILE (got %q)", o.Path)
		case o.HTML != "":
			return fault.Usagef("--html writes a file from a capture: it can't be used with --live (use --pcap, then view the file --html)")
		}
		if err := outpath.CheckFile("pcap", o.Pcap); err != nil {
			return err
		}
		return viewLive(ctx, o, listen, out, errOut)
	}
	if o.Path == "" {
		return fault.Usagef("view needs a FILE (a capture or a Report), or --live IFACE")
	}
	if o.Pcap != "" || o.KeepGiven {
		return fault.Usagef("--pcap and --keep go with --live")
	}
	return viewFile(ctx, o, listen, out, errOut)
}

// viewFile shows a capture, a Report, a page load or a field store.
func viewFile(ctx context.Context, o ViewOptions, listen netip.AddrPort, out, errOut io.Writer) error {
	hint, err := analysis.ParseServer(o.Server)
	if err != nil {
		return fault.Mark(fault.Usage, err)
	}
	if err := outpath.CheckFile("html", o.HTML); err != nil {
		return err
	}
	if o.FieldStore != nil {
		if v, ok, err := o.FieldStore(ctx, o.Path); ok || err != nil {
			if err != nil {
				return err
			}
			return viewField(ctx, o, v, listen, out, errOut)
		}
	}
	// The address and port to serve on are taken before the file is read: a
	// value that can't be served on is refused before any work.
	var ln net.Listener
	if o.HTML == "" {
		if ln, err = Listen(listen); err != nil {
			return err
		}
		defer ln.Close()
	}
	if page, err := readPageLoad(o.Path); err != nil || page != nil {
		if err != nil {
			return err
		}
		return viewPageLoad(ctx, o.Path, page, o.HTML, ln, out, errOut)
	}
	keys, err := keylog.Open(o.KeyLog)
	if err != nil {
		return err
	}
	rep, loadErr := loadForView(ctx, o.Path, analysis.Options{Server: hint, Tool: o.Tool, Packets: true, KeyLog: keys}, o.Schemas)
	if rep == nil {
		return loadErr
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(errOut, "slowstart: warning: %s\n", textsafe.Escape(w))
	}
	if o.HTML != "" {
		if err := WriteHTMLFile(o.HTML, rep, out, errOut); err != nil {
			return err
		}
		return loadErr // a damaged capture: the page shows what was readable, exit 3
	}
	h, err := NewHandler(rep, HandlerOptions{AnyHost: !listen.Addr().IsLoopback()})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "slowstart: the view of %s is at http://%s/ (Ctrl-C to stop)\n", o.Path, ln.Addr())
	return Serve(ctx, ln, h, nil)
}

// viewField shows a field store's view, or writes its page to o.HTML.
func viewField(ctx context.Context, o ViewOptions, v *FieldView, listen netip.AddrPort, out, errOut io.Writer) error {
	if o.HTML != "" {
		var b bytes.Buffer
		if err := WriteFieldHTML(&b, v); err != nil {
			return err
		}
		return writePage(o.HTML, b.Bytes(), out, errOut)
	}
	h, err := NewFieldHandler(v, HandlerOptions{AnyHost: !listen.Addr().IsLoopback()})
	if err != nil {
		return err
	}
	ln, err := Listen(listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "slowstart: the view of %s is at http://%s/ (Ctrl-C to stop)\n", o.Path, ln.Addr())
	return Serve(ctx, ln, h, nil)
}

// WriteHTMLFile writes the self-contained page of rep to path ("-": out) and
// says so on errOut.
func WriteHTMLFile(path string, rep *report.Report, out, errOut io.Writer) error {
	if path == "-" {
		return WriteHTML(out, rep)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		return err
	}
	return writePage(path, b.Bytes(), out, errOut)
}

// WritePageHTMLFile writes the self-contained page of a page load (package
// pageload) to path ("-": out) and says so on errOut.
func WritePageHTMLFile(path string, rep *report.Report, page any, out, errOut io.Writer) error {
	if path == "-" {
		return WritePageHTML(out, rep, page)
	}
	var b bytes.Buffer
	if err := WritePageHTML(&b, rep, page); err != nil {
		return err
	}
	return writePage(path, b.Bytes(), out, errOut)
}

// writePage writes a page's bytes to path ("-": out) and says so on errOut.
func writePage(path string, page []byte, out, errOut io.Writer) error {
	if path == "-" {
		_, err := out.Write(page)
		return err
	}
	if err := os.WriteFile(path, page, 0o644); err != nil {
		return fault.Filef("writing the page: %w", err)
	}
	fmt.Fprintf(errOut, "slowstart: wrote %s (%s); open it in a browser\n", path, sizeText(len(page)))
	return nil
}
