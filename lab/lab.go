// Package lab runs transfers over emulated paths with real kernel TCP: each trial
// gets its own path (lab/labpath: client and server network namespaces joined by
// the userspace link emulator), a server (built-in, nginx or Caddy, lab/server;
// or the built-in one on gVisor's userspace TCP, lab/netstack) with the initial
// window on its route, and a client (built-in or curl, lab/client)
// that times the transfer. A point may run over HTTP/3 instead: the built-in server
// or Caddy serves QUIC on UDP through the same emulated path, and the HTTP/3 client
// (h3client) fetches and times it. Trials run in parallel without interfering.
// It writes results and, when asked, the client-side and server-side captures of
// every trial. When a job asks for its round trips it hands the trial's client-side
// packets, kept in memory from the emulator's tap, to package analysis (an HTTP/3
// trial's come from the HTTP/3 client's own reading of its datagrams); it analyzes
// nothing itself.
package lab

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/h3client"
	"github.com/slowstart/slowstart/lab/client"
	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/netstack"
	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/report"
	"github.com/slowstart/slowstart/units"
)

// Server and client kinds.
const (
	ServerBuiltin = "builtin"
	ServerNginx   = "nginx"
	ServerCaddy   = "caddy"
	ClientBuiltin = client.ClientBuiltin
	ClientCurl    = client.ClientCurl
)

// ServerNetstack is the built-in server on gVisor's netstack, a userspace TCP whose
// initial window is a fixed 10 segments (lab/netstack).
const ServerNetstack = server.KindNetstack

// Spec is one point of the parameter space: a path, a server, a client and a transfer.
type Spec struct {
	RTTNs             int64   `json:"rtt_ms_ns"`
	RateBitsPerSecond int64   `json:"rate_bps"`    // bottleneck rate each way; 0: unlimited
	QueueBytes        int64   `json:"queue_bytes"` // buffer in front of the bottleneck; 0: one BDP
	QueuePackets      int     `json:"queue_packets"`
	LossRate          float64 `json:"loss"` // random loss on the server→client path
	IW                int     `json:"iw"`   // the server route's initcwnd; 0: kernel default (10)
	InitRwnd          int     `json:"initrwnd"`
	SizeBytes         int64   `json:"size_bytes"`
	TLS               string  `json:"tls"` // "", "1.2", "1.3"
	HTTP2             bool    `json:"http2"`
	// HTTP3: the transfer runs over HTTP/3 (QUIC, TLS 1.3) on UDP instead of TCP; the
	// route's initcwnd and the congestion control apply to TCP only (QUIC's window is
	// the server's library's: quic-go's 32 packets of 1,280 bytes).
	HTTP3              bool   `json:"http3"`
	ChainBytes         int    `json:"chain_bytes"` // certificate chain size over TLS (0: 4 KB)
	Server             string `json:"server"`
	Client             string `json:"client"`
	CC                 string `json:"cc"`
	ThinkAfterBytes    int64  `json:"think_after_bytes"`
	ThinkNs            int64  `json:"think_ns"`
	SlowStartAfterIdle bool   `json:"slow_start_after_idle"`
	IPv6               bool   `json:"ipv6"`
	Seed               uint64 `json:"seed"`
	// HelloRetry makes a TLS 1.3 handshake take a HelloRetryRequest: the server accepts
	// only P-256 while the client's key share is X25519 (the built-in client's and
	// curl's first choice), so it asks for another key share, one more round trip.
	HelloRetry bool `json:"hello_retry,omitempty"`
	// DropSYNs drops the client's first DropSYNs SYNs on the way to the server: each
	// costs the client a retransmission timeout (1 s, then 2 s, ...) before its next.
	DropSYNs int `json:"drop_syns,omitempty"`
	// WriteChunkBytes, WritePauseNs and Nagle make the built-in server write like a
	// streaming application (see server.Config): the header alone, then the body in
	// writes of WriteChunkBytes with WritePauseNs between them, and Nagle's algorithm
	// on or off.
	WriteChunkBytes int   `json:"write_chunk_bytes,omitempty"`
	WritePauseNs    int64 `json:"write_pause_ns,omitempty"`
	Nagle           bool  `json:"nagle,omitempty"`
	// ServerAdvMSS and ClientAdvMSS are the MSS each side announces (route advmss;
	// 0: the kernel's choice), MTU the path's (0: 1500).
	ServerAdvMSS int `json:"server_advmss,omitempty"`
	ClientAdvMSS int `json:"client_advmss,omitempty"`
	MTU          int `json:"mtu,omitempty"`
	// NoTimestamps turns TCP timestamps off in both namespaces (tcp_timestamps=0);
	// ClientQuickAck makes the client acknowledge every segment at once.
	NoTimestamps   bool `json:"no_timestamps,omitempty"`
	ClientQuickAck bool `json:"client_quickack,omitempty"`
	// JitterNs varies the server→client delay by up to this much each way, and
	// Reorder lets packets overtake one another by it.
	JitterNs int64 `json:"jitter_ns,omitempty"`
	Reorder  bool  `json:"reorder,omitempty"`
	// KernelTruth records the server kernel's own congestion window on each
	// connection (labpath.Config.KernelTap): TrialResult.Kernel.
	KernelTruth bool `json:"kernel_truth,omitempty"`
	// ProxyUpstreamRTTNs, when set, puts a TCP-terminating proxy at the server's
	// end of the path, relaying to the origin server over a second path of this
	// round trip (see proxy.go): the client's connection is the proxy's.
	ProxyUpstreamRTTNs int64 `json:"proxy_upstream_rtt_ns,omitempty"`
	// ServerMSS is the MSS the netstack server's SYN/ACK announces (0: the path's
	// MTU less 40; a kernel server's is ServerAdvMSS). NoSACK turns SACK off: the
	// netstack server's, or both namespaces' (tcp_sack=0).
	ServerMSS int  `json:"server_mss,omitempty"`
	NoSACK    bool `json:"no_sack,omitempty"`
}

