package quicprobe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
)

// Protocols a probe may use (probe --protocols), by their ALPN names.
const (
	ProtocolH3 = "h3" // HTTP/3 over QUIC
	ProtocolH2 = "h2" // HTTP/2 over TLS over TCP
	ProtocolH1 = "h1" // HTTP/1.1 over TCP
)

// ParseProtocols reads a comma-separated list of h3, h2 and h1, in order of
// preference, each at most once.
func ParseProtocols(list string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		switch p {
		case ProtocolH3, ProtocolH2, ProtocolH1:
		case "http/1.1", "http1.1", "h1.1":
			p = ProtocolH1
		default:
			return nil, fmt.Errorf("protocol %q: use h3, h2 and h1, e.g. h3,h2,h1", p)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("protocol %s is listed twice", p)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no protocol given: use h3, h2 and h1, e.g. h3,h2,h1")
	}
	return out, nil
}

// Choice is a probe made over the protocols a browser would use for a page.
type Choice struct {
	// TCP is the probe over TCP (HTTP/2 or HTTP/1.1 by ALPN); nil when the first
	// visit went over QUIC.
	TCP *probe.Result
	// HTTP3 is the fetch over HTTP/3; nil when the server did not advertise it (or it
	// failed: see Report.Warnings).
	HTTP3 *h3client.Result
	// Advertised says how the server advertised HTTP/3: "alt-svc" (a header of the
	// response over TCP), "https-record" (its DNS HTTPS record), or "" (not at all).
	Advertised string
	// Report holds every connection in the order they were made: over TCP (every run
	// and redirect) and then over QUIC, or over QUIC alone.
	Report *report.Report
}

// ChooseOptions configure Choose.
type ChooseOptions struct {
	// Protocols in order of preference (ParseProtocols); it holds h3 and h2 or h1.
	Protocols []string
	// TCP and HTTP3 configure the two probes (URL, resolution, TLS, namespace...);
	// HTTP3.URL and HTTP3.Connect are set by Choose.
	TCP   probe.Options
	HTTP3 h3client.Options
	// Resolver asks for the HTTPS records (SystemResolver by default); an invalid
	// AddrPort with NoHTTPSRecord set skips them.
	Resolver      netip.AddrPort
	NoHTTPSRecord bool
}

// Choose probes a page as a browser that speaks these protocols reaches it:
//
//   - When h3 comes before h2 and h1 and the host's DNS HTTPS record (RFC 9460) lists
//     h3, the first visit goes over QUIC, as browsers that read HTTPS records do; if
//     that fails (UDP blocked), over TCP, as they fall back.
//   - Otherwise the first visit goes over TCP (HTTP/2 or HTTP/1.1 by ALPN), and when
//     the page's response advertises HTTP/3 in its Alt-Svc header, the page is
//     fetched again over HTTP/3 on a fresh QUIC connection: a browser learns of
//     HTTP/3 from that header and uses it for its next connections to the site, not
//     for the first one. Both connections are reported, TCP first.
//
// A host given by address has no HTTPS record to read; a Resolve entry replaces the
// address lookup only, not the HTTPS record's.
func Choose(ctx context.Context, opts ChooseOptions) (*Choice, error) {
	prefer := func(p string) int {
		if i := slices.Index(opts.Protocols, p); i >= 0 {
			return i
		}
		return len(opts.Protocols)
	}
	h3 := prefer(ProtocolH3)
	tcpFirst := min(prefer(ProtocolH2), prefer(ProtocolH1))
	if h3 == len(opts.Protocols) || tcpFirst == len(opts.Protocols) {
		return nil, fmt.Errorf("Choose needs h3 and h2 or h1 among the protocols, got %v", opts.Protocols)
	}
	tcpOpts := opts.TCP
	tcpOpts.HTTP1Only = prefer(ProtocolH2) == len(opts.Protocols)
	u, err := url.Parse(tcpOpts.URL)
	if err != nil {
		return nil, err
	}
	var notes, warnings []string

	if h3 < tcpFirst && u.Scheme == "https" && !opts.NoHTTPSRecord && isName(u.Hostname()) {
		rec, ok, err := lookupRecord(ctx, opts, u.Hostname())
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("the HTTPS DNS record of %s could not be read (%v): the first visit goes over TCP", u.Hostname(), err))
		case ok && rec.OffersHTTP3():
			h3Opts := opts.HTTP3
			h3Opts.URL = tcpOpts.URL
			if rec.Port != 0 || (rec.Target != "." && rec.Target != "") {
				target := strings.TrimSuffix(rec.Target, ".")
				port := rec.Port
				if port == 0 {
					port = portOf(u)
				}
				h3Opts.Connect = net.JoinHostPort(target, strconv.Itoa(int(port)))
			}
			res, err := h3client.Run(ctx, h3Opts)
			if err == nil {
				why := fmt.Sprintf("the HTTPS DNS record of %s lists h3 (ALPN %s): a browser that reads HTTPS records reaches the site over QUIC from the first visit, and so did this probe", u.Hostname(), strings.Join(rec.ALPN, ","))
				noteAll(res.Report, why)
				return &Choice{HTTP3: res, Advertised: "https-record", Report: res.Report}, nil
			}
			warnings = append(warnings, fmt.Sprintf("the HTTPS DNS record of %s lists h3, but the fetch over HTTP/3 failed (%v): a browser falls back to TCP, and so did this probe", u.Hostname(), err))
		case ok:
			notes = append(notes, fmt.Sprintf("the HTTPS DNS record of %s lists %s, not h3: the first visit goes over TCP", u.Hostname(), strings.Join(rec.ALPN, ",")))
		}
	}

	tcpRes, err := probe.Run(ctx, tcpOpts)
	if tcpRes == nil {
		return nil, err
	}
	ch := &Choice{TCP: tcpRes, Report: tcpRes.Report}
	ch.Report.Warnings = append(ch.Report.Warnings, warnings...)
	if len(ch.Report.Connections) > 0 {
		c := &ch.Report.Connections[0]
		c.Notes = append(c.Notes, notes...)
	}
	if err != nil {
		return ch, err
	}
	final := tcpRes.Final(len(tcpRes.Runs) - 1)
	if final == nil || final.ClientTiming == nil {
		return ch, nil
	}
	page := final.ClientTiming
	alt, ok := HTTP3Alternative(page.AltSvc)
	if !ok || !strings.HasPrefix(page.URL, "https://") {
		final.Notes = append(final.Notes, "the response does not advertise HTTP/3 (no h3 in an Alt-Svc header): a browser stays on TCP")
		return ch, nil
	}
	ch.Advertised = "alt-svc"
	h3Opts := opts.HTTP3
	h3Opts.URL = page.URL
	h3Opts.Connect = net.JoinHostPort(alt.Host, strconv.Itoa(int(alt.Port)))
	res, h3Err := h3client.Run(ctx, h3Opts)
	why := fmt.Sprintf("the page's response over TCP advertised HTTP/3 (Alt-Svc: %s): a browser uses it for its next connections to the site, not the first; this connection was made as the next one would be", page.AltSvc)
	if res == nil || res.Report == nil || len(res.Report.Connections) == 0 {
		ch.Report.Warnings = append(ch.Report.Warnings, fmt.Sprintf("%s, but the fetch over HTTP/3 failed: %v", why, h3Err))
		return ch, nil
	}
	if h3Err != nil {
		ch.Report.Warnings = append(ch.Report.Warnings, fmt.Sprintf("over HTTP/3: %v", h3Err))
	}
	ch.HTTP3 = res
	noteAll(res.Report, why)
	appendConnections(ch.Report, res.Report)
	return ch, nil
}

