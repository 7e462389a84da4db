package probe

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/server"
)

// LabServerName is the name on the lab server's certificate; probes reach it
// with Options.Resolve, as a user would with --resolve.
const LabServerName = "lab.slowstart.test"

// LabSecondServerName is a test page's second host name (LabServerConfig.Page):
// another origin on the same server, at port LabSecondPort (TLS) or
// LabSecondPortCleartext, so a browser opens connections of its own to it.
const (
	LabSecondServerName    = "static.slowstart.test"
	LabSecondPort          = 8443
	LabSecondPortCleartext = 8080
)

// LabServerConfig describes an emulated far-away server.
type LabServerConfig struct {
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
	// /bytes/N, its second host name (if it has one) at LabSecondPort.
	Page *server.Page
}

// LabServer is a lab trial (client and server namespaces joined by the link
// emulator) with the built-in server running in the server namespace.
type LabServer struct {
	// Netns is the client namespace's path, for Options.Netns.
	Netns string
	// Addr is the server's address and port.
	Addr netip.AddrPort
	// Scheme is "http" or "https".
	Scheme string
	// RootCAs trust the server's chain.
	RootCAs *x509.CertPool
	// ChainBytes is the certificate chain's size as generated.
	ChainBytes int
	// SecondAddr is where the test page's second host name is served (see
	// LabServerConfig.Page); invalid when the page has none.
	SecondAddr netip.AddrPort
	// Page is the test page served, its origins filled in; nil when none.
	Page *server.Page
	// Nginx is the nginx serving, when LabServerConfig.Nginx (its access log names
	// each request's client port).
	Nginx     *server.Nginx
	rootCerts []*x509.Certificate
	trial     *netlab.Trial
	stop      func() error
}

// URL returns the URL of path on the server, by name over TLS (with Resolve to
// reach it) and by address otherwise.
func (s *LabServer) URL(path string) string {
	if s.Scheme == "https" {
		return fmt.Sprintf("https://%s:%d%s", LabServerName, s.Addr.Port(), path)
	}
	return fmt.Sprintf("http://%s%s", s.Addr, path)
}

// Resolve maps the server's names to its address, for Options.Resolve.
func (s *LabServer) Resolve() map[string]netip.Addr {
	names := map[string]netip.Addr{LabServerName + ":" + strconv.Itoa(int(s.Addr.Port())): s.Addr.Addr()}
	if s.SecondAddr.IsValid() {
		names[LabSecondServerName+":"+strconv.Itoa(int(s.SecondAddr.Port()))] = s.SecondAddr.Addr()
	}
	return names
}

// PageURL is the URL of the test page's document.
func (s *LabServer) PageURL() string {
	if s.Scheme == "https" {
		return s.URL(server.PageIndexPath)
	}
	return fmt.Sprintf("http://%s:%d%s", LabServerName, s.Addr.Port(), server.PageIndexPath)
}

// origin is scheme://name:port, without a default port.
func origin(scheme, name string, port uint16) string {
	if scheme == "https" && port == 443 || scheme == "http" && port == 80 {
		return scheme + "://" + name
	}
	return fmt.Sprintf("%s://%s:%d", scheme, name, port)
}

// Close stops the server and the emulator and removes the namespaces.
func (s *LabServer) Close() error { return s.stop() }

