package ktcp

import (
	"fmt"
	"net/netip"
)

// Family selects connections by IP version.
type Family uint8

// The families a Filter may select. An IPv4 connection accepted on an IPv6
// socket (IPv4-mapped addresses) counts as IPv4.
const (
	AnyFamily Family = iota
	IPv4
	IPv6
)

// Filter selects the sockets whose events are delivered. The kernel applies it
// before it writes anything to the ring buffer, so events of other sockets cost
// a few instructions and no ring space. A socket matches when it matches every
// field that is set; the zero Filter selects every TCP socket of the machine.
type Filter struct {
	// LocalPorts selects sockets whose local port is one of these (a server's
	// listening ports).
	LocalPorts []uint16
	// RemotePorts selects sockets whose remote port is one of these (a client's
	// connections to a service).
	RemotePorts []uint16
	// LocalAddrs selects sockets whose local address is one of these (IPv4 ones
	// also match IPv4-mapped addresses of IPv6 sockets).
	LocalAddrs []netip.Addr
	// Netns selects sockets of these network namespaces, by inode number
	// (NetnsInode). Tracepoints see every namespace of the machine.
	Netns []uint32
	// Family selects IPv4 or IPv6 connections; AnyFamily: both.
	Family Family
}

// maxNetns bounds Filter.Netns: the namespaces are compared one by one in the
// program.
const maxNetns = 64

func (f Filter) validate() error {
	if len(f.Netns) > maxNetns {
		return fmt.Errorf("ktcp: filter on %d network namespaces: at most %d", len(f.Netns), maxNetns)
	}
	if f.Family > IPv6 {
		return fmt.Errorf("ktcp: unknown family %d in the filter", f.Family)
	}
	for _, a := range f.LocalAddrs {
		if !a.IsValid() {
			return fmt.Errorf("ktcp: an invalid address in the filter's LocalAddrs")
		}
	}
	return nil
}

// addrKey is how the program keys a local address: 16 bytes, IPv4 as
// IPv4-mapped IPv6.
func addrKey(a netip.Addr) [16]byte {
	return a.As16() // As16 of an IPv4 address is its IPv4-mapped form
}
