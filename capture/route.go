//go:build linux

package capture

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// RouteInterface returns the interface and source address that the kernel's
// route to dst uses in the network namespace of the calling process (like
// `ip route get DST`): the interface to capture on to see a connection to dst.
// src is the zero Addr when the route names no preferred source.
func RouteInterface(dst netip.Addr) (iface string, src netip.Addr, err error) {
	return routeInterface(netlink.RouteGet, netlink.LinkByIndex, dst)
}

// RouteInterfaceIn is RouteInterface in the network namespace whose file is
// netnsPath (e.g. /run/netns/NAME), as LiveOptions.Netns names it.
func RouteInterfaceIn(netnsPath string, dst netip.Addr) (iface string, src netip.Addr, err error) {
	if netnsPath == "" {
		return RouteInterface(dst)
	}
	ns, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("capture: opening network namespace %s (see ip netns list): %w", netnsPath, err)
	}
	defer ns.Close()
	handle, err := netlink.NewHandleAt(ns)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("capture: netlink in network namespace %s: %w", netnsPath, err)
	}
	defer handle.Close()
	return routeInterface(handle.RouteGet, handle.LinkByIndex, dst)
}

func routeInterface(routeGet func(net.IP) ([]netlink.Route, error), linkByIndex func(int) (netlink.Link, error),
	dst netip.Addr) (string, netip.Addr, error) {
	dst = dst.Unmap()
	if !dst.IsValid() {
		return "", netip.Addr{}, errors.New("capture: route lookup: no destination address")
	}
	routes, err := routeGet(net.IP(dst.AsSlice()))
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("capture: no route to %s (see ip route get %s): %w", dst, dst, err)
	}
	if len(routes) == 0 || routes[0].LinkIndex == 0 {
		return "", netip.Addr{}, fmt.Errorf("capture: the route to %s names no interface (see ip route get %s)", dst, dst)
	}
	link, err := linkByIndex(routes[0].LinkIndex)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("capture: interface %d of the route to %s: %w", routes[0].LinkIndex, dst, err)
	}
	var src netip.Addr
	if a, ok := netip.AddrFromSlice(routes[0].Src); ok {
		src = a.Unmap()
	}
	return link.Attrs().Name, src, nil
}