// Normalize fills defaults and checks the values.
func (s *Spec) Normalize() error {
	if s.Server == "" {
		s.Server = ServerBuiltin
	}
	if s.Client == "" {
		s.Client = ClientBuiltin
	}
	if s.CC == "" {
		s.CC = netlab.CongestionCubic
	}
	if s.ChainBytes == 0 && s.TLS != "" {
		s.ChainBytes = defaultChainBytes
	}
	switch {
	case s.RTTNs < 0:
		return errors.New("the RTT can't be negative")
	case s.RTTNs > MaxRTTNs:
		return fmt.Errorf("--rtt %s is beyond what the lab emulates (at most %s; a geostationary satellite path, among the longest real ones, is about 600ms): did you mean %s?",
			time.Duration(s.RTTNs), time.Duration(MaxRTTNs), time.Duration(s.RTTNs/1000))
	case s.RateBitsPerSecond < 0:
		return errors.New("the rate can't be negative (0: unlimited)")
	case s.RateBitsPerSecond > 0 && s.RateBitsPerSecond < MinRateBitsPerSecond:
		return fmt.Errorf("--rate %s is below what the lab emulates (at least %s)", units.FormatRate(s.RateBitsPerSecond), units.FormatRate(MinRateBitsPerSecond))
	case s.IW < 0 || s.IW > 1000:
		return fmt.Errorf("initial window %d: use 1 to 1000 segments (0 for the kernel default)", s.IW)
	case s.SizeBytes < 0 || s.SizeBytes > 1<<30:
		return fmt.Errorf("size %d: use 0 to 1 GiB", s.SizeBytes)
	case s.LossRate < 0 || s.LossRate >= 1:
		return fmt.Errorf("loss %g: use a rate in [0, 1)", s.LossRate)
	case s.TLS != "" && s.TLS != "1.2" && s.TLS != "1.3":
		return fmt.Errorf("TLS %q: use 1.2, 1.3 or none", s.TLS)
	case s.Server != ServerBuiltin && s.Server != ServerNginx && s.Server != ServerCaddy && s.Server != ServerNetstack:
		return fmt.Errorf("server %q: use builtin, nginx, caddy or netstack", s.Server)
	case s.Client != ClientBuiltin && s.Client != ClientCurl:
		return fmt.Errorf("client %q: use builtin or curl", s.Client)
	case s.HelloRetry && s.TLS != "1.3":
		return errors.New("a HelloRetryRequest needs TLS 1.3")
	case s.DropSYNs < 0 || s.DropSYNs > 3:
		return fmt.Errorf("dropping %d SYNs: use 0 to 3 (each costs a timeout of 1, 2, then 4 s)", s.DropSYNs)
	case s.WriteChunkBytes < 0 || s.WritePauseNs < 0:
		return errors.New("the write chunk size and pause can't be negative")
	case (s.WriteChunkBytes > 0 || s.Nagle) && s.Server != ServerBuiltin && s.Server != ServerNetstack:
		return errors.New("chunked writes and Nagle's algorithm are options of the built-in and netstack servers")
	case s.ServerMSS != 0 && s.Server != ServerNetstack:
		return errors.New("the server's MSS (ServerMSS) is an option of the netstack server: a kernel server's is ServerAdvMSS (route advmss)")
	case s.ProxyUpstreamRTTNs < 0 || s.ProxyUpstreamRTTNs > 0 && s.HTTP3:
		return errors.New("a proxy relays TCP only, with an upstream round trip of 0 or more")
	case s.JitterNs < 0 || s.JitterNs > s.RTTNs/2:
		return fmt.Errorf("jitter %v: use 0 to half the RTT", time.Duration(s.JitterNs))
	case s.Server == ServerNetstack && s.IW != 0 && s.IW != netstack.InitialWindowSegments:
		return fmt.Errorf("initial window %d: the netstack server's is gVisor's fixed %d segments (no option changes it): leave --iw at %d",
			s.IW, netstack.InitialWindowSegments, netstack.InitialWindowSegments)
	case s.Server == ServerNetstack && s.HTTP3:
		return errors.New("the netstack server serves TCP only: run HTTP/3 on the built-in server or caddy")
	case s.Server == ServerCaddy && s.TLS == "" && !s.HTTP3:
		return errors.New("caddy serves over TLS only: give a TLS version (--tls 1.3)")
	case s.HTTP3 && s.TLS == "1.2":
		return errors.New("HTTP/3 runs over TLS 1.3 only (QUIC, RFC 9001)")
	case s.HTTP3 && s.Server == ServerNginx:
		return errors.New("nginx from Debian (1.22) does not serve HTTP/3: use the built-in server or caddy")
	case s.HTTP3 && s.Client != ClientBuiltin:
		return errors.New("over HTTP/3 the client is the built-in HTTP/3 probe (Debian's curl has no HTTP/3)")
	}
	if s.HTTP3 {
		s.TLS, s.HTTP2 = "1.3", false
		if s.ChainBytes == 0 {
			s.ChainBytes = defaultChainBytes
		}
	}
	if s.Server == ServerNetstack {
		if err := (netstack.Options{CongestionControl: s.CC, MSS: s.ServerMSS}).Validate(); err != nil {
			return err
		}
		s.IW = netstack.InitialWindowSegments // the stack's, whatever the kernel's default
	}
	if err := netlab.CheckCongestionControl(s.CC); err != nil {
		return fmt.Errorf("%w: use cubic, bbr or reno", err)
	}
	return nil
}

