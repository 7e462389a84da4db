// Package labserver keeps an emulated far-away server up for clients to measure:
// a lab path (lab/labpath: client and server namespaces joined by the link
// emulator, the server's route carrying the initial window) with a server
// (lab/server: the built-in one, nginx or Caddy; HTTP/3 beside TCP) in its server
// namespace, its certificate chain, and a test page with its second host. It also
// loads that page in headless Chromium from the client namespace (LoadPage: the
// lab page verb). The demo, and the tests of the probe, survey, watch and compare,
// measure its servers.
//
// It is not the lab's trials (package lab), which make a path, a server and a
// transfer for each trial and time it; and it measures nothing itself.
package labserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/server"
)

// ServerName is the name on the lab server's certificate (labpath.ServerName);
// clients reach it by that name with Server.Resolve, as a user would with --resolve.
const ServerName = labpath.ServerName

// SecondServerName is a test page's second host name (Config.Page):
// another origin on the same server, at port SecondPort (TLS) or
// SecondPortCleartext, so a browser opens connections of its own to it.
const (
	SecondServerName    = "static.slowstart.test"
	SecondPort          = 8443
	SecondPortCleartext = 8080
)

// Config describes an emulated far-away server.
type Config struct {
	RTT               time.Duration
	RateBitsPerSecond int64  // each way; 0: no rate limit
	IW                int    // the server route's initcwnd; 0: kernel default
	TLSVersion        string // "", "1.2" or "1.3"
	HTTP2             bool
	ChainBytes        int // certificate chain (TLS 1.2 Certificate message); 0: about 4 KB
	IPv6              bool
	// Keys caches the chain's keys across servers; nil makes fresh ones.
	Keys *server.KeyCache
	// Handler, when set, replaces the built-in /bytes/N handler's Config (think
	// time and so on); TLS settings are still taken from the fields above.
	Server server.Config
	// Nginx serves with Debian's nginx instead of the built-in server, the same
	// /bytes/N for every N of NginxBodySizes (nginx cannot make up bodies).
	Nginx          bool
	NginxBodySizes []int64
	// HTTP3 also serves HTTP/3 (QUIC, quic-go) on UDP at the same port, with the same
	// chain; it implies TLSVersion "1.3" when none is set. The IW above applies to TCP
	// only: quic-go's initial window cannot be set (see server.ServeHTTP3).
	HTTP3 bool
	// Caddy serves with Debian's Caddy instead (HTTP/1.1, HTTP/2 and HTTP/3, TLS), the
	// same /bytes/N for every N of NginxBodySizes.
	Caddy bool
	// Tap sees every packet the link emulator reads from or writes to a TUN device
	// (device 0: the client's, 1: the server's), as captures at both ends would.
	Tap func(device int, data []byte, unixNs int64)
	// Page, when set, is a test page the server (built-in or nginx) serves beside
	// /bytes/N, its second host name (if it has one) at SecondPort.
	Page *server.Page
}

// Server is a lab path (client and server namespaces joined by the link
// emulator, package lab/labpath) with a server running in the server namespace.
type Server struct {
	// Netns is the client namespace's path, to measure from (a probe's Options.Netns).
	Netns string
	// ServerNamespace is the server namespace's name, as ip netns shows it (where
	// tune --netns changes the server's routes).
	ServerNamespace string
	// Addr is the server's address and port.
	Addr netip.AddrPort
	// Scheme is "http" or "https".
	Scheme string
	// RootCAs trust the server's chain; RootPEM is its root in PEM (curl's
	// --cacert). Both are empty without TLS.
	RootCAs *x509.CertPool
	RootPEM []byte
	// ChainBytes is the certificate chain's size as generated.
	ChainBytes int
	// SecondAddr is where the test page's second host name is served (see
	// Config.Page); invalid when the page has none.
	SecondAddr netip.AddrPort
	// Page is the test page served, its origins filled in; nil when none.
	Page *server.Page
	// Nginx is the nginx serving, when Config.Nginx (its access log names
	// each request's client port).
	Nginx *server.Nginx
	path  *labpath.Path
}

// URL returns the URL of path on the server, by name over TLS (with Resolve to
// reach it) and by address otherwise.
func (s *Server) URL(path string) string {
	if s.Scheme == "https" {
		return fmt.Sprintf("https://%s:%d%s", ServerName, s.Addr.Port(), path)
	}
	return fmt.Sprintf("http://%s%s", s.Addr, path)
}

// Resolve maps the server's names to its address (a probe's Options.Resolve).
func (s *Server) Resolve() map[string]netip.Addr {
	names := map[string]netip.Addr{ServerName + ":" + strconv.Itoa(int(s.Addr.Port())): s.Addr.Addr()}
	if s.SecondAddr.IsValid() {
		names[SecondServerName+":"+strconv.Itoa(int(s.SecondAddr.Port()))] = s.SecondAddr.Addr()
	}
	return names
}