// StartLabServer brings up a lab trial with the built-in server and keeps it up
// until Close. It needs root.
func StartLabServer(ctx context.Context, cfg LabServerConfig) (_ *LabServer, err error) {
	trial, err := netlab.Create(ctx, netlab.Options{InitCwnd: cfg.IW, CongestionControl: netlab.CongestionCubic, NoSlowStartAfterIdle: true})
	if err != nil {
		return nil, err
	}
	var cleanups []func() error
	stop := func() error {
		var errs []error
		for i := len(cleanups) - 1; i >= 0; i-- {
			errs = append(errs, cleanups[i]())
		}
		errs = append(errs, trial.Close())
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()

	oneWay := cfg.RTT.Nanoseconds() / 2
	mk := func(seed uint64) link.Config {
		c := link.Config{DelayNs: oneWay, RateBitsPerSecond: cfg.RateBitsPerSecond, Seed: seed}
		if cfg.RateBitsPerSecond > 0 {
			c.Queue, _ = link.DefaultQueue(cfg.RateBitsPerSecond, cfg.RTT.Nanoseconds(), netlab.DefaultMTU)
		}
		return c
	}
	clientDev, err := link.NewTUN(trial.ClientTUN)
	if err != nil {
		return nil, err
	}
	serverDev, err := link.NewTUN(trial.ServerTUN)
	if err != nil {
		return nil, err
	}
	linkCtx, stopLink := context.WithCancel(context.WithoutCancel(ctx))
	linkDone := make(chan error, 1)
	go func() {
		_, err := link.Run(linkCtx, clientDev, serverDev, mk(1), mk(2), link.RunOptions{EarlyWakeNs: -1, Tap: cfg.Tap})
		linkDone <- err
	}()
	cleanups = append(cleanups, func() error {
		stopLink()
		if err := <-linkDone; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("link emulator: %w", err)
		}
		return nil
	})

	s := &LabServer{trial: trial, Netns: trial.NamespacePath(netlab.Client), Scheme: "http"}
	port := uint16(80)
	scfg := cfg.Server
	if (cfg.HTTP3 || cfg.Caddy) && cfg.TLSVersion == "" {
		cfg.TLSVersion = "1.3"
	}
	scfg.TLSVersion, scfg.HTTP2 = cfg.TLSVersion, cfg.HTTP2
	if cfg.TLSVersion != "" {
		port, s.Scheme = 443, "https"
		chainBytes := cfg.ChainBytes
		if chainBytes == 0 {
			chainBytes = 4000
		}
		var more []string
		if cfg.Page != nil && cfg.Page.HasSecondHost() {
			more = []string{LabSecondServerName}
		}
		chain, err := server.NewChain(server.ChainConfig{ServerName: LabServerName, MoreNames: more, Intermediates: 1, TargetBytes: chainBytes, Keys: cfg.Keys})
		if err != nil {
			return nil, fmt.Errorf("certificate chain of %d bytes: %w", chainBytes, err)
		}
		scfg.Certificate = chain.Certificate
		s.RootCAs, s.ChainBytes = chain.Roots, chain.CertificateMessageBytes
		s.rootCerts = []*x509.Certificate{chain.Root}
	}
	s.Addr = netip.AddrPortFrom(trial.Addr(netlab.Server, cfg.IPv6), port)
	if cfg.Page != nil {
		if cfg.Caddy || cfg.HTTP3 {
			return nil, errors.New("a test page is served by the built-in server or nginx, over TCP")
		}
		page := *cfg.Page
		page.FirstOrigin = origin(s.Scheme, LabServerName, port)
		if page.HasSecondHost() {
			second := uint16(LabSecondPort)
			if s.Scheme == "http" {
				second = LabSecondPortCleartext
			}
			s.SecondAddr = netip.AddrPortFrom(s.Addr.Addr(), second)
			page.SecondOrigin = origin(s.Scheme, LabSecondServerName, second)
		}
		files, err := page.Files()
		if err != nil {
			return nil, err
		}
		s.Page, scfg.PageFiles = &page, files
	}
	if cfg.Caddy {
		cd, err := server.StartCaddy(ctx, server.CaddyConfig{Address: s.Addr.String(), ServerName: LabServerName,
			Certificate: scfg.Certificate, BodySizes: cfg.NginxBodySizes, Dial: trial.DialFunc(netlab.Client, &net.Dialer{})},
			trial.WrapCommand(netlab.Server))
		if err != nil {
			return nil, fmt.Errorf("starting caddy: %w", err)
		}
		cleanups = append(cleanups, cd.Stop)
		s.stop = stop
		return s, nil
	}
	if cfg.HTTP3 {
		pc, err := trial.ListenPacket(netlab.Server, "udp", s.Addr.String())
		if err != nil {
			return nil, err
		}
		h3Ctx, stopH3 := context.WithCancel(context.WithoutCancel(ctx))
		h3Done := make(chan error, 1)
		go func() { h3Done <- server.ServeHTTP3(h3Ctx, pc, scfg) }()
		cleanups = append(cleanups, func() error { stopH3(); err := <-h3Done; pc.Close(); return err })
	}
	if cfg.Nginx {
		// nginx lives until Close, not until ctx ends (StartNginx stops it then).
		ncfg := server.NginxConfig{
			Address:     s.Addr.String(),
			TLSVersion:  cfg.TLSVersion,
			Certificate: scfg.Certificate,
			HTTP2:       cfg.HTTP2,
			BodySizes:   cfg.NginxBodySizes,
			Dial:        trial.DialFunc(netlab.Client, &net.Dialer{}),
			PageFiles:   scfg.PageFiles,
		}
		if s.SecondAddr.IsValid() {
			ncfg.SecondAddress = s.SecondAddr.String()
		}
		ng, err := server.StartNginx(context.WithoutCancel(ctx), ncfg, trial.WrapCommand(netlab.Server))
		if err != nil {
			return nil, fmt.Errorf("starting nginx: %w", err)
		}
		s.Nginx = ng
		cleanups = append(cleanups, ng.Stop)
		s.stop = stop
		return s, nil
	}
	addrs := []netip.AddrPort{s.Addr}
	if s.SecondAddr.IsValid() {
		addrs = append(addrs, s.SecondAddr)
	}
	for _, addr := range addrs {
		ln, err := trial.Listen(netlab.Server, "tcp", addr.String())
		if err != nil {
			return nil, err
		}
		serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
		served := make(chan error, 1)
		go func() { served <- server.Serve(serveCtx, ln, scfg) }()
		cleanups = append(cleanups, func() error { stopServe(); return <-served })
	}
	s.stop = stop
	return s, nil
}