// Bounds of a lab path: what lies beyond is a mistake (a unit forgotten or
// misplaced), not a path.
const (
	MaxRTTNs             = 10e9   // 10 s
	MinRateBitsPerSecond = 10_000 // 10 kbit/s
)

// HTTP3Twin returns the same point over HTTP/3: the same path, server and page, over
// QUIC with TLS 1.3 (whatever TLS version the TCP point uses), fetched by the HTTP/3
// client. It fails for a server that does not serve HTTP/3.
func (s Spec) HTTP3Twin() (Spec, error) {
	twin := s
	twin.HTTP3, twin.TLS, twin.HTTP2, twin.Client = true, "1.3", false, ClientBuiltin
	if err := twin.Normalize(); err != nil {
		return Spec{}, err
	}
	return twin, nil
}

// TrialResult is what one trial measured.
type TrialResult struct {
	Trial       int     `json:"trial"`
	ConnectMs   float64 `json:"connect_ms"`
	TLSMs       float64 `json:"tls_ms"`
	FirstByteMs float64 `json:"first_byte_ms"`
	LastByteMs  float64 `json:"last_byte_ms"`
	// FCTPaperMs: first response byte to last byte at the client (Dukkipati et al.
	// measure to the last ACK at the server, which is the same less half an RTT).
	FCTPaperMs float64 `json:"fct_paper_ms"`
	// FCTUserMs: from the connect to the last byte, as a user waits.
	FCTUserMs  float64 `json:"fct_user_ms"`
	Bytes      int64   `json:"bytes"`
	Protocol   string  `json:"protocol"`
	TLSVersion string  `json:"tls_version,omitempty"`
	// DataPacketsLost and AckPacketsLost count the emulator's drops (loss and queue)
	// of data (server→client) and ACK (client→server) packets.
	DataPacketsLost int64 `json:"data_packets_lost"`
	AckPacketsLost  int64 `json:"ack_packets_lost"`
	// The same by cause: the bottleneck queue was full, or the random loss drew it.
	DataPacketsDroppedQueue int64  `json:"data_packets_dropped_queue"`
	DataPacketsDroppedLoss  int64  `json:"data_packets_dropped_loss"`
	AckPacketsDroppedQueue  int64  `json:"ack_packets_dropped_queue"`
	AckPacketsDroppedLoss   int64  `json:"ack_packets_dropped_loss"`
	ClientPcap              string `json:"client_pcap,omitempty"`
	ServerPcap              string `json:"server_pcap,omitempty"`
	// KeyLog is the file of an HTTP/3 trial's TLS secrets, beside its captures (for
	// slowstart analyze --keylog and Wireshark).
	KeyLog string `json:"keylog,omitempty"`
	// Kernel is what the server's kernel reported of each connection (Spec.KernelTruth).
	Kernel []KernelConn `json:"kernel,omitempty"`
	// RoundTrips are the transfer's round trips as its client-side capture shows them
	// (package analysis), when the job asked for them.
	RoundTrips *TrialRoundTrips `json:"round_trips,omitempty"`
	// PathCheck is how the trial's path measured against the configured one
	// (nil for a trial that failed before its transfer ended).
	PathCheck *PathCheck `json:"path_check,omitempty"`
	// Reruns counts the times the trial was run again because the host
	// distorted its path (RunOptions.DistortedReruns); Excluded marks a trial
	// still distorted after them, left out of its point's statistics.
	Reruns   int  `json:"reruns,omitempty"`
	Excluded bool `json:"excluded,omitempty"`
	// DistortedBy says what distorted the trial's first run, when it was run
	// again or excluded (PathCheck.Reason of that run).
	DistortedBy string `json:"distorted_by,omitempty"`
	Error       string `json:"error,omitempty"`
}

// TrialRoundTrips counts a transfer's round trips: the handshakes (TCP and TLS, or
// QUIC's, which carries TLS), the data rounds of the response, and all of them.
type TrialRoundTrips struct {
	Handshake int `json:"handshake"`
	Data      int `json:"data"`
	Total     int `json:"total"`
}

func roundTripsOf(rt report.RoundTrips) *TrialRoundTrips {
	return &TrialRoundTrips{Handshake: rt.TCP + rt.TLS, Data: rt.HTTP, Total: rt.Total}
}

