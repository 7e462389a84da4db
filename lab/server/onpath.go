package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/slowstart/slowstart/lab/labpath"
)

// Kinds of server StartOnPath runs.
const (
	KindBuiltin = "builtin" // this package's server (HTTP/1.1, HTTP/2, HTTP/3)
	KindNginx   = "nginx"   // Debian's nginx
	KindCaddy   = "caddy"   // Debian's Caddy (TLS only; HTTP/3 by itself)
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
}

// Running is a server StartOnPath started; the path stops it when it closes.
type Running struct {
	// Nginx is the nginx process (its access log), when Kind is nginx.
	Nginx *Nginx
}

// StartOnPath starts the server o describes in path's server namespace, until
// the path closes (not until ctx ends: ctx bounds the start only).
func StartOnPath(ctx context.Context, path *labpath.Path, o OnPath) (Running, error) {
	var run Running
	serveCtx := context.WithoutCancel(ctx)
	if o.HTTP3 || o.HTTP3Only {
		if o.Kind == KindCaddy {
			return run, errors.New("caddy serves HTTP/3 by itself")
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
	default:
		return run, fmt.Errorf("server %q: use %s, %s or %s", o.Kind, KindBuiltin, KindNginx, KindCaddy)
	}
	return run, nil
}
