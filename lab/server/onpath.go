package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/netstack"
)

// Kinds of server StartOnPath runs.
const (
	KindBuiltin = "builtin" // this package's server (HTTP/1.1, HTTP/2, HTTP/3)
	KindNginx   = "nginx"   // Debian's nginx
	KindCaddy   = "caddy"   // Debian's Caddy (TLS only; HTTP/3 by itself)
	// KindNetstack is this package's server on gVisor's netstack (lab/netstack), a
	// TCP that is not Linux's, at an address of its own (Running.Addr).
	KindNetstack = "netstack"
)

// OnPath says which server to run in a lab path's server namespace, where, and how.
type OnPath struct {
	Kind string
	// Addr is where it listens: TCP, and UDP for HTTP/3.
	Addr netip.AddrPort
	// SecondAddr, when valid, is a second TCP address serving the same (a test
	// page's second host), for the built-in server and nginx.
	SecondAddr netip.AddrPort
	// HTTP3 also serves HTTP/3 with the built-in server on UDP at Addr (beside
	// the built-in server's or nginx's TCP); HTTP3Only serves only that.
	HTTP3, HTTP3Only bool
	// Config is the built-in server's behaviour; its TLS version, HTTP/2,
	// certificate and page files apply to nginx and Caddy too.
	Config Config
	// BodySizes are the /bytes/N bodies nginx and Caddy serve (they cannot make
	// them up); ECDHCurves is nginx's ssl_ecdh_curve (empty: its default).
	BodySizes  []int64
	ECDHCurves string
	// ServerName is the name Caddy serves (its certificate's).
	ServerName string
	// Netstack configures the netstack server's TCP (Kind netstack); Config.Nagle
	// turns its Nagle's algorithm on too.
	Netstack netstack.Options
}

// Running is a server StartOnPath started; the path stops it when it closes.
type Running struct {
	// Nginx is the nginx process (its access log), when Kind is nginx.
	Nginx *Nginx
	// Addr is where the server listens over TCP: OnPath.Addr, except for the
	// netstack server, which listens on OnPath.Addr's port at the stack's address.
	Addr netip.AddrPort
	// Netstack is the netstack server's stack, when Kind is netstack.
	Netstack *netstack.Stack
}

// StartOnPath starts the server o describes in path's server namespace, until
// the path closes (not until ctx ends: ctx bounds the start only).
func StartOnPath(ctx context.Context, path *labpath.Path, o OnPath) (Running, error) {
	run := Running{Addr: o.Addr}
	serveCtx := context.WithoutCancel(ctx)
	if o.HTTP3 || o.HTTP3Only {
		switch o.Kind {
		case KindCaddy:
			return run, errors.New("caddy serves HTTP/3 by itself")
		case KindNetstack:
			return run, errors.New("the netstack server serves TCP only: HTTP/3 runs on the built-in server or caddy")
		}
		pc, err := path.ListenPacket(labpath.Server, "udp", o.Addr.String())
		if err != nil {
			return run, err
		}
		path.OnClose(func() error { pc.Close(); return nil })
		cfg := o.Config
		path.Go(serveCtx, func(ctx context.Context) error { return ServeHTTP3(ctx, pc, cfg) })
		if o.HTTP3Only {
			return run, nil
		}
	}
	switch o.Kind {
	case KindBuiltin, "":
		addrs := []netip.AddrPort{o.Addr}
		if o.SecondAddr.IsValid() {
			addrs = append(addrs, o.SecondAddr)
		}
		for _, addr := range addrs {
			ln, err := path.Listen(labpath.Server, "tcp", addr.String())
			if err != nil {
				return run, err
			}
			cfg := o.Config
			path.Go(serveCtx, func(ctx context.Context) error { return Serve(ctx, ln, cfg) })
		}
	case KindNginx:
		ncfg := NginxConfig{
			Address:     o.Addr.String(),
			TLSVersion:  o.Config.TLSVersion,
			Certificate: o.Config.Certificate,
			HTTP2:       o.Config.HTTP2,
			BodySizes:   o.BodySizes,
			ECDHCurves:  o.ECDHCurves,
			PageFiles:   o.Config.PageFiles,
			Dial:        path.Dial,
		}
		if o.SecondAddr.IsValid() {
			ncfg.SecondAddress = o.SecondAddr.String()
		}
		ng, err := StartNginx(serveCtx, ncfg, path.WrapCommand(labpath.Server))
		if err != nil {
			return run, fmt.Errorf("starting nginx: %w", err)
		}
		path.OnClose(ng.Stop)
		run.Nginx = ng
	case KindCaddy:
		cd, err := StartCaddy(serveCtx, CaddyConfig{Address: o.Addr.String(), ServerName: o.ServerName,
			Certificate: o.Config.Certificate, BodySizes: o.BodySizes, Dial: path.Dial}, path.WrapCommand(labpath.Server))
		if err != nil {
			return run, fmt.Errorf("starting caddy: %w", err)
		}
		path.OnClose(cd.Stop)
	case KindNetstack:
		if o.SecondAddr.IsValid() {
			return run, errors.New("the netstack server has one address: no second host")
		}
		opts := o.Netstack
		opts.Nagle = opts.Nagle || o.Config.Nagle
		stack, err := netstack.Start(ctx, path, opts)
		if err != nil {
			return run, fmt.Errorf("starting netstack: %w", err)
		}
		ipv6 := o.Addr.Addr().Is6()
		ln, err := stack.Listen(o.Addr.Port(), ipv6)
		if err != nil {
			return run, err
		}
		// Corking is the kernel's (TCP_CORK on a *net.TCPConn): on gVisor's
		// connections the handler writes as net/http hands it the bytes.
		cfg := o.Config
		cfg.DisableCork = true
		path.Go(serveCtx, func(ctx context.Context) error { return Serve(ctx, ln, cfg) })
		run.Addr = netip.AddrPortFrom(stack.Addr(ipv6), o.Addr.Port())
		run.Netstack = stack
	default:
		return run, fmt.Errorf("server %q: use %s, %s, %s or %s", o.Kind, KindBuiltin, KindNginx, KindCaddy, KindNetstack)
	}
	return run, nil
}