// Env holds what trials share: generated keys and certificate chains.
type Env struct {
	// setup serializes the creation of trials: namespace setup is CPU-heavy in the
	// kernel, and trials already timing a transfer should not share the CPU with
	// several setups at once.
	setup sync.Mutex
	// active counts the trials running: a trial that starts alone, in a batch run
	// one trial at a time, runs its emulator in polling mode (link.RunOptions.Poll)
	// to move packets within microseconds of their time at the cost of one busy
	// processor; trials in parallel sleep on timers alone, so that polling does not
	// take the CPU their transfers need.
	active atomic.Int32
	Keys   *server.KeyCache
	mu     sync.Mutex
	chains map[int]*server.Chain
}

// NewEnv makes an Env.
func NewEnv() *Env { return &Env{Keys: server.NewKeyCache(), chains: map[int]*server.Chain{}} }

func (e *Env) chain(bytes int) (*server.Chain, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.chains[bytes]; ok {
		return c, nil
	}
	c, err := server.NewChain(server.ChainConfig{ServerName: labpath.ServerName, Intermediates: 1, TargetBytes: bytes, Keys: e.Keys})
	if err != nil {
		return nil, fmt.Errorf("certificate chain of %d bytes: %w", bytes, err)
	}
	e.chains[bytes] = c
	return c, nil
}

// pollMaxUnlimitedBytes bounds the transfers that poll on a path with no rate limit: a
// bulk transfer at the kernel's full speed needs both cores for the two kernels, and
// polling took its goodput at 20 ms from 1.37 to 0.93 Gbit/s (same run). Timing is what
// the lab measures on smaller transfers and rate-limited paths.
const pollMaxUnlimitedBytes = 4 << 20

// RunTrial runs one transfer. captureDir, when set, receives the trial's client-side
// and server-side captures named after prefix. A trial that starts while no other runs
// on e polls (see Env.active).
func (e *Env) RunTrial(ctx context.Context, spec Spec, index int, captureDir, prefix string) (TrialResult, error) {
	return e.runTrial(ctx, spec, index, captureDir, prefix, true, false)
}

// runTrial is RunTrial; mayPoll false keeps the emulator on timers even when the
// trial starts alone (the first trial of a parallel batch does); roundTrips counts
// the transfer's round trips (TrialResult.RoundTrips). It opens the captures,
// brings the path up, starts the server on it, fetches, and reads the emulator's
// drops (and the round trips) once the path has stopped.
func (e *Env) runTrial(ctx context.Context, spec Spec, index int, captureDir, prefix string, mayPoll, roundTrips bool) (res TrialResult, err error) {
	res = TrialResult{Trial: index}
	if err := spec.Normalize(); err != nil {
		return res, err
	}
	// The netstack server's TCP runs in this process: a polling emulator would
	// take a processor its goroutines need (SYN/ACKs 8-14 ms late on two cores).
	poll := e.active.Add(1) == 1 && mayPoll && spec.Server != ServerNetstack && (spec.RateBitsPerSecond > 0 || spec.SizeBytes <= pollMaxUnlimitedBytes)
	defer e.active.Add(-1)

	caps, err := openCaptures(spec, captureDir, prefix, roundTrips)
	if err != nil {
		return res, err
	}
	res.ClientPcap, res.ServerPcap = caps.clientPcap, caps.serverPcap
	defer func() {
		if err := caps.close(); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}()
	path, err := e.startPath(ctx, spec, poll, caps.tap())
	if err != nil {
		return res, err
	}
	defer path.Close()
	serverPath := path
	if spec.ProxyUpstreamRTTNs > 0 {
		// The origin behind the proxy, on a path of its own; the proxy on this one.
		origin, err := e.startPath(ctx, spec.upstreamSpec(), false, nil)
		if err != nil {
			return res, err
		}
		defer origin.Close()
		serverPath = origin
	}
	target, err := e.startServer(ctx, serverPath, spec)
	if err != nil {
		return res, err
	}
	if serverPath != path {
		proxy := netip.AddrPortFrom(path.ServerAddr, target.addr.Port())
		if err := startProxy(path, proxy, serverPath.Dial, target.addr.String()); err != nil {
			return res, fmt.Errorf("the proxy: %w", err)
		}
		target.addr = proxy
	}

	var fetched client.Result
	if spec.HTTP3 {
		err = e.fetchHTTP3(ctx, path, spec, target, captureDir, prefix, &res)
	} else {
		fetched, err = fetchTCP(ctx, path, spec, target)
	}
	if err != nil {
		res.Error = err.Error()
		return res, err
	}
	stats, err := path.Stop()
	if err != nil {
		return res, err
	}
	if !spec.HTTP3 {
		res.setTiming(fetched)
	}
	res.setDrops(stats)
	res.PathCheck = checkPath(spec, &res, stats)
	switch {
	case spec.KernelTruth && target.netstackTruth != nil && spec.ProxyUpstreamRTTNs == 0:
		res.Kernel = target.netstackTruth.conns()
	case spec.KernelTruth && (spec.Server != ServerNetstack || spec.ProxyUpstreamRTTNs > 0):
		// (Behind a proxy the client's connection is the proxy's kernel socket.)
		if res.Kernel, err = kernelTruth(ctx, path); err != nil {
			return res, err
		}
	}
	if roundTrips && !spec.HTTP3 {
		if res.RoundTrips, err = caps.roundTrips(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// KernelConn is what the server's kernel reported of one connection of a trial: its
// client end, congestion control and initial window (labpath.KernelConn).
type KernelConn struct {
	Client            string `json:"client"`
	CongestionControl string `json:"cc"`
	// InitialWindow is snd_cwnd at the connection's first tcp_probe event, in
	// segments; EstablishedWindow the window when the socket became established.
	InitialWindow     int `json:"initial_window"`
	EstablishedWindow int `json:"established_window"`
	MSS               int `json:"mss"`
	// Rounds are the server's sending rounds as its own ACK clock cuts them: the
	// segments of each and the window before and after (labpath.KernelRound).
	Rounds []KernelRound `json:"rounds,omitempty"`
}

// KernelRound is one sending round of the server as its kernel saw it.
type KernelRound struct {
	Segments    int    `json:"segments"`
	CwndAtStart uint32 `json:"cwnd_at_start"`
	Cwnd        uint32 `json:"cwnd"`
	QueuedBytes uint32 `json:"queued_bytes"`
}

// netstackTruth records the netstack server's own window on each connection, from
// its TCP probe: the window its first data went out under (the last sample before
// it sent any), as the kernel tap records a kernel server's.
type netstackTruth struct {
	mu sync.Mutex
	by map[netip.AddrPort]*netstackConn
	// order is the connections in the order first seen.
	order []netip.AddrPort
}

type netstackConn struct {
	firstNxt    uint32
	initial     int
	sent        bool
	established int
}

func (n *netstackTruth) sample(s netstack.Sample) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.by[s.Remote]
	if !ok {
		c = &netstackConn{firstNxt: s.SndNxt, established: s.CwndSegments}
		n.by[s.Remote] = c
		n.order = append(n.order, s.Remote)
	}
	if c.sent || s.SndNxt != c.firstNxt {
		c.sent = true
		return
	}
	c.initial = s.CwndSegments
}

func (n *netstackTruth) conns() []KernelConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]KernelConn, 0, len(n.order))
	for _, remote := range n.order {
		c := n.by[remote]
		out = append(out, KernelConn{Client: remote.String(), CongestionControl: "netstack", InitialWindow: c.initial, EstablishedWindow: c.established})
	}
	return out
}

