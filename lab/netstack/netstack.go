// Package netstack puts a TCP sender that is not Linux on a lab path: gVisor's
// netstack, a TCP/IP stack written in Go, running inside this process. It has its
// own initial window (a fixed 10 segments), congestion control (Reno or CUBIC),
// Nagle's algorithm, SACK, timestamps and MSS choice, so the lab's ground truth
// can cover a second implementation.
//
// The stack gets a TUN device of its own in the path's server namespace and an
// address of its own (the server's address + 1: 198.18.x.3, 2001:2:0:x::3). The
// server namespace's kernel only forwards between the path's TUN device and the
// stack's, and the client namespace gets a route to that address beside the one
// to the kernel's server. So the client reaches the stack through the same
// emulated path, and the emulator's captures see exactly the segments netstack
// sent (with the IP TTL one lower: the kernel forwarded them).
//
//	client ns ── tun0 ◄─► emulator ◄─► tun0 ── server ns (forwards) ── netstack0 ◄─► gVisor (this process)
//
// It listens (Stack.Listen gives a net.Listener) and serves nothing itself:
// package lab/server serves HTTP on the listener. It does not change the path's
// emulator and analyzes nothing.
//
// Everything here needs root and Linux.
package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/slowstart/slowstart/lab/labpath"
)

// InitialWindowSegments is netstack's initial congestion window in segments
// (gVisor's tcp.InitialCwnd, RFC 6928's IW10): a constant of the library that no
// option changes.
const InitialWindowSegments = tcp.InitialCwnd

// Congestion controls netstack offers.
const (
	CongestionCubic = "cubic"
	CongestionReno  = "reno"
)

// Options configure the stack. The zero value is CUBIC, Nagle off (TCP_NODELAY,
// Go's default), SACK on, and an announced MSS that fills the path's MTU.
type Options struct {
	// CongestionControl is "cubic" (the default here; gVisor's own default is
	// Reno) or "reno".
	CongestionControl string
	// Nagle turns Nagle's algorithm on for every connection (TCP_NODELAY off).
	// netstack's is RFC 896's: a segment shorter than the MSS waits while any
	// data is unacknowledged.
	Nagle bool
	// MSS is the MSS the listeners announce in their SYN/ACKs (TCP_MAXSEG), from
	// 88 (TCP_MIN_MSS, as in Linux) to 1460; 0: the path's MTU less 40 bytes.
	// netstack's segments are sized by the peer's MSS, not by this one.
	MSS int
	// NoSACK turns SACK off (the stack then neither offers nor accepts it).
	NoSACK bool
	// Probe, when set, is called with the connection's sender state after every
	// segment the stack receives (gVisor's TCP probe): its own congestion window,
	// from the inside. It is called with the connection locked and must return
	// quickly.
	Probe func(Sample)
}

// Sample is a connection's sender state after a segment it received.
type Sample struct {
	// At is when the segment was received (the process's monotonic clock, as
	// time.Now's).
	At time.Time
	// Local and Remote are the connection's two ends.
	Local, Remote netip.AddrPort
	// CwndSegments is the congestion window and OutstandingSegments the segments
	// sent and not yet acknowledged, both in packets (netstack counts its window
	// in segments, whatever their size); SsthreshSegments is the slow-start
	// threshold (a huge number until the first loss).
	CwndSegments, OutstandingSegments, SsthreshSegments int
	// SndUna and SndNxt are the first unacknowledged and the next sequence
	// numbers; SndWndBytes is the peer's receive window.
	SndUna, SndNxt uint32
	SndWndBytes    int
	// MaxPayloadBytes is the largest payload the sender puts in a segment: the
	// peer's MSS less the largest TCP options it may carry (timestamps and SACK
	// blocks).
	MaxPayloadBytes int
	// SRTT is the smoothed RTT (0 before a sample).
	SRTT time.Duration
}

// Validate checks the options.
func (o Options) Validate() error {
	switch o.CongestionControl {
	case "", CongestionCubic, CongestionReno:
	default:
		return fmt.Errorf("congestion control %q: netstack offers %s and %s", o.CongestionControl, CongestionCubic, CongestionReno)
	}
	if o.MSS != 0 && (o.MSS < header.TCPMinimumMSS || o.MSS > labpath.MTU-40) {
		return fmt.Errorf("MSS %d: use %d to %d bytes, or 0 for the path's", o.MSS, header.TCPMinimumMSS, labpath.MTU-40)
	}
	return nil
}

// Stack is netstack running on a path; the path stops it when it closes.
type Stack struct {
	// Addr4 and Addr6 are the stack's addresses; the client reaches them through
	// the emulated path.
	Addr4, Addr6 netip.Addr

	opts  Options
	stack *stack.Stack
	tun   *tunDevice

	closeOnce sync.Once
	closeErr  error
}

// nicID is the stack's one NIC.
const nicID tcpip.NICID = 1

// Start brings netstack up on path: its TUN device and routes in the server
// namespace (which forwards), its route in the client namespace, and the stack
// in this process. Its teardown is registered with the path (Path.OnClose);
// servers started on it afterwards are stopped before it. On error nothing of it
// is left behind.
func Start(ctx context.Context, path *labpath.Path, opts Options) (*Stack, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Stack{
		Addr4: path.Addr(labpath.Server, false).Next(),
		Addr6: path.Addr(labpath.Server, true).Next(),
		opts:  opts,
	}
	var err error
	if s.tun, err = openTUN(path, s.Addr4, s.Addr6); err != nil {
		return nil, err
	}
	if err := s.startStack(); err != nil {
		return nil, errors.Join(err, s.tun.close())
	}
	path.OnClose(s.Close)
	return s, nil
}

