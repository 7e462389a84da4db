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
	rootCerts  []*x509.Certificate
	trial      *netlab.Trial
	stop       func() error
}

// URL returns the URL of path on the server, by name over TLS (with Resolve to
// reach it) and by address otherwise.
func (s *LabServer) URL(path string) string {
	if s.Scheme == "https" {
		return fmt.Sprintf("https://%s:%d%s", LabServerName, s.Addr.Port(), path)
	}
	return fmt.Sprintf("http://%s%s", s.Addr, path)
}

// Resolve maps the server's name to its address, for Options.Resolve.
func (s *LabServer) Resolve() map[string]netip.Addr {
	return map[string]netip.Addr{LabServerName + ":" + strconv.Itoa(int(s.Addr.Port())): s.Addr.Addr()}
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
		chain, err := server.NewChain(server.ChainConfig{ServerName: LabServerName, Intermediates: 1, TargetBytes: chainBytes, Keys: cfg.Keys})
		if err != nil {
			return nil, fmt.Errorf("certificate chain of %d bytes: %w", chainBytes, err)
		}
		scfg.Certificate = chain.Certificate
		s.RootCAs, s.ChainBytes = chain.Roots, chain.CertificateMessageBytes
		s.rootCerts = []*x509.Certificate{chain.Root}
	}
	s.Addr = netip.AddrPortFrom(trial.Addr(netlab.Server, cfg.IPv6), port)
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
		ng, err := server.StartNginx(context.WithoutCancel(ctx), server.NginxConfig{
			Address:     s.Addr.String(),
			TLSVersion:  cfg.TLSVersion,
			Certificate: scfg.Certificate,
			HTTP2:       cfg.HTTP2,
			BodySizes:   cfg.NginxBodySizes,
			Dial:        trial.DialFunc(netlab.Client, &net.Dialer{}),
		}, trial.WrapCommand(netlab.Server))
		if err != nil {
			return nil, fmt.Errorf("starting nginx: %w", err)
		}
		cleanups = append(cleanups, ng.Stop)
		s.stop = stop
		return s, nil
	}
	ln, err := trial.Listen(netlab.Server, "tcp", s.Addr.String())
	if err != nil {
		return nil, err
	}
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- server.Serve(serveCtx, ln, scfg) }()
	cleanups = append(cleanups, func() error { stopServe(); return <-served })
	s.stop = stop
	return s, nil
}