// kernelTruth reads the server kernel's record of the path's connections.
func kernelTruth(ctx context.Context, path *labpath.Path) ([]KernelConn, error) {
	conns, err := path.KernelConns(ctx)
	if err != nil {
		return nil, fmt.Errorf("the server kernel's record: %w", err)
	}
	out := make([]KernelConn, 0, len(conns))
	for _, c := range conns {
		k := KernelConn{Client: c.Client.String(), CongestionControl: c.CongestionControl,
			InitialWindow: c.InitialWindow, EstablishedWindow: c.EstablishedWindow, MSS: c.MSS}
		for _, r := range c.Rounds() {
			k.Rounds = append(k.Rounds, KernelRound{Segments: r.Segments, CwndAtStart: r.CwndAtStart, Cwnd: r.Cwnd, QueuedBytes: r.QueuedBytes})
		}
		out = append(out, k)
	}
	return out, nil
}

// pathConfig is the point's path: its delay, rate, queue and loss, and the
// namespaces' initial windows and TCP settings.
func (s *Spec) pathConfig(poll bool, tap func(device int, data []byte, unixNs int64)) labpath.Config {
	cfg := labpath.Config{
		RTT:                  time.Duration(s.RTTNs),
		RateBitsPerSecond:    s.RateBitsPerSecond,
		QueueBytes:           s.QueueBytes,
		QueuePackets:         s.QueuePackets,
		LossRate:             s.LossRate,
		DropSYNs:             s.DropSYNs,
		Seed:                 s.Seed,
		IPv6:                 s.IPv6,
		InitCwnd:             s.IW,
		InitRwnd:             s.InitRwnd,
		ServerAdvMSS:         s.ServerAdvMSS,
		ClientAdvMSS:         s.ClientAdvMSS,
		ClientQuickAck:       s.ClientQuickAck,
		JitterNs:             s.JitterNs,
		Reorder:              s.Reorder,
		KernelTap:            s.KernelTruth && (s.Server != ServerNetstack || s.ProxyUpstreamRTTNs > 0),
		MTU:                  s.MTU,
		CongestionControl:    s.CC,
		NoSlowStartAfterIdle: !s.SlowStartAfterIdle,
		Poll:                 poll,
		Tap:                  tap,
	}
	cfg.Sysctls = map[string]string{}
	if s.InitRwnd > 0 {
		// A receive buffer large enough for the initial window asked for: the kernel
		// caps the first advertised window at what the default buffer can hold.
		cfg.Sysctls["ipv4/tcp_rmem"] = fmt.Sprintf("4096 %d 6291456", max(131072, 4*s.InitRwnd*1500))
	}
	if s.NoTimestamps {
		cfg.Sysctls["ipv4/tcp_timestamps"] = "0"
	}
	if s.NoSACK && s.Server != ServerNetstack {
		cfg.Sysctls["ipv4/tcp_sack"] = "0"
	}
	if len(cfg.Sysctls) == 0 {
		cfg.Sysctls = nil
	}
	return cfg
}

