// Package labpath builds one emulated network path on this machine and keeps it up
// until Close: a client and a server network namespace (lab/netlab) joined by the
// userspace link emulator (lab/link) with the delay, rate, queue and loss asked for,
// and the initial windows and TCP sysctls on the namespaces' routes. It is the one
// place that assembles a lab path: the lab's trials (package lab), the lab server
// behind the demo and the lab page (package lab/labserver), the benches and the
// tests that need a far-away server all start theirs here.
//
// A Path gives what a caller needs to use it: the client namespace's file (for
// probes, curl and Chromium run there), the server's address, a dialer from the
// client namespace, Listen and ListenPacket in the server namespace, WrapCommand to
// run a program (nginx, Caddy, curl, Chromium) in either namespace, and the
// emulator's counters once it stops, and with Config.KernelTap the server
// kernel's own record of each connection (its congestion window at the start and
// at every ACK: KernelConn, docs/kernel.md). Close removes all of it, and Start
// leaves nothing behind when it fails.
//
// It starts no server and no client, and it analyzes nothing: callers start their
// own servers on the path (package lab/server) and register their teardown with
// Path.OnClose, so that Close stops them before it removes the namespaces.
//
// Everything here needs root and Linux.
package labpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/units"
)

// ServerName is the host name on the lab servers' certificates: clients reach the
// server by it with a resolve override (curl --resolve, probe --resolve).
const ServerName = "lab.slowstart.test"

// Side names one of a path's two namespaces.
type Side = netlab.Side

// The two sides of a path.
const (
	Client = netlab.Client
	Server = netlab.Server
)

// MTU is the MTU of a path's TUN devices (bytes).
const MTU = netlab.DefaultMTU

// Config describes a path. The zero value is a path with no delay, no rate limit and
// the kernel's defaults (initcwnd 10, cubic, slow start after idle on).
type Config struct {
	// RTT is the round-trip time the emulator adds: half of it each way.
	RTT time.Duration
	// RateBitsPerSecond is the bottleneck rate each way; 0: unlimited.
	RateBitsPerSecond int64
	// QueueBytes or QueuePackets is the drop-tail buffer in front of the bottleneck;
	// both 0: the lab's default (link.DefaultQueue: max(1 BDP, 10 packets)). Only a
	// rate-limited path has one.
	QueueBytes   int64
	QueuePackets int
	// LossRate is random (Bernoulli) loss on the server→client path only.
	LossRate float64
	// DropSYNs drops the client's first DropSYNs SYNs on the way to the server.
	DropSYNs int
	// Seed seeds the emulator: the client→server direction gets Seed+1, the
	// server→client direction Seed+2.
	Seed uint64
	// IPv6 makes Path.ServerAddr and Path.ClientAddr the IPv6 ones.
	IPv6 bool

	// InitCwnd is the initial congestion window on the server's route (ip route ...
	// initcwnd); 0: the kernel's default (10). InitRwnd is the initial receive window
	// on the client's route; 0: the kernel's default.
	InitCwnd, InitRwnd int
	// ServerAdvMSS and ClientAdvMSS are the MSS each side announces (route advmss);
	// 0: the kernel's choice from the MTU. MTU is both TUN devices' MTU; 0: 1500.
	ServerAdvMSS, ClientAdvMSS, MTU int
	// ClientQuickAck: the client acknowledges every segment at once (route quickack).
	ClientQuickAck bool
	// JitterNs varies the server→client delay uniformly by up to this much each way;
	// Reorder lets a packet overtake an earlier one when its draw says so.
	JitterNs int64
	Reorder  bool
	// CongestionControl is both namespaces' algorithm; "": cubic.
	CongestionControl string
	// NoSlowStartAfterIdle writes tcp_slow_start_after_idle=0, as a tuned server would.
	NoSlowStartAfterIdle bool
	// Sysctls are more sysctls for both namespaces (see netlab.Options.Sysctls).
	Sysctls map[string]string

	// Poll runs the emulator in polling mode (link.RunOptions.Poll): packets move
	// within microseconds of their time, at the cost of one busy processor. For a
	// path that runs alone.
	Poll bool
	// Spin lets the emulator spin before a packet's time (link.RunOptions.EarlyWakeNs's
	// default) instead of relying on timers alone, the lab's choice.
	Spin bool
	// Tap sees every packet the emulator reads from or writes to a TUN device (device
	// 0: the client's, 1: the server's), as captures at both ends would; it is called
	// from the emulator's goroutines and must not keep the data.
	Tap func(device int, data []byte, unixNs int64)

	// KernelTap records what the server namespace's kernel reports on each TCP
	// connection to the server's addresses (eBPF on the kernel's TCP tracepoints,
	// package ktcp): Path.KernelConns and Path.KernelConn give the server's
	// congestion window at the start and at every ACK. It needs BPF (root, a
	// kernel with BTF): Start fails with ktcp's error (errors.Is
	// ktcp.ErrUnavailable) where it is unavailable.
	KernelTap bool

	// Links, when set, are the emulator's two directions as given, in place of the
	// ones RTT, the rate, the queue, the loss, DropSYNs and Seed describe (benches that
	// emulate other paths).
	Links *Links
}

