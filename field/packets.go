package field

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/ktcp"
	"github.com/slowstart/slowstart/live"
	"github.com/slowstart/slowstart/report"
)

// The packet source: where BPF is unavailable, field captures the server's
// packets on one interface (AF_PACKET, package capture), one capture per port
// filtered in the kernel on it, and reads each connection from the streaming
// analysis (package live) as `slowstart analyze` would. It knows no kernel
// window: a round's CwndSegments is 0, and round 1's limit is the analysis's
// reading of the packets.

var errCapturePermission = capture.ErrPermission

// packetSource feeds the aggregator from live captures.
type packetSource struct {
	r     *runner
	iface string
	netns string
	lives []*capture.Live
	ports []uint16

	// Under r.mu.
	followed, measured uint64
	reported           map[string]bool // connections reported while still open, by port and index
}

// packetRingBytes is each port's packet ring: a server's traffic, read for as
// long as field runs. Through a ring of this size, whole packets of the bulk
// shape (bench/live.sh's traffic, bench/livecap -ring -buffer 33554432): 0 of
// 1.19 M dropped at 1 Gbit/s, 5 of 1.98 M at 2 Gbit/s; the socket's receive
// buffer, each packet costing it a kernel buffer of kilobytes, dropped 1 to 7%
// at 2 Gbit/s. Its memory is taken at once.
const packetRingBytes = 32 << 20

// ringNote says how the packets are read: through a packet ring of its size
// per port, or from the sockets where the kernel gave no ring.
func (p *packetSource) ringNote() string {
	for _, lv := range p.lives {
		if !lv.Stats().Ring {
			return "read from the socket (no packet ring)"
		}
	}
	return fmt.Sprintf("through a packet ring of %d MiB per port", packetRingBytes>>20)
}

// documentationAddress stands for "anywhere": the interface of the route to it
// is the default route's.
var documentationAddress = netip.MustParseAddr("198.51.100.1")

func openPacketSource(ctx context.Context, r *runner, opts Options) (*packetSource, error) {
	netns := ""
	if len(opts.Netns) == 1 {
		netns = opts.Netns[0]
	}
	iface := opts.Interface
	if iface == "" {
		var err error
		iface, _, err = capture.RouteInterfaceIn(netns, documentationAddress)
		if err != nil {
			return nil, &UsageError{fmt.Errorf("no interface to capture on: give one with --interface (%w)", err)}
		}
	}
	p := &packetSource{r: r, iface: iface, netns: netns, ports: opts.Ports, reported: map[string]bool{}}
	for _, port := range opts.Ports {
		lv, err := capture.OpenLive(ctx, capture.LiveOptions{Interface: iface, Netns: netns, Filter: capture.Filter{LocalPort: port},
			Ring: true, BufferBytes: packetRingBytes})
		if err != nil {
			p.close()
			if errors.Is(err, capture.ErrNoInterface) {
				return nil, &UsageError{err}
			}
			return nil, err
		}
		p.lives = append(p.lives, lv)
	}
	return p, nil
}