// startPath brings up the trial's path, one setup at a time (see Env.setup).
func (e *Env) startPath(ctx context.Context, spec Spec, poll bool, tap func(device int, data []byte, unixNs int64)) (*labpath.Path, error) {
	e.setup.Lock()
	defer e.setup.Unlock()
	return labpath.Start(ctx, spec.pathConfig(poll, tap))
}

// trialCaptures are what a trial's emulator keeps of its packets: the client-side
// and server-side captures asked for (a capture directory), and the client side's
// packets in memory to read a TCP transfer's round trips from; either, both or none.
type trialCaptures struct {
	files *pcapTaps // nil when closed or when none were asked for
	// clientPcap and serverPcap are the captures kept (TrialResult.ClientPcap).
	clientPcap, serverPcap string
	// clientPackets are the packets of the client's TUN device, as its capture
	// would hold them; nil when the round trips are not read.
	clientPackets *capture.Memory
	// mu keeps the packets in the same order in the client-side capture and in
	// clientPackets: the emulator taps from a goroutine per direction.
	mu sync.Mutex
}

// openCaptures opens the trial's captures.
func openCaptures(spec Spec, captureDir, prefix string, roundTrips bool) (*trialCaptures, error) {
	c := &trialCaptures{}
	if captureDir != "" {
		if err := os.MkdirAll(captureDir, 0o755); err != nil {
			return nil, fmt.Errorf("capture directory: %w", err)
		}
		c.clientPcap = filepath.Join(captureDir, prefix+".client.pcap")
		c.serverPcap = filepath.Join(captureDir, prefix+".server.pcap")
		files, err := newPcapTaps(c.clientPcap, c.serverPcap)
		if err != nil {
			return nil, err
		}
		c.files = files
	}
	if roundTrips && !spec.HTTP3 {
		// The round trips of a TCP transfer come from its client-side packets,
		// analyzed in memory once the path has stopped, as the probe analyzes its
		// capture once the fetch is over; the capture kept, if any, is not read.
		c.clientPackets = capture.NewMemory(capture.WithUDP())
	}
	return c, nil
}

// tap is the emulator's tap that keeps the packets; nil when nothing is kept.
func (c *trialCaptures) tap() func(device int, data []byte, unixNs int64) {
	files, packets := c.files, c.clientPackets
	if files == nil && packets == nil {
		return nil
	}
	return func(device int, data []byte, unixNs int64) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if files != nil {
			files.tap(device, data, unixNs)
		}
		if packets != nil && device == 0 {
			packets.Add(data, unixNs)
		}
	}
}

// close closes the captures kept (once the emulator has stopped); later calls do
// nothing.
func (c *trialCaptures) close() error {
	if c.files == nil {
		return nil
	}
	t := c.files
	c.files = nil
	return t.close()
}

// roundTrips reads the TCP transfer's round trips from the client side's packets
// (once the emulator has stopped).
func (c *trialCaptures) roundTrips(ctx context.Context) (*TrialRoundTrips, error) {
	return tcpRoundTrips(ctx, c.clientPackets)
}

// trialTarget is the trial's server: where it listens, and the certificate chain it
// serves over TLS (nil without TLS).
type trialTarget struct {
	addr  netip.AddrPort
	chain *server.Chain
	// netstackTruth records the netstack server's own window (Spec.KernelTruth).
	netstackTruth *netstackTruth
}

// startServer starts the point's server in the path's server namespace, its
// teardown registered with the path.
func (e *Env) startServer(ctx context.Context, path *labpath.Path, spec Spec) (trialTarget, error) {
	port := uint16(80)
	if spec.TLS != "" {
		port = 443
	}
	target := trialTarget{addr: netip.AddrPortFrom(path.ServerAddr, port)}
	if spec.TLS != "" {
		chain, err := e.chain(spec.ChainBytes)
		if err != nil {
			return target, err
		}
		target.chain = chain
	}
	o := server.OnPath{Kind: spec.Server, Addr: target.addr, HTTP3Only: spec.HTTP3 && spec.Server == ServerBuiltin,
		Config: spec.builtinServerConfig(target.chain), BodySizes: []int64{spec.SizeBytes}, ServerName: labpath.ServerName}
	if spec.Server == ServerNginx && spec.HelloRetry {
		o.ECDHCurves = "prime256v1"
	}
	if spec.Server == ServerNetstack {
		o.Netstack = netstack.Options{CongestionControl: spec.CC, MSS: spec.ServerMSS, NoSACK: spec.NoSACK}
		if spec.KernelTruth {
			target.netstackTruth = &netstackTruth{by: map[netip.AddrPort]*netstackConn{}}
			o.Netstack.Probe = target.netstackTruth.sample
		}
	}
	running, err := server.StartOnPath(ctx, path, o)
	if err != nil {
		return target, err
	}
	target.addr = running.Addr // the netstack server's address is its own
	return target, nil
}

// builtinServerConfig is the point's server behaviour: its TLS, HTTP/2, think time
// and writes (the built-in server's; nginx and Caddy take the certificate).
func (s *Spec) builtinServerConfig(chain *server.Chain) server.Config {
	cfg := server.Config{
		TLSVersion:      s.TLS,
		HTTP2:           s.HTTP2,
		ThinkAfterBytes: s.ThinkAfterBytes,
		ThinkDuration:   time.Duration(s.ThinkNs),
		WriteChunkBytes: s.WriteChunkBytes,
		WritePause:      time.Duration(s.WritePauseNs),
		Nagle:           s.Nagle,
	}
	if s.HelloRetry {
		cfg.CurvePreferences = []tls.CurveID{tls.CurveP256}
	}
	if chain != nil {
		cfg.Certificate = chain.Certificate
	}
	return cfg
}