// Links are the emulator's two directions.
type Links struct {
	ClientToServer, ServerToClient link.Config
}

// LinkConfigs returns the emulator's two directions as the fields describe them:
// half the RTT of delay each way, the rate and its queue both ways, SYN drops on the
// client→server path, loss on the server→client (data) path only. Config.Links, when
// set, is not looked at.
func (c Config) LinkConfigs() Links {
	clientToServer, serverToClient, _ := c.links()
	return Links{ClientToServer: clientToServer, ServerToClient: serverToClient}
}

// links is LinkConfigs with the queue in words.
func (c Config) links() (clientToServer, serverToClient link.Config, queue string) {
	oneWayNs := c.RTT.Nanoseconds() / 2
	direction := func(seedOffset uint64) link.Config {
		d := link.Config{DelayNs: oneWayNs, RateBitsPerSecond: c.RateBitsPerSecond, Seed: c.Seed + seedOffset}
		if c.RateBitsPerSecond > 0 {
			switch {
			case c.QueueBytes > 0:
				d.Queue = link.QueueConfig{LimitBytes: c.QueueBytes}
				queue = fmt.Sprintf("drop-tail, %s", units.FormatSize(c.QueueBytes))
			case c.QueuePackets > 0:
				d.Queue = link.QueueConfig{LimitPackets: c.QueuePackets}
				queue = fmt.Sprintf("drop-tail, %d packets", c.QueuePackets)
			default:
				d.Queue, queue = link.DefaultQueue(c.RateBitsPerSecond, c.RTT.Nanoseconds(), MTU)
			}
		}
		return d
	}
	clientToServer, serverToClient = direction(1), direction(2)
	if c.DropSYNs > 0 {
		clientToServer.Drop = link.DropConfig{Count: c.DropSYNs, Match: link.MatchSYN}
	}
	if c.JitterNs > 0 {
		serverToClient.Jitter = link.Jitter{SpreadNs: c.JitterNs, Distribution: link.JitterUniform, Reorder: c.Reorder}
	}
	if c.LossRate > 0 {
		serverToClient.Loss = link.LossConfig{Model: link.LossBernoulli, Probability: c.LossRate}
	}
	if queue == "" {
		queue = "none (no rate limit)"
	}
	return clientToServer, serverToClient, queue
}

// QueueDescription says in words which bottleneck buffer the path has.
func (c Config) QueueDescription() string {
	_, _, queue := c.links()
	return strings.TrimPrefix(queue, "queue: ")
}

func (c Config) namespaceOptions() netlab.Options {
	return netlab.Options{
		InitCwnd:             c.InitCwnd,
		InitRwnd:             c.InitRwnd,
		ServerAdvMSS:         c.ServerAdvMSS,
		ClientAdvMSS:         c.ClientAdvMSS,
		ClientQuickAck:       c.ClientQuickAck,
		MTU:                  c.MTU,
		CongestionControl:    c.CongestionControl,
		NoSlowStartAfterIdle: c.NoSlowStartAfterIdle,
		Sysctls:              c.Sysctls,
	}
}

func (c Config) runOptions() link.RunOptions {
	o := link.RunOptions{Poll: c.Poll, Tap: c.Tap}
	if !c.Spin {
		o.EarlyWakeNs = -1
	}
	return o
}

