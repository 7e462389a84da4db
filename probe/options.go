package probe

import (
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slowstart/slowstart/internal/failure"
)

// MaxRedirects is how many redirects a probe follows before it calls it a loop.
const MaxRedirects = 10

// BrowserUserAgent is the User-Agent a probe sends unless told otherwise: a desktop
// browser's, since some servers answer other agents with other pages.
const BrowserUserAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"

// browserAcceptEncoding is what a browser offers on a first visit.
const browserAcceptEncoding = "gzip, deflate, br, zstd"

// IP versions a probe may be held to.
const (
	IPAny = 0
	IPv4  = 4
	IPv6  = 6
)

// Options configure a probe.
type Options struct {
	// URL is the page to fetch: http:// or https://.
	URL string
	// TLSVersion is "1.2" or "1.3" to allow only that version; "" allows both.
	TLSVersion string
	// HTTP1Only turns HTTP/2 off (it is offered by ALPN over TLS by default).
	HTTP1Only bool
	// NoCompress asks for an uncompressed body (Accept-Encoding: identity); by default
	// the probe offers what a browser offers and counts the body as it travels.
	NoCompress bool
	// UserAgent replaces BrowserUserAgent when set.
	UserAgent string
	// Headers are extra request headers (they replace defaults of the same name).
	Headers http.Header
	// Resolve maps "host:port" to an address, as curl's --resolve: no DNS lookup for it.
	Resolve map[string]netip.Addr
	// IPVersion holds the probe to IPv4 or IPv6 (IPAny: the first address the
	// resolver gives, IPv4 first).
	IPVersion int
	// ServerName replaces the URL's host as TLS server name (SNI) when set.
	ServerName string
	// Insecure skips the verification of the server's certificate.
	Insecure bool
	// RootCAs verify the server's chain; the system's roots when nil.
	RootCAs *x509.CertPool
	// Timeout bounds each request (DNS to last byte); 30 s when 0.
	Timeout time.Duration
	// Runs is how many times to fetch the URL, each over fresh connections; 1 when 0.
	Runs int
	// Netns is the path of a network namespace (/run/netns/NAME) to probe from: the
	// client's sockets and the capture are made inside it.
	Netns string
	// Interface is the capture interface; the one the route to the server uses when
	// empty.
	Interface string
	// PcapPath, when set, receives every captured packet (pcap, for Wireshark).
	PcapPath string
	// KeylogPath, when set, receives the TLS secrets (SSLKEYLOGFILE format), so that
	// Wireshark can decrypt the pcap.
	KeylogPath string
	// Tool is the version string written into the Report.
	Tool string
	// Packets asks for every packet in the Report (for view).
	Packets bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// target is a parsed URL with what the probe needs to reach it.
type target struct {
	url  *url.URL
	host string // without brackets
	port uint16
}

// parseTarget checks a URL the way a probe needs it: http or https, a host, a port.
func parseTarget(raw string) (target, error) {
	if raw == "" {
		return target{}, failure.New(KindURL, "no URL given")
	}
	if !strings.Contains(raw, "://") {
		return target{}, failure.New(KindURL, "URL %q: give the scheme, e.g. https://%s", raw, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, failure.New(KindURL, "URL %q is malformed: %v", raw, rootCause(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return target{}, failure.New(KindURL, "URL %q: only http:// and https:// can be probed", raw)
	}
	host := u.Hostname()
	if host == "" {
		return target{}, failure.New(KindURL, "URL %q has no host", raw)
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return target{}, failure.New(KindURL, "URL %q: port %q is not a number from 1 to 65535", raw, p)
		}
		port = uint16(n)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return target{url: u, host: host, port: port}, nil
}

// hostPort is the key of Options.Resolve for the target.
func (t target) hostPort() string { return net.JoinHostPort(t.host, strconv.Itoa(int(t.port))) }

// ParseResolve parses curl's --resolve syntax, "HOST:PORT:ADDR" (ADDR may be
// bracketed for IPv6), into a key of Options.Resolve and its address.
func ParseResolve(s string) (hostPort string, addr netip.Addr, err error) {
	host, rest, ok := strings.Cut(s, ":")
	if !ok || host == "" {
		return "", addr, failure.New(KindURL, "--resolve %q: use HOST:PORT:ADDRESS, e.g. example.com:443:192.0.2.7", s)
	}
	port, address, ok := strings.Cut(rest, ":")
	if !ok {
		return "", addr, failure.New(KindURL, "--resolve %q: use HOST:PORT:ADDRESS, e.g. example.com:443:192.0.2.7", s)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", addr, failure.New(KindURL, "--resolve %q: %q is not a port number", s, port)
	}
	address = strings.TrimSuffix(strings.TrimPrefix(address, "["), "]")
	addr, err = netip.ParseAddr(address)
	if err != nil {
		return "", addr, failure.New(KindURL, "--resolve %q: %q is not an IP address", s, address)
	}
	return net.JoinHostPort(host, port), addr.Unmap(), nil
}

// ParseHeader parses "Name: value" into a header name and value.
func ParseHeader(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return "", "", failure.New(KindURL, "header %q: use \"Name: value\"", s)
	}
	return http.CanonicalHeaderKey(name), strings.TrimSpace(value), nil
}

func (o *Options) normalized() (Options, error) {
	out := *o
	if out.Runs == 0 {
		out.Runs = 1
	}
	if out.Runs < 0 || out.Runs > 1000 {
		return out, failure.New(KindURL, "--runs %d: use 1 to 1000", out.Runs)
	}
	if out.Timeout == 0 {
		out.Timeout = 30 * time.Second
	}
	if out.Timeout < 0 {
		return out, failure.New(KindURL, "--timeout must be positive")
	}
	switch out.TLSVersion {
	case "", "1.2", "1.3":
	default:
		return out, failure.New(KindURL, "--tls %q: use 1.2 or 1.3", out.TLSVersion)
	}
	switch out.IPVersion {
	case IPAny, IPv4, IPv6:
	default:
		return out, failure.New(KindURL, "IP version %d: use 4 or 6", out.IPVersion)
	}
	if out.UserAgent == "" {
		out.UserAgent = BrowserUserAgent
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Tool == "" {
		out.Tool = "slowstart"
	}
	return out, nil
}