// fetchTCP fetches the point's page over TCP with the point's client from the
// path's client namespace.
func fetchTCP(ctx context.Context, path *labpath.Path, spec Spec, target trialTarget) (client.Result, error) {
	scheme := "http"
	if spec.TLS != "" {
		scheme = "https"
	}
	fetch := client.FetchConfig{
		URL:        fmt.Sprintf("%s://%s/bytes/%d", scheme, target.addr, spec.SizeBytes),
		Dial:       path.Dial,
		TLSVersion: spec.TLS,
		HTTP2:      spec.HTTP2,
	}
	if target.chain != nil {
		fetch.RootCAs = target.chain.Roots
		fetch.RootCAPEM = target.chain.RootPEM()
		fetch.ServerName = labpath.ServerName
	}
	if spec.Client == ClientCurl {
		return client.FetchCurl(ctx, fetch, path.WrapCommand(labpath.Client))
	}
	return client.Fetch(ctx, fetch)
}

// setTiming fills res with the client's timing of a TCP transfer.
func (res *TrialResult) setTiming(r client.Result) {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	res.ConnectMs, res.TLSMs, res.FirstByteMs, res.LastByteMs = ms(r.ConnectNs), ms(r.TLSNs), ms(r.FirstByteNs), ms(r.LastByteNs)
	res.FCTPaperMs, res.FCTUserMs = ms(r.FCTPaperNs), ms(r.FCTUserNs)
	res.Bytes, res.Protocol, res.TLSVersion = r.Bytes, r.Protocol, r.TLSVersion
}

// setDrops fills res with the emulator's drops: server→client packets are data,
// client→server ones ACKs.
func (res *TrialResult) setDrops(linkStats labpath.Stats) {
	res.DataPacketsDroppedQueue, res.DataPacketsDroppedLoss = linkStats.BToA.PacketsDroppedQueue, linkStats.BToA.PacketsDroppedLoss
	res.AckPacketsDroppedQueue, res.AckPacketsDroppedLoss = linkStats.AToB.PacketsDroppedQueue, linkStats.AToB.PacketsDroppedLoss
	res.DataPacketsLost = res.DataPacketsDroppedLoss + res.DataPacketsDroppedQueue
	res.AckPacketsLost = res.AckPacketsDroppedLoss + res.AckPacketsDroppedQueue
}

// tcpRoundTrips reads a TCP transfer's round trips from its client-side packets.
func tcpRoundTrips(ctx context.Context, clientPackets analysis.PacketSource) (*TrialRoundTrips, error) {
	rep, err := analysis.Run(ctx, clientPackets, analysis.Options{})
	if err != nil {
		return nil, fmt.Errorf("reading the round trips from the client-side packets: %w", err)
	}
	// The transfer's connection: the one that carried the most to the client (the
	// trial makes one; a TLS response is not read without the key log, its rounds are).
	var best *report.Connection
	for i, c := range rep.Connections {
		if c.Transport != report.TransportQUIC && (best == nil || c.BytesToClient > best.BytesToClient) {
			best = &rep.Connections[i]
		}
	}
	if best == nil || best.BytesToClient == 0 {
		return nil, errors.New("reading the round trips: no TCP connection carried data to the client")
	}
	return roundTripsOf(best.RoundTrips), nil
}

// fetchHTTP3 fetches the point's page over HTTP/3 with the HTTP/3 client from the
// client namespace and fills res with its timing and round trips (read by the client
// from its own datagrams, with its own TLS secrets). With captures, the secrets are
// written beside them.
func (e *Env) fetchHTTP3(ctx context.Context, path *labpath.Path, spec Spec, target trialTarget, captureDir, prefix string, res *TrialResult) error {
	addrPort := target.addr
	opts := h3client.Options{
		URL:     fmt.Sprintf("https://%s:%d/bytes/%d", labpath.ServerName, addrPort.Port(), spec.SizeBytes),
		Resolve: map[string]netip.Addr{fmt.Sprintf("%s:%d", labpath.ServerName, addrPort.Port()): addrPort.Addr()},
		RootCAs: target.chain.Roots, Netns: path.ClientNetns,
		// X25519 alone, as the TCP client offers (client.FetchConfig.PostQuantumKeyExchange).
		ClassicKeyShare: true,
		Timeout:         max(2*time.Minute, time.Duration(spec.RTTNs)*50),
		Tool:            "slowstart lab",
	}
	if captureDir != "" {
		res.KeyLog = filepath.Join(captureDir, prefix+".keys")
		f, err := os.Create(res.KeyLog)
		if err != nil {
			return fmt.Errorf("key log: %w", err)
		}
		defer f.Close()
		opts.Keylog = f
	}
	pr, err := h3client.Run(ctx, opts)
	if err != nil {
		return err
	}
	if pr.Status != 200 {
		return fmt.Errorf("HTTP/3 fetch: status %d", pr.Status)
	}
	if pr.BodyBytes != spec.SizeBytes {
		return fmt.Errorf("HTTP/3 fetch: %d body bytes received, want %d", pr.BodyBytes, spec.SizeBytes)
	}
	tl := pr.Timeline
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	res.ConnectMs, res.TLSMs = ms(tl.HandshakeNs), 0
	res.FirstByteMs, res.LastByteMs = ms(tl.FirstByteNs), ms(tl.LastByteNs)
	res.FCTPaperMs, res.FCTUserMs = ms(tl.LastByteNs-tl.FirstByteNs), ms(tl.LastByteNs)
	res.Bytes, res.Protocol, res.TLSVersion = pr.BodyBytes, ProtocolHTTP3, "1.3"
	if c := pr.Final(); c != nil {
		res.RoundTrips = roundTripsOf(c.RoundTrips)
	}
	return nil
}

