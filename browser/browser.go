// Package browser loads a page in a real browser as a first visit and puts every
// request on the rounds of its connection: headless Chromium (Debian's chromium)
// with a fresh profile and no cache, driven over the DevTools protocol
// (chromedp), writes its TLS secrets to a key log (SSLKEYLOGFILE) while a live
// capture on the route's interface (or inside a network namespace) records all
// its connections; after the load event (and a wait for late requests) the capture
// is analyzed with the key log by the shared pipeline (package analysis) and the
// browser's requests are placed on it (package pageload).
//
// It is not the probe's own HTTP client (package probe) and it does not analyze
// packets or compute the critical path itself (packages analysis and pageload).
package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/failure"
	"github.com/slowstart/slowstart/internal/netnsexec"
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/pageload"
	"github.com/slowstart/slowstart/report"
)

// DefaultChromium is the browser started unless Options.Chromium names another.
const DefaultChromium = "/usr/bin/chromium"

// Options configure a page load.
type Options struct {
	// URL is the page: http:// or https://.
	URL string
	// Chromium is the browser's binary; DefaultChromium when empty.
	Chromium string
	// Netns is the path of a network namespace (/run/netns/NAME) to load from:
	// Chromium runs inside it and the capture is taken there.
	Netns string
	// Interface is the capture interface; the one the route to the URL's host
	// uses when empty.
	Interface string
	// Resolve maps "host:port" to an address (curl's --resolve), for Chromium's
	// host resolver rules.
	Resolve map[string]netip.Addr
	// Insecure accepts any certificate (--ignore-certificate-errors).
	Insecure bool
	// HTTP1Only turns HTTP/2 off (--disable-http2).
	HTTP1Only bool
	// HTTP3 lets Chromium use QUIC to the URL's origin (it is off otherwise). The
	// capture holds TCP only: requests over HTTP/3 are listed without rounds.
	HTTP3 bool
	// UserAgent replaces Chromium's when set.
	UserAgent string
	// Wait is how long to wait after the load event for late requests (then until
	// none is in flight, within Timeout).
	Wait time.Duration
	// Timeout bounds the load (navigation to load event); 30 s when 0.
	Timeout time.Duration
	// PcapPath and KeylogPath, when set, keep the capture (pcap) and the key log
	// (NSS format) there; otherwise they go to a temporary directory removed after.
	PcapPath, KeylogPath string
	// Tool is the version string written into the Report.
	Tool string
	// Packets asks for every packet in the Report (for view).
	Packets bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Kinds of failure: those the clients share (package failure), and the browser's own.
const (
	KindURL        = failure.KindURL
	KindPermission = failure.KindPermission
	KindInterface  = failure.KindInterface
	KindCapture    = failure.KindCapture
	KindBrowser    = "browser"  // Chromium is missing or failed
	KindNavigate   = "navigate" // the page could not be loaded (DNS, refused, TLS, timeout)
)

// Error is a failed page load of a known kind (package failure: the clients' one
// error type); its message says what to do.
type Error = failure.Error

// KindOf returns the kind of a failure (a page load's, or another client's), or ""
// for other errors.
func KindOf(err error) string { return failure.KindOf(err) }

// Result is a page load.
type Result struct {
	// Page is the page load on its connections; Page.Report holds the connections.
	Page *pageload.Page
	// Input is what the browser reported, before matching.
	Input pageload.Input
	// Interface is where the capture was taken; KernelDrops counts the packets the
	// kernel dropped before the capture read them.
	Interface   string
	KernelDrops int64
}

// target is a parsed URL.
type target struct {
	u    *url.URL
	host string
	port uint16
}

func parseURL(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return target{}, &Error{Kind: KindURL, Err: fmt.Errorf("URL %q: give an http:// or https:// URL with a host", raw)}
	}
	port := uint16(443)
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return target{}, &Error{Kind: KindURL, Err: fmt.Errorf("URL %q: port %q is not a number from 1 to 65535", raw, p)}
		}
		port = uint16(n)
	}
	return target{u: u, host: u.Hostname(), port: port}, nil
}

