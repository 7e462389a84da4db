package netlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Side names one of a trial's two namespaces.
type Side int

// The two sides of a trial.
const (
	Client Side = iota
	Server
)

// String returns "client" or "server".
func (s Side) String() string {
	switch s {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return fmt.Sprintf("Side(%d)", int(s))
}

// suffix ends the side's namespace name.
func (s Side) suffix() string {
	if s == Server {
		return "s"
	}
	return "c"
}

func (s Side) valid() bool { return s == Client || s == Server }

// Trial is one client/server pair of network namespaces joined through two TUN
// devices. The fields are set by Create and must not be changed. A Trial is safe
// for concurrent use; Close it (or call CloseAll) when done.
type Trial struct {
	// ClientNamespace and ServerNamespace are the namespace names, as shown by
	// `ip netns list` and accepted by `ip netns exec`.
	ClientNamespace, ServerNamespace string
	// ClientTUN and ServerTUN are the process's ends of the TUN devices: every Read
	// returns one IP packet (no packet-information header) that the namespace sent,
	// and every Write delivers one IP packet into the namespace. They belong to the
	// Trial: Close closes them, so stop reading them first.
	ClientTUN, ServerTUN *os.File
	// ClientAddr and ServerAddr are the IPv4 addresses of the two ends.
	ClientAddr, ServerAddr netip.Addr
	// ClientAddr6 and ServerAddr6 are the IPv6 addresses of the two ends.
	ClientAddr6, ServerAddr6 netip.Addr
	// Options are the options the trial was made with, defaults filled in.
	Options Options

	registry  *registry
	closeOnce sync.Once
	closeErr  error

	// mu guards namespaces and closed, and the TUN files while Create runs.
	mu         sync.Mutex
	namespaces [2]netns.NsHandle // indexed by Side; netns.None() until made and after Close
	closed     bool
}

// Namespace returns the name of the side's network namespace.
func (t *Trial) Namespace(side Side) string {
	if side == Server {
		return t.ServerNamespace
	}
	return t.ClientNamespace
}

// NamespacePath returns the file that names the side's network namespace, for
// tools that take one (nsenter --net=PATH).
func (t *Trial) NamespacePath(side Side) string {
	return filepath.Join(NetnsDir, t.Namespace(side))
}

// TUN returns the process's end of the side's TUN device.
func (t *Trial) TUN(side Side) *os.File {
	if side == Server {
		return t.ServerTUN
	}
	return t.ClientTUN
}

// Addr returns the side's IPv4 address, or its IPv6 address when ipv6 is true.
func (t *Trial) Addr(side Side, ipv6 bool) netip.Addr {
	switch {
	case side == Server && ipv6:
		return t.ServerAddr6
	case side == Server:
		return t.ServerAddr
	case ipv6:
		return t.ClientAddr6
	}
	return t.ClientAddr
}

// Create makes a trial's namespaces, TUN devices, addresses, routes and sysctls
// as opts says. On error, nothing of the trial is left behind. The first Create
// of a process also removes what dead processes left (see Clean).
func Create(ctx context.Context, opts Options) (*Trial, error) {
	return processTrials.create(ctx, opts)
}

func (r *registry) create(ctx context.Context, opts Options) (_ *Trial, err error) {
	opts, err = opts.resolved()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("netlab: create trial: %w", err)
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	if err := r.allowCongestionControl(opts.CongestionControl); err != nil {
		return nil, err
	}

	sequence := r.nextSequence()
	clientAddr, serverAddr, clientAddr6, serverAddr6 := trialAddresses(sequence)
	t := &Trial{
		ClientNamespace: namespaceName(r.owner, sequence, Client),
		ServerNamespace: namespaceName(r.owner, sequence, Server),
		ClientAddr:      clientAddr,
		ServerAddr:      serverAddr,
		ClientAddr6:     clientAddr6,
		ServerAddr6:     serverAddr6,
		Options:         opts,
		registry:        r,
		namespaces:      [2]netns.NsHandle{netns.None(), netns.None()},
	}
	// Registered before anything exists, so that a signal arriving midway removes it.
	r.add(t)
	defer func() {
		if err != nil {
			if closeErr := t.Close(); closeErr != nil {
				err = errors.Join(err, closeErr)
			}
		}
	}()
	for _, side := range []Side{Client, Server} {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("netlab: create trial: %w", err)
		}
		if err := t.makeSide(side); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// makeSide creates the side's namespace and everything in it.
func (t *Trial) makeSide(side Side) error {
	name := t.Namespace(side)
	var tun *os.File
	handle, err := inNewNamespace(name, markNamespace, func() error {
		var err error
		if tun, err = openTUN(TUNName); err != nil {
			return err
		}
		for _, write := range t.Options.sysctlWrites() {
			if err := writeSysctl(write.key, write.value); err != nil {
				return fmt.Errorf("%w (namespace %s)", err, name)
			}
		}
		return t.configureLinks(side)
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		// Closed (by a signal, say) while this side was being made: undo it here.
		if tun != nil {
			tun.Close()
		}
		if handle.IsOpen() {
			handle.Close()
			removeNamedNamespace(name)
		}
		return fmt.Errorf("netlab: trial closed while its %s namespace was being made", side)
	}
	t.namespaces[side] = handle
	if side == Server {
		t.ServerTUN = tun
	} else {
		t.ClientTUN = tun
	}
	if err != nil {
		return fmt.Errorf("netlab: set up %s namespace %s: %w", side, name, err)
	}
	return nil
}

// configureLinks brings up lo and the TUN device of the calling thread's namespace,
// gives the TUN device its addresses and adds the routes to the peer, which carry
// the initial window metrics. Addresses are /32 and /128 with an explicit route to
// the peer's single address: one route per family that holds the metrics, and no
// prefix route made by the kernel beside it.
// tunTxQueuePackets is the transmit queue length of each trial's TUN devices.
const tunTxQueuePackets = 10000

func (t *Trial) configureLinks(side Side) error {
	handle, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open netlink socket: %w", err)
	}
	defer handle.Close()

	loopback, err := handle.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := handle.LinkSetUp(loopback); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	tun, err := handle.LinkByName(TUNName)
	if err != nil {
		return fmt.Errorf("find %s: %w", TUNName, err)
	}
	if err := handle.LinkSetMTU(tun, t.Options.MTU); err != nil {
		return fmt.Errorf("set %s MTU to %d bytes: %w", TUNName, t.Options.MTU, err)
	}
	// A long transmit queue: the TUN's default 500 packets overflow (and drop)
	// when the emulator reads in bursts at gigabit rates; the emulated path's own
	// queue, not the device's, is the bottleneck buffer.
	if err := handle.LinkSetTxQLen(tun, tunTxQueuePackets); err != nil {
		return fmt.Errorf("set %s transmit queue to %d packets: %w", TUNName, tunTxQueuePackets, err)
	}
	// No link-local address: nothing on the link but the trial's own traffic.
	if err := handle.LinkSetIP6AddrGenMode(tun, nl.IN6_ADDR_GEN_MODE_NONE); err != nil {
		return fmt.Errorf("turn off IPv6 address generation on %s: %w", TUNName, err)
	}
	if err := handle.LinkSetUp(tun); err != nil {
		return fmt.Errorf("bring %s up: %w", TUNName, err)
	}

	peer := Client
	if side == Client {
		peer = Server
	}
	for _, ipv6 := range []bool{false, true} {
		local, remote := t.Addr(side, ipv6), t.Addr(peer, ipv6)
		address := &netlink.Addr{IPNet: hostPrefix(local)}
		if ipv6 {
			address.Flags = unix.IFA_F_NODAD // usable at once: nobody else is on the link
		}
		if err := handle.AddrAdd(tun, address); err != nil {
			return fmt.Errorf("add address %s to %s: %w", local, TUNName, err)
		}
		route := &netlink.Route{
			LinkIndex: tun.Attrs().Index,
			Dst:       hostPrefix(remote),
			Src:       net.IP(local.AsSlice()),
		}
		if !ipv6 {
			route.Scope = netlink.SCOPE_LINK
		}
		if side == Server {
			route.InitCwnd = t.Options.InitCwnd
			route.AdvMSS = t.Options.ServerAdvMSS
		} else {
			route.InitRwnd = t.Options.InitRwnd
			route.AdvMSS = t.Options.ClientAdvMSS
			if t.Options.ClientQuickAck {
				route.QuickACK = 1
			}
		}
		if err := handle.RouteAdd(route); err != nil {
			return fmt.Errorf("add route to %s via %s (initcwnd %d, initrwnd %d): %w",
				remote, TUNName, route.InitCwnd, route.InitRwnd, err)
		}
	}
	return nil
}

// hostPrefix returns the single-address prefix (/32 or /128) of addr.
func hostPrefix(addr netip.Addr) *net.IPNet {
	return &net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
}

// Do runs fn on an OS thread inside the side's network namespace and returns its
// error. Sockets fn creates belong to that namespace for their whole life, so Do
// is the way to listen, dial or open raw sockets there. Only fn's own goroutine is
// inside the namespace: goroutines fn starts run in the host's. The caller's
// thread never changes namespace, and the thread fn ran on is moved back (or
// discarded if that fails).
func (t *Trial) Do(side Side, fn func() error) error {
	if !side.valid() {
		return fmt.Errorf("netlab: unknown side %d", int(side))
	}
	handle, err := t.namespaceHandle(side)
	if err != nil {
		return err
	}
	defer handle.Close()
	return inNamespace(handle, fn)
}

// namespaceHandle returns a new handle to the side's namespace, which the caller
// closes, so that a concurrent Close cannot pull the namespace from under it.
func (t *Trial) namespaceHandle(side Side) (netns.NsHandle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	handle := t.namespaces[side]
	if !handle.IsOpen() {
		return netns.None(), fmt.Errorf("netlab: %s namespace %s is closed or was never made", side, t.Namespace(side))
	}
	fd, err := unix.FcntlInt(uintptr(handle), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return netns.None(), fmt.Errorf("netlab: duplicate handle of %s namespace: %w", side, err)
	}
	return netns.NsHandle(fd), nil
}

// Listen announces on a local address inside the side's namespace, as net.Listen
// does ("tcp", "tcp4", "tcp6", "unix"; address such as ":443" or "198.18.0.2:0").
func (t *Trial) Listen(side Side, network, address string) (net.Listener, error) {
	var listener net.Listener
	err := t.Do(side, func() error {
		var err error
		listener, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: listen on %s %s in %s namespace: %w", network, address, side, err)
	}
	return listener, nil
}

// ListenPacket is net.ListenPacket inside the side's namespace.
func (t *Trial) ListenPacket(side Side, network, address string) (net.PacketConn, error) {
	var conn net.PacketConn
	err := t.Do(side, func() error {
		var err error
		conn, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: listen on %s %s in %s namespace: %w", network, address, side, err)
	}
	return conn, nil
}

// DialContext connects to address from inside the side's namespace with a zero
// net.Dialer. Use an IP literal: a host name would be resolved by goroutines
// running in the host's namespace, with the host's resolver.
func (t *Trial) DialContext(ctx context.Context, side Side, network, address string) (net.Conn, error) {
	return t.DialFunc(side, &net.Dialer{})(ctx, network, address)
}

// DialFunc returns a function with net.Dialer.DialContext's signature that dials
// with dialer from inside the side's namespace; it fits http.Transport.DialContext.
func (t *Trial) DialFunc(side Side, dialer *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var conn net.Conn
		err := t.Do(side, func() error {
			var err error
			conn, err = dialer.DialContext(ctx, network, address)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("netlab: dial %s %s from %s namespace: %w", network, address, side, err)
		}
		return conn, nil
	}
}

// Command returns a command that runs the program name inside the side's network
// namespace, through nsenter(1) from util-linux: `nsenter --net=PATH -- name
// args...`. nsenter enters the namespace and execs the program in place, so the
// command's process is the program itself (its PID, signals and exit status).
// Where nsenter is missing, build an exec.Cmd and use Start instead.
func (t *Trial) Command(side Side, name string, args ...string) *exec.Cmd {
	return t.CommandContext(context.Background(), side, name, args...)
}

// WrapCommand returns a function that makes an already built command run inside
// the side's network namespace through nsenter(1), as Command does: for APIs that
// build their own exec.Cmd and take a hook (server.StartNginx, client.Curl).
func (t *Trial) WrapCommand(side Side) func(*exec.Cmd) {
	path := t.NamespacePath(side)
	return func(cmd *exec.Cmd) {
		nsenter, err := exec.LookPath("nsenter")
		if err != nil {
			nsenter = "/usr/bin/nsenter"
		}
		cmd.Args = append([]string{"nsenter", "--net=" + path, "--", cmd.Path}, cmd.Args[1:]...)
		cmd.Path = nsenter
	}
}

// CommandContext is Command with a context that kills the program when done.
func (t *Trial) CommandContext(ctx context.Context, side Side, name string, args ...string) *exec.Cmd {
	nsenterArgs := append([]string{"--net=" + t.NamespacePath(side), "--", name}, args...)
	return exec.CommandContext(ctx, "nsenter", nsenterArgs...)
}

// Start starts cmd inside the side's network namespace without any helper
// program: the child is forked from a thread inside the namespace and inherits it.
func (t *Trial) Start(side Side, cmd *exec.Cmd) error {
	if err := t.Do(side, cmd.Start); err != nil {
		return fmt.Errorf("netlab: start %s in %s namespace: %w", cmd.Path, side, err)
	}
	return nil
}

// Close removes the trial: it closes the TUN files and unmounts both namespaces,
// which the kernel then destroys with everything in them once no socket, file or
// process holds them. Processes started inside are not killed: stop them first.
// Close is idempotent and safe to call concurrently; later calls return the first
// call's result.
func (t *Trial) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.closed = true
		var errs []error
		for _, file := range []*os.File{t.ClientTUN, t.ServerTUN} {
			if file != nil {
				if err := file.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
					errs = append(errs, fmt.Errorf("netlab: close TUN file: %w", err))
				}
			}
		}
		for side, handle := range t.namespaces {
			if !handle.IsOpen() {
				// Never mounted by this trial (the name may be another's): leave it.
				continue
			}
			handle.Close()
			t.namespaces[side] = netns.None()
			if err := removeNamedNamespace(t.Namespace(Side(side))); err != nil {
				errs = append(errs, err)
			}
		}
		t.registry.remove(t)
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}