// Path is an emulated path that is up. The embedded netlab.Trial gives the
// namespaces' tools (Listen, ListenPacket, DialFunc, DialContext, WrapCommand,
// CommandContext, Do, Start, NamespacePath, Addr); its TUN files belong to the
// emulator and its Close is replaced by Path.Close.
type Path struct {
	*netlab.Trial
	// Config is what the path was started with.
	Config Config
	// ClientNetns is the client namespace's file, for tools that take one (the
	// probe's Options.Netns, nsenter --net).
	ClientNetns string
	// ServerAddr and ClientAddr are the two ends' addresses (IPv6 ones with
	// Config.IPv6).
	ServerAddr, ClientAddr netip.Addr
	// Dial connects from the client namespace, as net.Dialer.DialContext does; it
	// fits http.Transport.DialContext.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)

	kernel *kernelTap // Config.KernelTap; nil without

	stopLink  context.CancelFunc
	linkDone  chan struct{}
	linkStats link.Stats
	linkErr   error
	// linkErrReported: Stop has returned linkErr, so Close does not repeat it.
	linkErrReported atomic.Bool

	mu      sync.Mutex // guards onClose and closed
	onClose []func() error
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// Start builds the path and starts its emulator, which runs until Stop or Close
// (not until ctx ends: ctx bounds the setup). On error nothing of the path is
// left behind.
func Start(ctx context.Context, cfg Config) (*Path, error) {
	links := cfg.LinkConfigs()
	if cfg.Links != nil {
		links = *cfg.Links
	}
	if err := links.ClientToServer.Validate(); err != nil {
		return nil, fmt.Errorf("lab path, client→server: %w", err)
	}
	if err := links.ServerToClient.Validate(); err != nil {
		return nil, fmt.Errorf("lab path, server→client: %w", err)
	}
	trial, err := netlab.Create(ctx, cfg.namespaceOptions())
	if err != nil {
		return nil, err
	}
	var tap *kernelTap
	if cfg.KernelTap {
		// Attached before the emulator carries anything, so that it sees every
		// connection from its SYN.
		if tap, err = startKernelTap(trial, []netip.Addr{trial.ServerAddr, trial.ServerAddr6}); err != nil {
			return nil, errors.Join(err, trial.Close())
		}
	}
	closeTap := func() error {
		if tap == nil {
			return nil
		}
		return tap.close()
	}
	clientDevice, err := link.NewTUN(trial.ClientTUN)
	if err != nil {
		return nil, errors.Join(err, closeTap(), trial.Close())
	}
	serverDevice, err := link.NewTUN(trial.ServerTUN)
	if err != nil {
		return nil, errors.Join(err, closeTap(), trial.Close())
	}
	linkCtx, stopLink := context.WithCancel(context.WithoutCancel(ctx))
	p := &Path{
		Trial:       trial,
		Config:      cfg,
		ClientNetns: trial.NamespacePath(Client),
		ServerAddr:  trial.Addr(Server, cfg.IPv6),
		ClientAddr:  trial.Addr(Client, cfg.IPv6),
		Dial:        trial.DialFunc(Client, &net.Dialer{}),
		kernel:      tap,
		stopLink:    stopLink,
		linkDone:    make(chan struct{}),
	}
	go func() {
		defer close(p.linkDone)
		p.linkStats, p.linkErr = link.Run(linkCtx, clientDevice, serverDevice, links.ClientToServer, links.ServerToClient, cfg.runOptions())
	}()
	return p, nil
}

// Stats are what the emulator counted in each direction: AToB is client→server,
// BToA server→client.
type Stats = link.Stats

// Stop stops the emulator, which carries nothing afterwards, and returns what it
// counted, or the error that stopped it early. Later calls return the same.
func (p *Path) Stop() (Stats, error) {
	stats, err := p.stop()
	p.linkErrReported.Store(true)
	return stats, err
}

func (p *Path) stop() (Stats, error) {
	p.stopLink()
	<-p.linkDone
	if p.linkErr != nil {
		return p.linkStats, fmt.Errorf("link emulator: %w", p.linkErr)
	}
	return p.linkStats, nil
}

// OnClose registers stop to run when the path closes, before the emulator stops
// and the namespaces go: the teardown of a server or program started on the path.
// They run in the reverse order of their registration. On a path already closed,
// stop runs at once.
func (p *Path) OnClose(stop func() error) {
	p.mu.Lock()
	if !p.closed {
		p.onClose = append(p.onClose, stop)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	stop()
}

// Go runs run in a goroutine until Close, with a context that ends when ctx does
// or when the path closes: a server serving on the path. Close cancels it, waits
// for run to return and reports its error, as an OnClose teardown registered at
// this point.
func (p *Path) Go(ctx context.Context, run func(ctx context.Context) error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx) }()
	p.OnClose(func() error {
		cancel()
		return <-done
	})
}

// Close runs what OnClose registered, stops the emulator and the kernel tap
// (whose records stay readable) and removes the namespaces, whatever failed
// before; it returns every error met (the emulator's
// unless Stop returned it already). Later and concurrent calls wait for the first
// and return its result.
func (p *Path) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		stops := p.onClose
		p.onClose = nil
		p.mu.Unlock()

		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		if _, err := p.stop(); err != nil && !p.linkErrReported.Load() {
			errs = append(errs, err)
		}
		if p.kernel != nil {
			errs = append(errs, p.kernel.close())
		}
		errs = append(errs, p.Trial.Close())
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// CloseAll removes every path of this process still up (the namespaces of paths
// whose Close was never reached, after a test's failure, say).
func CloseAll() error { return netlab.CloseAll() }
