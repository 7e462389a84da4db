package lab

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/slowstart/slowstart/lab/labpath"
)

// A trial with Spec.ProxyUpstreamRTTNs puts a TCP-terminating proxy at the server's
// end of its path: the client's connection ends at the proxy (its own kernel
// socket, with the route's initcwnd and the namespace's congestion control), which
// opens one of its own to the origin server over a second emulated path and relays
// the bytes both ways as they come. What the client sees is the proxy's sending,
// paced by what reaches it from upstream: a CDN's edge, a load balancer, a corporate
// or VPN proxy. The kernel tap (Spec.KernelTruth) records the proxy's socket, so the
// truth the client's readings are judged against is the proxy's window.

// upstreamSpec is the origin's side of a proxied trial: a path of the upstream
// round trip, the kernel's default window, no loss, no bottleneck, no tap.
func (s Spec) upstreamSpec() Spec {
	up := Spec{RTTNs: s.ProxyUpstreamRTTNs, CC: s.CC, IPv6: s.IPv6, InitRwnd: 300, Seed: s.Seed + 1000}
	return up
}

// startProxy listens on addr in path's server namespace and relays every
// connection to origin, dialed with dial (from the upstream path's client
// namespace). It stops with the path.
func startProxy(path *labpath.Path, addr netip.AddrPort, dial func(ctx context.Context, network, address string) (net.Conn, error), origin string) error {
	ln, err := path.Listen(labpath.Server, "tcp", addr.String())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	path.OnClose(func() error {
		cancel()
		err := ln.Close()
		wg.Wait()
		return err
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { relay(ctx, c, dial, origin) })
		}
	})
	return nil
}

// relay carries one connection through the proxy: a connection of its own to the
// origin, bytes copied both ways as they arrive, each direction's end passed on.
func relay(ctx context.Context, client net.Conn, dial func(ctx context.Context, network, address string) (net.Conn, error), origin string) {
	defer client.Close()
	up, err := dial(ctx, "tcp", origin)
	if err != nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() {
		client.Close()
		up.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	copyHalf := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok && (err == nil || errors.Is(err, io.EOF)) {
			tcp.CloseWrite()
		}
	}
	wg.Go(func() { copyHalf(up, client) })
	copyHalf(client, up)
	wg.Wait()
}