// PageURL is the URL of the test page's document.
func (s *Server) PageURL() string {
	if s.Scheme == "https" {
		return s.URL(server.PageIndexPath)
	}
	return fmt.Sprintf("http://%s:%d%s", ServerName, s.Addr.Port(), server.PageIndexPath)
}

// origin is scheme://name:port, without a default port.
func origin(scheme, name string, port uint16) string {
	if scheme == "https" && port == 443 || scheme == "http" && port == 80 {
		return scheme + "://" + name
	}
	return fmt.Sprintf("%s://%s:%d", scheme, name, port)
}

// Close stops the server and the emulator and removes the namespaces.
func (s *Server) Close() error { return s.path.Close() }

// CloseAll removes every lab server of this process still up: those whose Close
// was never reached (after a test's failure, say).
func CloseAll() error { return labpath.CloseAll() }

// Start brings up a lab path (package lab/labpath) with the server cfg
// describes in its server namespace, and keeps it up until Close. It needs root.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	path, err := labpath.Start(ctx, labpath.Config{RTT: cfg.RTT, RateBitsPerSecond: cfg.RateBitsPerSecond, IPv6: cfg.IPv6,
		InitCwnd: cfg.IW, NoSlowStartAfterIdle: true, Tap: cfg.Tap})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			path.Close()
		}
	}()
	s := &Server{path: path, Netns: path.ClientNetns, ServerNamespace: path.ServerNamespace, Scheme: "http"}
	if (cfg.HTTP3 || cfg.Caddy) && cfg.TLSVersion == "" {
		cfg.TLSVersion = "1.3"
	}
	scfg := cfg.Server
	scfg.TLSVersion, scfg.HTTP2 = cfg.TLSVersion, cfg.HTTP2
	port := uint16(80)
	if cfg.TLSVersion != "" {
		port, s.Scheme = 443, "https"
		if scfg.Certificate, err = s.makeChain(cfg); err != nil {
			return nil, err
		}
	}
	s.Addr = netip.AddrPortFrom(path.ServerAddr, port)
	if cfg.Page != nil {
		if scfg.PageFiles, err = s.preparePage(cfg); err != nil {
			return nil, err
		}
	}
	o := server.OnPath{Kind: server.KindBuiltin, Addr: s.Addr, SecondAddr: s.SecondAddr, HTTP3: cfg.HTTP3, Config: scfg,
		BodySizes: cfg.NginxBodySizes, ServerName: ServerName}
	switch {
	case cfg.Caddy:
		o.Kind, o.HTTP3 = server.KindCaddy, false // Caddy serves HTTP/3 itself
	case cfg.Nginx:
		o.Kind = server.KindNginx
	}
	running, err := server.StartOnPath(ctx, path, o)
	s.Nginx = running.Nginx
	if err != nil {
		return nil, err
	}
	return s, nil
}

// makeChain generates the server's certificate chain (the second host name's too,
// when the page has one) and notes what a client needs to trust it.
func (s *Server) makeChain(cfg Config) (tls.Certificate, error) {
	chainBytes := cfg.ChainBytes
	if chainBytes == 0 {
		chainBytes = 4000
	}
	var more []string
	if cfg.Page != nil && cfg.Page.HasSecondHost() {
		more = []string{SecondServerName}
	}
	chain, err := server.NewChain(server.ChainConfig{ServerName: ServerName, MoreNames: more, Intermediates: 1, TargetBytes: chainBytes, Keys: cfg.Keys})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate chain of %d bytes: %w", chainBytes, err)
	}
	s.RootCAs, s.ChainBytes = chain.Roots, chain.CertificateMessageBytes
	s.RootPEM = chain.RootPEM()
	return chain.Certificate, nil
}

// preparePage fills the test page's origins (and the second host's address) and
// returns its files.
func (s *Server) preparePage(cfg Config) (map[string][]byte, error) {
	if cfg.Caddy || cfg.HTTP3 {
		return nil, errors.New("a test page is served by the built-in server or nginx, over TCP")
	}
	page := *cfg.Page
	page.FirstOrigin = origin(s.Scheme, ServerName, s.Addr.Port())
	if page.HasSecondHost() {
		second := uint16(SecondPort)
		if s.Scheme == "http" {
			second = SecondPortCleartext
		}
		s.SecondAddr = netip.AddrPortFrom(s.Addr.Addr(), second)
		page.SecondOrigin = origin(s.Scheme, SecondServerName, second)
	}
	files, err := page.Files()
	if err != nil {
		return nil, err
	}
	s.Page = &page
	return files, nil
}