func lookupRecord(ctx context.Context, opts ChooseOptions, host string) (HTTPSRecord, bool, error) {
	server := opts.Resolver
	if !server.IsValid() {
		var err error
		if server, err = SystemResolver(); err != nil {
			return HTTPSRecord{}, false, err
		}
	}
	return LookupHTTPS(ctx, server, host)
}

// isName: the host is a DNS name, not an address (which has no HTTPS record).
func isName(host string) bool {
	_, err := netip.ParseAddr(host)
	return err != nil
}

func portOf(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

func noteAll(rep *report.Report, note string) {
	for i := range rep.Connections {
		rep.Connections[i].Notes = append(rep.Connections[i].Notes, note)
	}
}

// appendConnections adds the connections of more to rep, on rep's time axis.
func appendConnections(rep, more *report.Report) {
	offsetMs := float64(more.Source.StartUnixNs-rep.Source.StartUnixNs) / 1e6
	for _, c := range more.Connections {
		c.Index = len(rep.Connections) + 1
		c.StartMs += offsetMs
		rep.Connections = append(rep.Connections, c)
	}
	rep.Source.Packets += more.Source.Packets
	rep.Source.DurationMs = max(rep.Source.DurationMs, offsetMs+more.Source.DurationMs)
	for _, lt := range more.Source.LinkTypes {
		if !slices.Contains(rep.Source.LinkTypes, lt) {
			rep.Source.LinkTypes = append(rep.Source.LinkTypes, lt)
		}
	}
	rep.Warnings = append(rep.Warnings, more.Warnings...)
}

// WriteChoiceText writes a Choice for people: the probe over TCP as probe writes it,
// then the connection over HTTP/3 with how the server advertised it.
func WriteChoiceText(w io.Writer, ch *Choice) error {
	ew := &report.ErrWriter{W: w}
	if ch.TCP != nil {
		if err := probe.WriteText(w, ch.TCP); err != nil {
			return err
		}
	}
	if ch.HTTP3 == nil {
		return ew.Err
	}
	switch ch.Advertised {
	case "alt-svc":
		ew.Printf("\n== over HTTP/3, as a browser's next connection: the response advertised it (Alt-Svc: %s)\n", textsafe.Escape(ch.TCP.Final(len(ch.TCP.Runs)-1).ClientTiming.AltSvc))
	case "https-record":
		ew.Printf("== over HTTP/3 from the first visit: the site's HTTPS DNS record lists h3\n")
	}
	if ew.Err != nil {
		return ew.Err
	}
	return report.WriteText(w, ch.HTTP3.Report)
}