// Load loads the page as a first visit and returns it on its connections. It needs
// root (a live capture, and a namespace with Netns).
func Load(ctx context.Context, o Options) (*Result, error) {
	if o.Chromium == "" {
		o.Chromium = DefaultChromium
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Wait < 0 {
		return nil, &Error{Kind: KindURL, Err: errors.New("--wait can't be negative")}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tool == "" {
		o.Tool = "slowstart"
	}
	t, err := parseURL(o.URL)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, &Error{Kind: KindPermission, Err: errors.New("a browser page load captures every connection of the browser (CAP_NET_RAW) and runs Chromium as root without its sandbox: run it with sudo")}
	}
	dir, err := netlab.MakeTempDir("browser")
	if err != nil {
		return nil, &Error{Kind: KindBrowser, Err: fmt.Errorf("making a temporary directory for Chromium's profile: %w", err)}
	}
	defer netlab.RemoveTempDir(dir)
	pcapPath, keylogPath := o.PcapPath, o.KeylogPath
	if pcapPath == "" {
		pcapPath = filepath.Join(dir, "capture.pcap")
	}
	if keylogPath == "" {
		keylogPath = filepath.Join(dir, "keys.txt")
	}
	// Chromium appends its secrets to the key log as it finds it: made 0600 (or
	// tightened to it) first.
	if f, err := privatefile.Append(keylogPath); err != nil {
		return nil, &Error{Kind: KindURL, Err: fmt.Errorf("--keylog-save %s: %w", keylogPath, err)}
	} else {
		f.Close()
	}

	iface := o.Interface
	if iface == "" {
		addr, err := resolveTarget(ctx, &o, t)
		if err != nil {
			return nil, err
		}
		name, _, err := capture.RouteInterfaceIn(o.Netns, addr)
		if err != nil {
			return nil, &Error{Kind: KindNavigate, Err: fmt.Errorf("finding the interface of the route to %s (%s): %w: check the address, or name one with --interface", t.host, addr, err)}
		}
		iface = name
	}
	rec, err := startRecording(ctx, iface, o.Netns, pcapPath)
	if err != nil {
		return nil, err
	}
	res := &Result{Interface: iface}
	ch, err := startChromium(ctx, &o, dir, keylogPath)
	if err != nil {
		rec.stop()
		return res, err
	}
	in, loadErr := loadPage(ctx, ch, &o)
	// Closing Chromium closes its connections: their FINs are captured too.
	ch.Stop()
	captureErr := rec.stop()
	res.Input = in
	res.KernelDrops = rec.live.Stats().KernelDrops
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if loadErr != nil {
		return res, loadErr
	}
	if captureErr != nil {
		return res, &Error{Kind: KindCapture, Err: fmt.Errorf("capturing on %s: %w", iface, captureErr)}
	}
	var keys *keylog.Log
	if info, err := os.Stat(keylogPath); err == nil && info.Size() > 0 {
		if keys, err = keylog.ParseFile(keylogPath); err != nil {
			return res, &Error{Kind: KindBrowser, Err: fmt.Errorf("reading Chromium's key log: %w", err)}
		}
	}
	rep, err := analysis.File(ctx, pcapPath, analysis.Options{Tool: o.Tool, Packets: o.Packets, KeyLog: keys})
	if err != nil {
		return res, &Error{Kind: KindCapture, Err: fmt.Errorf("analyzing the capture: %w", err)}
	}
	rep.Source.Kind = "live"
	rep.Source.Path = iface
	if res.KernelDrops > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the kernel dropped %d packets before the capture read them: rounds may be wrong; load the page again", res.KernelDrops))
	}
	res.Page = pageload.Build(rep, in)
	if keys == nil && t.u.Scheme == "https" {
		res.Page.Warnings = append(res.Page.Warnings, "Chromium wrote no TLS secrets: the requests were placed on their connections by address and time only")
	}
	return res, nil
}

