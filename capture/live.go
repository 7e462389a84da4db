package capture

import (
	"errors"
	"fmt"
	"net/netip"
)

// Live capture: the types every platform shares. The capture itself is in
// live_linux.go (AF_PACKET); other systems get an error saying live capture
// needs Linux (live_other.go).

// Errors OpenLive returns, wrapped with context; test them with errors.Is.
var (
	// ErrNoInterface: LiveOptions.Interface names no interface (in the chosen
	// network namespace).
	ErrNoInterface = errors.New("no such network interface")
	// ErrPermission: the system refused a packet socket.
	ErrPermission = errors.New("live capture needs CAP_NET_RAW: run as root or setcap cap_net_raw+ep")
	// ErrLiveUnsupported: the system has no AF_PACKET sockets.
	ErrLiveUnsupported = errors.New("live capture needs Linux (AF_PACKET sockets); capture with tcpdump -w and run analyze on the file")
)

// Defaults of LiveOptions.
const (
	DefaultSnaplen = 65535 // bytes kept per packet: all of it, even TSO/GRO super-packets
	// DefaultBufferBytes is the kernel receive buffer of the capture socket.
	// The kernel charges each queued packet its whole buffer (about 2-4 KB
	// for a full-sized one, whatever the snap length), so 64 MB holds about
	// 200 ms of 1 Gbit/s: at 8 MB, a busy two-core machine dropped a fifth of
	// the packets of 1 Gbit/s of mixed traffic (bench/live.sh), at 64 MB none.
	// The memory is the kernel's, and taken only while packets wait. Without
	// CAP_NET_ADMIN, net.core.rmem_max caps it.
	DefaultBufferBytes = 64 << 20
)

// LinkTypeNameRaw is LiveStats.LinkType: a live capture hands over packets
// from their IP header on, whatever the interface's link layer.
const LinkTypeNameRaw = "Raw"

// LiveOptions configure a live capture.
type LiveOptions struct {
	// Interface is the interface to capture on, e.g. "eth0"; required (see
	// RouteInterface for the one that carries traffic to an address).
	Interface string
	// Filter is applied in the kernel; the zero value captures all TCP.
	Filter Filter
	// Snaplen is how many bytes of each packet are kept, from the IP header
	// on (default DefaultSnaplen). Packet.PayloadLen stays right when it
	// cuts the payload.
	Snaplen int
	// BufferBytes is the kernel's room for packets the capture has not read
	// yet (default DefaultBufferBytes): the socket's receive buffer, or the
	// packet ring (Ring). Packets that arrive while it is full are dropped
	// and counted in LiveStats.KernelDrops.
	BufferBytes int
	// Ring reads through a packet ring of BufferBytes shared with the kernel
	// (PACKET_RX_RING, as libpcap reads): no system call and no copy a
	// packet, so that a busy machine keeps up with whole packets at 1 Gbit/s
	// (bench/live.sh), for a latency of a few milliseconds (the kernel hands
	// packets over in blocks, on a timer when they come slowly). The ring's
	// memory is taken at once, whatever the traffic: for long captures of
	// much of it (the live view). Without it (or where the kernel gives no
	// ring) packets wait in the socket's receive buffer, taken as they come.
	Ring bool
	// Netns is an optional path of a network namespace file (e.g.
	// /run/netns/NAME or /proc/PID/ns/net) to capture in; Interface is
	// looked up there. Empty: the namespace of the calling process.
	Netns string
}

// Filter selects TCP packets to or from one remote endpoint, and optionally
// one local port, in either direction. The zero value selects all TCP.
//
// A filter with a Remote address matches packets with that address at one
// end and, when set, Port as that end's port and LocalPort as the other's.
// Without a Remote the ports alone select (an extension: a remote port with
// any address). IPv4-mapped IPv6 addresses select IPv4 packets. IPv6 packets
// with extension headers before TCP are not matched; neither are IPv4
// fragments after the first (they carry no TCP header).
type Filter struct {
	Remote    netip.Addr // v4 or v6; the zero Addr matches any address
	Port      uint16     // the remote TCP port; 0 = any
	LocalPort uint16     // 0 = any
}

// String describes the filter the way tcpdump would write it.
func (f Filter) String() string {
	remote := f.Remote.Unmap()
	s := "tcp"
	if remote.IsValid() {
		s += " and host " + remote.String()
	}
	if f.Port != 0 {
		s += fmt.Sprintf(" and port %d", f.Port)
	}
	if f.LocalPort != 0 {
		s += fmt.Sprintf(" and port %d", f.LocalPort)
	}
	return s
}

// LiveStats describes a live capture so far.
type LiveStats struct {
	Interface string // the interface captured on
	LinkType  string // LinkTypeNameRaw: packets start at the IP header
	Snaplen   int    // bytes kept per packet
	// BufferBytes is the room the kernel granted: the packet ring's size, or
	// without a ring the receive buffer (which the kernel reports as twice the
	// size asked for, its bookkeeping included).
	BufferBytes int
	// Ring reports that packets are read through a packet ring
	// (LiveOptions.Ring, where the kernel gave one).
	Ring bool

	// Packets and Bytes count what the capture read from the kernel (the
	// packets that passed the filter; on loopback each packet once), Bytes
	// in original lengths.
	Packets int64
	Bytes   int64
	// TCP counts the packets decoded into a Packet; Undecodable those whose
	// headers were cut or malformed (Packets - TCP - Undecodable were other
	// protocols or fragments).
	TCP, Undecodable int64
	// KernelPackets and KernelDrops are the kernel's own counts of packets
	// that passed the filter, and of those it dropped for want of buffer
	// space (PACKET_STATISTICS). They are read at Stop (and by Stats while
	// capturing).
	KernelPackets, KernelDrops int64

	// ClampedTimestamps counts packets whose kernel timestamp was earlier
	// than the packet before them, and MaxClampNs is the largest such step
	// back. The kernel stamps outgoing and incoming packets on different
	// paths, so its queue order and its stamps can disagree by microseconds;
	// a live capture keeps the queue order and raises such a timestamp to
	// the previous one, so that timestamps never decrease.
	ClampedTimestamps int64
	MaxClampNs        int64
}