// ProtocolHTTP3 is TrialResult.Protocol for HTTP/3.
const ProtocolHTTP3 = "HTTP/3"

// Label names a spec in file names: "rtt70-rate1.2mbit-iw10-size42000-trial3"; a TLS
// chain other than the default is named ("-tls1.3-chain9000"), and HTTP/3 ("-h3").
func (s Spec) Label() string {
	l := "rtt" + strconv.FormatFloat(float64(s.RTTNs)/1e6, 'f', -1, 64)
	if s.RateBitsPerSecond > 0 {
		l += "-rate" + strconv.FormatFloat(float64(s.RateBitsPerSecond)/1e6, 'f', -1, 64) + "mbit"
	}
	l += fmt.Sprintf("-iw%d-size%d", s.IW, s.SizeBytes)
	if s.LossRate > 0 {
		l += "-loss" + strconv.FormatFloat(s.LossRate*100, 'f', -1, 64)
	}
	if s.TLS != "" {
		l += "-tls" + s.TLS
		if s.ChainBytes != 0 && s.ChainBytes != defaultChainBytes {
			l += fmt.Sprintf("-chain%d", s.ChainBytes)
		}
	}
	if s.HTTP2 {
		l += "-h2"
	}
	if s.HelloRetry {
		l += "-hrr"
	}
	if s.DropSYNs > 0 {
		l += fmt.Sprintf("-synloss%d", s.DropSYNs)
	}
	if s.WriteChunkBytes > 0 {
		l += fmt.Sprintf("-chunk%d", s.WriteChunkBytes)
		if s.WritePauseNs > 0 {
			l += "-pause" + strconv.FormatFloat(float64(s.WritePauseNs)/1e6, 'f', -1, 64) + "ms"
		}
	}
	if s.Nagle {
		l += "-nagle"
	}
	if s.ServerMSS > 0 {
		l += fmt.Sprintf("-mss%d", s.ServerMSS)
	}
	if s.NoSACK {
		l += "-nosack"
	}
	if s.HTTP3 {
		l += "-h3"
	}
	return l
}

// defaultChainBytes is the certificate chain of a TLS point that names none.
const defaultChainBytes = 4000

// QueueDescription says which bottleneck buffer the point uses.
func QueueDescription(s Spec) string {
	return s.pathConfig(false, nil).QueueDescription()
}

// Describe says in words what a point emulates.
func Describe(s Spec) string {
	path := fmt.Sprintf("path: RTT %s", strconv.FormatFloat(float64(s.RTTNs)/1e6, 'f', -1, 64)+" ms")
	if s.RateBitsPerSecond > 0 {
		path += fmt.Sprintf(", %s each way, queue %s", units.FormatRate(s.RateBitsPerSecond), QueueDescription(s))
	} else {
		path += ", no rate limit"
	}
	if s.LossRate > 0 {
		path += fmt.Sprintf(", %g%% loss server→client (seed %d)", s.LossRate*100, s.Seed)
	}
	proto := "HTTP/1.1"
	if s.HTTP2 {
		proto = "HTTP/2"
	}
	if s.TLS != "" {
		proto += fmt.Sprintf(" over TLS %s (chain %s)", s.TLS, units.FormatSize(int64(s.ChainBytes)))
	}
	iw := "kernel default IW"
	if s.IW > 0 {
		iw = fmt.Sprintf("IW %d", s.IW)
	}
	if s.HTTP3 {
		return fmt.Sprintf("%s\nserver: %s over QUIC (its library's window; IW and congestion control are TCP's); client: the HTTP/3 probe; %s of body over HTTP/3 (TLS 1.3, chain %s)",
			path, s.Server, units.FormatSize(s.SizeBytes), units.FormatSize(int64(s.ChainBytes)))
	}
	if s.DropSYNs > 0 {
		path += fmt.Sprintf(", the client's first %d SYN(s) dropped", s.DropSYNs)
	}
	if s.HelloRetry {
		proto += " with a HelloRetryRequest"
	}
	writes := ""
	if s.WriteChunkBytes > 0 {
		writes = fmt.Sprintf(", writes of %s", units.FormatSize(int64(s.WriteChunkBytes)))
		if s.WritePauseNs > 0 {
			writes += fmt.Sprintf(" %v apart", time.Duration(s.WritePauseNs))
		}
	}
	if s.Nagle {
		writes += ", Nagle on"
	}
	return fmt.Sprintf("%s\nserver: %s, %s, %s%s; client: %s; %s of body over %s", path, s.Server, iw, s.CC, writes, s.Client, units.FormatSize(s.SizeBytes), proto)
}