// resolveTarget finds the address of the URL's host, for the capture's route:
// from Resolve, else from DNS (inside the namespace).
func resolveTarget(ctx context.Context, o *Options, t target) (netip.Addr, error) {
	if a, ok := o.Resolve[net.JoinHostPort(t.host, strconv.Itoa(int(t.port)))]; ok {
		return a, nil
	}
	if a, err := netip.ParseAddr(t.host); err == nil {
		return a.Unmap(), nil
	}
	if name, ok := netnsexec.Named(o.Netns); ok {
		// The namespace's own hosts file, as Chromium inside it reads it.
		if a, ok := lookupHostsFile(filepath.Join("/etc/netns", name, "hosts"), t.host); ok {
			return a, nil
		}
	}
	var addrs []netip.Addr
	err := netnsexec.Run(o.Netns, func() error {
		var err error
		addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", t.host)
		return err
	})
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, &Error{Kind: KindNavigate, Err: fmt.Errorf("resolving %s: %v: check the name, or give its address with --resolve %s:%d:ADDRESS", t.host, err, t.host, t.port)}
	}
	return addrs[0].Unmap(), nil
}

// lookupHostsFile finds host's first address in a hosts(5) file.
func lookupHostsFile(path, host string) (netip.Addr, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		a, err := netip.ParseAddr(fields[0])
		if err != nil {
			continue
		}
		for _, name := range fields[1:] {
			if strings.EqualFold(name, host) {
				return a.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// recording is the live capture of a page load, written to a pcap file.
type recording struct {
	live *capture.Live
	file *os.File
	w    *capture.PcapWriter
	done chan error
}

// startRecording captures every TCP packet on iface (in the namespace) into path.
func startRecording(ctx context.Context, iface, netnsPath, path string) (*recording, error) {
	live, err := capture.OpenLive(ctx, capture.LiveOptions{Interface: iface, Netns: netnsPath})
	switch {
	case errors.Is(err, capture.ErrPermission):
		return nil, &Error{Kind: KindPermission, Err: errors.New("capturing the browser's packets needs CAP_NET_RAW: run with sudo")}
	case errors.Is(err, capture.ErrNoInterface):
		return nil, &Error{Kind: KindInterface, Err: fmt.Errorf("interface %q does not exist: see `ip link` for the names", iface)}
	case err != nil:
		return nil, &Error{Kind: KindCapture, Err: fmt.Errorf("capturing on %s: %w", iface, err)}
	}
	file, err := privatefile.Create(path)
	if err != nil {
		live.Close()
		return nil, &Error{Kind: KindURL, Err: fmt.Errorf("--pcap %s: %w", path, err)}
	}
	w, err := capture.NewPcapWriter(file, 0)
	if err != nil {
		live.Close()
		file.Close()
		return nil, &Error{Kind: KindCapture, Err: err}
	}
	live.Tee(w)
	r := &recording{live: live, file: file, w: w, done: make(chan error, 1)}
	go func() {
		var p capture.Packet
		for {
			if err := live.Next(&p); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				r.done <- err
				return
			}
		}
	}()
	return r, nil
}

// stop ends the capture once every packet captured is written, and closes the file.
func (r *recording) stop() error {
	r.live.Stop()
	err := <-r.done
	r.live.Tee(nil)
	r.live.Close()
	return errors.Join(err, r.w.Flush(), r.file.Close())
}

// Text writes the result for people (pageload.WriteText).
func Text(w io.Writer, res *Result) error { return pageload.WriteText(w, res.Page) }

// Report is the Report of the page load's connections.
func (r *Result) Report() *report.Report {
	if r == nil || r.Page == nil {
		return nil
	}
	return r.Page.Report
}