func (p *packetSource) run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(p.lives))
	for i, lv := range p.lives {
		port := p.ports[i]
		hint, _ := analysis.ParseServer(fmt.Sprintf(":%d", port))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = live.Watch(ctx, lv, live.WatchOptions{Analysis: analysis.Options{Server: hint}}, func(c report.Connection) {
				p.take(port, c)
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// take turns one connection's report into a record: the first report of a
// connection (it may come while the connection is still open, once idle).
func (p *packetSource) take(port uint16, c report.Connection) {
	key := fmt.Sprintf("%d/%d", port, c.Index)
	open := slicesContains(c.Notes, live.StillOpenNote)
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.reported[key] {
		if !open {
			delete(p.reported, key)
		}
		return
	}
	if open {
		p.reported[key] = true
	}
	server, err := netip.ParseAddrPort(c.Server)
	if err != nil || server.Port() != port || c.MidStream {
		return // a connection from this host to the port, or one that began before the capture
	}
	p.followed++
	rec, ok := recordFromReport(&c, time.Now())
	if !ok {
		return
	}
	p.measured++
	p.r.emit(rec)
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// recordFromReport reads a connection's first response from its report: the
// rounds of the first phase (the TLS handshake flight over TLS, the first HTTP
// response otherwise).
func recordFromReport(c *report.Connection, now time.Time) (*record, bool) {
	server, err1 := netip.ParseAddrPort(c.Server)
	client, err2 := netip.ParseAddrPort(c.Client)
	if err1 != nil || err2 != nil || len(c.Rounds) == 0 {
		return nil, false
	}
	rec := &record{
		establishedUnixNs: now.Add(-time.Duration(c.DurationMs * 1e6)).UnixNano(),
		local:             server, remote: client, source: SourcePackets,
		mss: uint32(max(c.MSS, 0)), exchange: 1, complete: true,
	}
	if c.HandshakeRTTMs != nil {
		rec.rttUs = uint32(*c.HandshakeRTTMs * 1e3)
	}
	if iw := c.InitialWindow; iw != nil && iw.Verdict == report.VerdictExact {
		rec.iw = uint32(iw.Segments)
		rec.cwndAtRequest = rec.iw
	}
	rec.rwndAtRequest = uint32(max(c.ClientWindow.InitialBytes, 0))
	last := len(c.Rounds)
	for i, r := range c.Rounds {
		if r.Phase != c.Rounds[0].Phase {
			last = i
			break
		}
	}
	if len(c.HTTP) > 0 && len(c.HTTP[0].Rounds) > 0 && c.Rounds[0].Phase != report.PhaseTLS {
		last = min(last, c.HTTP[0].Rounds[len(c.HTTP[0].Rounds)-1])
	}
	var start uint32
	for _, r := range c.Rounds[:last] {
		kr := ktcp.Round{Start: start, End: start + uint32(r.Bytes), Segments: r.Segments,
			OpenedNs: int64(r.StartMs * 1e6), ClosedNs: int64(r.EndMs * 1e6),
			InFlight: uint32(max(r.InFlightBytes, 0)), RwndBytes: uint32(max(r.ReceiveWindowBytes, 0)), MSS: rec.mss,
			Retransmitted: r.Retransmissions > 0}
		start = kr.End
		if len(rec.rounds) < maxRoundsKept {
			rec.rounds = append(rec.rounds, kr)
		} else {
			rec.roundsOmitted++
		}
		rec.retransmitted = rec.retransmitted || r.Retransmissions > 0
		if r.Limit == report.LimitIncomplete || r.CaptureGaps > 0 {
			rec.complete, rec.cut = false, CutIdle
		}
	}
	rec.responseBytes = int64(start)
	if rec.responseBytes <= 0 {
		return nil, false
	}
	switch l := c.Rounds[0].Limit; {
	case l == report.LimitCwnd || l == report.LimitRwnd || l == report.LimitApp:
		rec.round1Limit = l
	case l == report.LimitEnd:
		rec.round1Limit = LimitEnd
		if last > 1 {
			rec.round1Limit = LimitApp
		}
	default:
		rec.round1Limit = LimitUnknown
	}
	if rec.complete && c.HandshakeRTTMs != nil {
		// The last byte left at the last round's end; its ACK came back a round
		// trip later. The request arrived just before round 1 began.
		lastRound := c.Rounds[last-1]
		rec.responseNs = int64((lastRound.EndMs - c.Rounds[0].StartMs + *c.HandshakeRTTMs) * 1e6)
	}
	if strings.EqualFold(c.Closed, "rst") && !rec.complete {
		rec.cut = CutReset
	}
	return rec, true
}

func (p *packetSource) counts(c *statusCounts) {
	c.followed, c.measured = p.followed, p.measured
	for _, lv := range p.lives {
		c.packetsDropped += uint64(max(lv.Stats().KernelDrops, 0))
	}
}

func (p *packetSource) monoNow() int64 { return 0 }

func (p *packetSource) close() {
	for _, lv := range p.lives {
		lv.Close()
	}
}
