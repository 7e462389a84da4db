package netstack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/netlab"
)

// TUNName is the name of the stack's TUN device in the server namespace.
const TUNName = "netstack0"

// tunTxQueuePackets is the transmit queue of the stack's TUN device, as long as
// the path's own (netlab): the server namespace's kernel forwards a whole window
// into it at once.
const tunTxQueuePackets = 10000

// tunDevice is the stack's TUN device: the file this process reads and writes
// packets through. The device goes when the file closes.
type tunDevice struct {
	fd int
}

// openTUN makes the stack's TUN device in the path's server namespace, routes the
// stack's addresses to it there, turns forwarding on there, and routes the
// stack's addresses through the path in the client namespace.
func openTUN(path *labpath.Path, addr4, addr6 netip.Addr) (*tunDevice, error) {
	d := &tunDevice{fd: -1}
	err := path.Do(labpath.Server, func() error {
		var err error
		if d.fd, err = createTUN(TUNName); err != nil {
			return err
		}
		return configureServerSide(addr4, addr6, path.Config.IPv6)
	})
	if err == nil {
		err = path.Do(labpath.Client, func() error {
			return configureClientSide(path, addr4, addr6)
		})
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("netstack: %w", err), d.close())
	}
	return d, nil
}

// close closes the device's file, which removes the device and its routes.
func (d *tunDevice) close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	if err != nil {
		return fmt.Errorf("netstack: closing its TUN device: %w", err)
	}
	return nil
}

// createTUN creates the TUN device name in the calling thread's network
// namespace: layer 3, no packet information header, no virtio-net header (so no
// offloads: every packet is at most the MTU), closed on exec so that programs the
// lab starts (curl, nginx) do not keep it. gVisor's link endpoint makes the file
// non-blocking.
func createTUN(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/net/tun (is the tun module loaded?): %w", err)
	}
	request, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("TUN device name %q: %w", name, err)
	}
	request.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, request); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("create TUN device %s: %w", name, err)
	}
	return fd, nil
}

// configureServerSide, in the server namespace: brings the stack's device up
// with the path's MTU, routes the stack's addresses to it, and turns on
// forwarding, so that the namespace's kernel only passes packets between the
// path and the stack. IPv6 forwarding is turned on only on an IPv6 path: it
// makes the kernel join the all-routers group and announce it (an MLD report
// that crosses the path).
func configureServerSide(addr4, addr6 netip.Addr, ipv6 bool) error {
	handle, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open netlink socket: %w", err)
	}
	defer handle.Close()
	link, err := handle.LinkByName(TUNName)
	if err != nil {
		return fmt.Errorf("find %s: %w", TUNName, err)
	}
	if err := handle.LinkSetMTU(link, labpath.MTU); err != nil {
		return fmt.Errorf("set %s MTU to %d bytes: %w", TUNName, labpath.MTU, err)
	}
	if err := handle.LinkSetTxQLen(link, tunTxQueuePackets); err != nil {
		return fmt.Errorf("set %s transmit queue to %d packets: %w", TUNName, tunTxQueuePackets, err)
	}
	if err := handle.LinkSetIP6AddrGenMode(link, nl.IN6_ADDR_GEN_MODE_NONE); err != nil {
		return fmt.Errorf("turn off IPv6 address generation on %s: %w", TUNName, err)
	}
	if err := handle.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring %s up: %w", TUNName, err)
	}
	for _, addr := range []netip.Addr{addr4, addr6} {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: hostPrefix(addr)}
		if addr.Is4() {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := handle.RouteAdd(route); err != nil {
			return fmt.Errorf("add route to %s via %s: %w", addr, TUNName, err)
		}
	}
	forward := []string{"ipv4/ip_forward"}
	if ipv6 {
		forward = append(forward, "ipv6/conf/all/forwarding")
	}
	for _, key := range forward {
		if err := writeSysctl(key, "1"); err != nil {
			return err
		}
	}
	return nil
}

// configureClientSide, in the client namespace: routes the stack's addresses
// through the path's TUN device, as the route to the kernel's server is, with
// the same initial receive window.
func configureClientSide(path *labpath.Path, addr4, addr6 netip.Addr) error {
	handle, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open netlink socket: %w", err)
	}
	defer handle.Close()
	link, err := handle.LinkByName(netlab.TUNName)
	if err != nil {
		return fmt.Errorf("find %s: %w", netlab.TUNName, err)
	}
	for _, addr := range []netip.Addr{addr4, addr6} {
		route := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       hostPrefix(addr),
			Src:       net.IP(path.Addr(labpath.Client, addr.Is6()).AsSlice()),
			InitRwnd:  path.Config.InitRwnd,
		}
		if addr.Is4() {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := handle.RouteAdd(route); err != nil {
			return fmt.Errorf("add route to %s via %s in the client namespace: %w", addr, netlab.TUNName, err)
		}
	}
	return nil
}

// hostPrefix returns the single-address prefix (/32 or /128) of addr.
func hostPrefix(addr netip.Addr) *net.IPNet {
	return &net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
}

// writeSysctl writes value to /proc/sys/net/key for the calling thread's network
// namespace.
func writeSysctl(key, value string) error {
	file := filepath.Join("/proc/sys/net", key)
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, file, err)
	}
	return nil
}