// startStack makes gVisor's stack on the TUN device.
func (s *Stack) startStack() error {
	var probe tcp.TCPProbeFunc
	if s.opts.Probe != nil {
		probe = s.probe
	}
	s.stack = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocolProbe(probe)},
	})
	cc := tcpip.CongestionControlOption(CongestionCubic)
	if s.opts.CongestionControl != "" {
		cc = tcpip.CongestionControlOption(s.opts.CongestionControl)
	}
	sack := tcpip.TCPSACKEnabled(!s.opts.NoSACK)
	delay := tcpip.TCPDelayEnabled(s.opts.Nagle)
	for name, opt := range map[string]tcpip.SettableTransportProtocolOption{"congestion control": &cc, "SACK": &sack, "Nagle": &delay} {
		if err := s.stack.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			s.stack.Close()
			return fmt.Errorf("netstack: setting %s: %s", name, err)
		}
	}
	link, err := fdbased.New(&fdbased.Options{FDs: []int{s.tun.fd}, MTU: uint32(labpath.MTU)})
	if err != nil {
		s.stack.Close()
		return fmt.Errorf("netstack: link endpoint on the TUN device: %w", err)
	}
	if err := s.stack.CreateNIC(nicID, link); err != nil {
		s.stack.Close()
		return fmt.Errorf("netstack: creating its NIC: %s", err)
	}
	for _, addr := range []netip.Addr{s.Addr4, s.Addr6} {
		protocol := ipv4.ProtocolNumber
		if addr.Is6() {
			protocol = ipv6.ProtocolNumber
		}
		pa := tcpip.ProtocolAddress{Protocol: protocol, AddressWithPrefix: tcpip.AddrFromSlice(addr.AsSlice()).WithPrefix()}
		if err := s.stack.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
			s.closeStack()
			return fmt.Errorf("netstack: adding address %s: %s", addr, err)
		}
	}
	// Everything leaves by the one NIC; the server namespace's kernel forwards it.
	s.stack.SetRouteTable([]tcpip.Route{
		{Destination: header.IPv4EmptySubnet, NIC: nicID},
		{Destination: header.IPv6EmptySubnet, NIC: nicID},
	})
	return nil
}

func (s *Stack) probe(state *tcp.TCPEndpointState) {
	snd := state.Sender
	id := state.ID
	s.opts.Probe(Sample{
		At:                  time.Now(),
		Local:               addrPort(id.LocalAddress, id.LocalPort),
		Remote:              addrPort(id.RemoteAddress, id.RemotePort),
		CwndSegments:        snd.SndCwnd,
		OutstandingSegments: snd.Outstanding,
		SsthreshSegments:    snd.Ssthresh,
		SndUna:              uint32(snd.SndUna),
		SndNxt:              uint32(snd.SndNxt),
		SndWndBytes:         int(snd.SndWnd),
		MaxPayloadBytes:     snd.MaxPayloadSize,
		SRTT:                snd.RTTState.SRTT,
	})
}

func addrPort(addr tcpip.Address, port uint16) netip.AddrPort {
	a, _ := netip.AddrFromSlice(addr.AsSlice())
	return netip.AddrPortFrom(a.Unmap(), port)
}

// Addr returns the stack's IPv4 address, or its IPv6 one when ipv6 is true.
func (s *Stack) Addr(ipv6 bool) netip.Addr {
	if ipv6 {
		return s.Addr6
	}
	return s.Addr4
}

// Listen listens on TCP port of the stack's address (IPv6 when overIPv6 is true),
// announcing Options.MSS. The listener's connections are gVisor's (gonet): they
// are not *net.TCPConn. Close it, or let the server that serves on it close it.
func (s *Stack) Listen(port uint16, overIPv6 bool) (net.Listener, error) {
	addr := s.Addr(overIPv6)
	protocol := ipv4.ProtocolNumber
	if overIPv6 {
		protocol = ipv6.ProtocolNumber
	}
	var wq waiter.Queue
	ep, tcpErr := s.stack.NewEndpoint(tcp.ProtocolNumber, protocol, &wq)
	if tcpErr != nil {
		return nil, fmt.Errorf("netstack: new TCP endpoint: %s", tcpErr)
	}
	fail := func(what string, tcpErr tcpip.Error) (net.Listener, error) {
		ep.Close()
		return nil, fmt.Errorf("netstack: %s %s: %s", what, netip.AddrPortFrom(addr, port), tcpErr)
	}
	if s.opts.MSS > 0 {
		if tcpErr := ep.SetSockOptInt(tcpip.MaxSegOption, s.opts.MSS); tcpErr != nil {
			return fail(fmt.Sprintf("setting MSS %d on", s.opts.MSS), tcpErr)
		}
	}
	if tcpErr := ep.Bind(tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(addr.AsSlice()), Port: port}); tcpErr != nil {
		return fail("binding", tcpErr)
	}
	if tcpErr := ep.Listen(listenBacklog); tcpErr != nil {
		return fail("listening on", tcpErr)
	}
	return gonet.NewTCPListener(s.stack, &wq, ep), nil
}

// listenBacklog is the listeners' backlog (a lab trial makes a few connections).
const listenBacklog = 128

// Close stops the stack and removes its TUN device (its routes go with it).
// Later calls return the first's result.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		s.closeStack()
		s.closeErr = s.tun.close()
	})
	return s.closeErr
}

// closeStack closes every endpoint and the NIC, and waits for the stack's
// goroutines to end.
func (s *Stack) closeStack() {
	s.stack.Close()
	s.stack.Wait()
}
