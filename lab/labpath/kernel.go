package labpath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/slowstart/slowstart/ktcp"
)

// The kernel tap (Config.KernelTap) records what the server namespace's kernel
// reports on each of the path's TCP connections to the server's addresses
// (package ktcp: the tracepoints tcp:tcp_probe, sock:inet_sock_set_state,
// tcp:tcp_retransmit_skb and tcp:tcp_cong_state_set), so that a trial knows the
// server's true congestion window: the initial one and the one at every ACK.
// docs/kernel.md says what the events mean and why the first tcp_probe's
// snd_cwnd is the initial window.

// KernelConn is what the server's kernel reported on one connection. Sequence
// numbers are relative to the server's first data byte (its ISN + 1), so that
// they count bytes of the server's data, as a capture's relative sequence
// numbers do.
type KernelConn struct {
	// Cookie is the server socket's cookie (SO_COOKIE), unique for the boot.
	Cookie uint64
	// Server and Client are the connection's two ends.
	Server, Client netip.AddrPort
	// CongestionControl is the server socket's algorithm ("cubic", "bbr", ...).
	CongestionControl string
	// ISN is the server's initial sequence number; ISNKnown is false when the tap
	// did not see the connection become established, and sequence numbers are
	// then relative to the server's oldest unacknowledged byte at its first event.
	ISN      uint32
	ISNKnown bool
	// EstablishedUnixNs is when the server's socket became ESTABLISHED (0 when not
	// seen). EstablishedWindow is its congestion window then, in segments: the
	// kernel sets the initial window (tcp_init_transfer) just before this state
	// change of a server's socket. MSS is its segment payload then (bytes).
	EstablishedUnixNs int64
	EstablishedWindow int
	MSS               int
	// InitialWindow is the congestion window in segments at the connection's
	// first tcp_probe event: the first segment the established server socket
	// received (the client's request, or its first ACK), before the kernel
	// processed it, hence before any ACK of the server's data could change it.
	// 0 when the kernel reported no such event.
	InitialWindow int
	// ACKs are the segments the established server socket received (one
	// tcp_probe each), in order: the window in force at each.
	ACKs []KernelACK
	// States are the socket's state changes, in order.
	States []KernelState
	// Retransmits are the server's retransmissions, in order.
	Retransmits []KernelRetransmit
	// Closed says the socket reached CLOSE: the record is complete.
	Closed bool
}

// KernelACK is one segment the established server socket received, and the
// socket as it was when it arrived: before the kernel processed it, so Cwnd is
// the window the server had been sending under, not yet changed by this ACK.
type KernelACK struct {
	UnixNs int64
	// Ack is the acknowledgment number the segment carried (relative: the bytes
	// of server data it acknowledges); DataBytes the client data it carried.
	Ack       uint32
	DataBytes int
	// SndUna, SndNxt and WriteSeq are the server's oldest unacknowledged byte,
	// next byte to send and the end of what its application wrote (relative):
	// SndNxt - SndUna bytes were in flight, WriteSeq - SndNxt queued unsent.
	SndUna, SndNxt, WriteSeq uint32
	// Cwnd is the congestion window in segments; SSThresh the slow start
	// threshold in segments (ktcp.InfiniteSSThresh while in slow start).
	Cwnd, SSThresh uint32
	// SRTT is the smoothed round-trip time (0 before the first sample); MSS the
	// payload of a full segment (bytes); RwndBytes the client's receive window.
	SRTT      time.Duration
	MSS       int
	RwndBytes uint32
	// PacketsOut are segments in flight; CAState the congestion state.
	PacketsOut uint32
	CAState    ktcp.CAState
}

// KernelState is one state change of the server's socket.
type KernelState struct {
	UnixNs   int64
	From, To ktcp.State
	// Cwnd is the congestion window at the change, in segments.
	Cwnd uint32
}

// KernelRetransmit is one retransmission by the server: its relative sequence
// range, and the congestion state when it left.
type KernelRetransmit struct {
	UnixNs     int64
	Start, End uint32
	CAState    ktcp.CAState
}

// KernelRound is one of the server's sending rounds as its kernel's ACK clock
// cuts them. Round 1 is the data the server sent before the first ACK of any of
// its data arrived; round k+1 is the data sent from that ACK (which opened it)
// until the first ACK of round k+1's own data arrived (which closed it). So a
// round is bounded by ACKs the server received, and its bytes are what the
// socket's snd_nxt advanced by in between, however the application wrote.
type KernelRound struct {
	// Start and End bound the round's data (relative sequence numbers); Segments
	// is its size in full segments of MSS bytes, rounded up.
	Start, End uint32
	Segments   int
	// OpenedUnixNs is when the ACK that opened the round arrived (0 for round 1);
	// ClosedUnixNs when the ACK that closed it arrived.
	OpenedUnixNs, ClosedUnixNs int64
	// CwndAtStart is the congestion window right after the ACK that opened the
	// round was processed (round 1: the initial window): the window in force
	// when the round's first segment could leave.
	CwndAtStart uint32
	// Cwnd is the congestion window when the ACK that closed the round arrived,
	// before it was processed: the window the round's last segment left under.
	// When the server was limited by the congestion window and every ACK of the
	// previous round came before the closing one (slow start on a clean path),
	// the round's segments are exactly Cwnd.
	Cwnd uint32
	// InFlight is what was unacknowledged when the closing ACK arrived (bytes):
	// the round's data, plus any of the previous round's still unacknowledged.
	InFlight uint32
	// QueuedBytes is what the application had written and the kernel not yet
	// sent when the round closed: more than 0 means the round was cut by a
	// window, not by the application running out of data.
	QueuedBytes uint32
	// RwndBytes is the client's receive window when the round closed.
	RwndBytes uint32
	// Retransmitted says a retransmission left while the round was open, or the
	// congestion state was not Open when it closed: its size says little about
	// the window.
	Retransmitted bool
}

// Rounds cuts the server's sending into rounds by the ACKs it received (see
// KernelRound). A round whose closing ACK the tap has not seen (the last one, if
// the connection is still open, or the server sent data no ACK covered) is left
// out.
func (c KernelConn) Rounds() []KernelRound {
	var rounds []KernelRound
	var start uint32   // the round's first byte
	var openedAt int64 // when the ACK that opened it arrived
	cwndAtStart := uint32(c.InitialWindow)
	retransmits := c.Retransmits
	for i, ack := range c.ACKs {
		// The first ACK that acknowledges data of this round closes it.
		if int32(ack.Ack-start) <= 0 || int32(ack.SndNxt-start) <= 0 {
			continue
		}
		r := KernelRound{
			Start:         start,
			End:           ack.SndNxt,
			OpenedUnixNs:  openedAt,
			ClosedUnixNs:  ack.UnixNs,
			CwndAtStart:   cwndAtStart,
			Cwnd:          ack.Cwnd,
			InFlight:      ack.SndNxt - ack.SndUna,
			RwndBytes:     ack.RwndBytes,
			Retransmitted: ack.CAState != ktcp.CAOpen,
		}
		if int32(ack.WriteSeq-ack.SndNxt) > 0 {
			r.QueuedBytes = ack.WriteSeq - ack.SndNxt
		}
		if ack.MSS > 0 {
			r.Segments = int((r.End - r.Start + uint32(ack.MSS) - 1) / uint32(ack.MSS))
		}
		for len(retransmits) > 0 && retransmits[0].UnixNs <= ack.UnixNs {
			if retransmits[0].UnixNs > openedAt {
				r.Retransmitted = true
			}
			retransmits = retransmits[1:]
		}
		rounds = append(rounds, r)
		// This ACK opens the next round; the window after it is what the next
		// event reports (before that one is processed), or the last state change's.
		start, openedAt = ack.SndNxt, ack.UnixNs
		cwndAtStart = 0
		if i+1 < len(c.ACKs) {
			cwndAtStart = c.ACKs[i+1].Cwnd
		} else {
			for _, s := range c.States {
				if s.UnixNs >= ack.UnixNs {
					cwndAtStart = s.Cwnd
					break
				}
			}
		}
	}
	return rounds
}

// kernelTap reads a ktcp.Tracer into per-connection records until closed.
type kernelTap struct {
	tracer *ktcp.Tracer
	done   chan struct{} // closed when the reading goroutine returns
	err    error         // why it returned, other than the tracer closing
	final  ktcp.Stats    // the tracer's counts when the tap closed

	mu       sync.Mutex
	conns    map[uint64]*tapConn
	order    []uint64      // cookies in the order first seen
	events   int           // events stored
	overflow uint64        // events not stored: over maxTapEvents
	closedCh chan struct{} // closed and replaced when a socket reaches CLOSE
}

// tapConn is one socket's events as the tracer gave them.
type tapConn struct {
	events []ktcp.Event
	closed bool
}

// maxTapEvents bounds what one path's tap stores (about 50 MB): a lab trial's
// connections produce a few thousand events; past it, events are counted and
// KernelConns reports them lost.
const maxTapEvents = 1 << 18

// kernelTapRingBytes is the tap's ring buffer: a trial's events are few, and a
// campaign runs many paths at once.
const kernelTapRingBytes = 4 << 20

// startKernelTap attaches a tracer to the server namespace's sockets on the
// server's addresses.
func startKernelTap(trial interface {
	NamespacePath(Side) string
}, serverAddrs []netip.Addr) (*kernelTap, error) {
	inode, err := ktcp.NetnsInode(trial.NamespacePath(Server))
	if err != nil {
		return nil, err
	}
	tracer, err := ktcp.Open(ktcp.Options{
		Filter:    ktcp.Filter{Netns: []uint32{inode}, LocalAddrs: serverAddrs},
		RingBytes: kernelTapRingBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("lab path: kernel tap: %w", err)
	}
	t := &kernelTap{
		tracer:   tracer,
		done:     make(chan struct{}),
		conns:    map[uint64]*tapConn{},
		closedCh: make(chan struct{}),
	}
	go t.run()
	return t, nil
}

func (t *kernelTap) run() {
	defer close(t.done)
	var ev ktcp.Event
	for {
		if err := t.tracer.Read(&ev); err != nil {
			if !errors.Is(err, ktcp.ErrClosed) {
				t.err = err
			}
			return
		}
		if ev.Remote.Port() == 0 {
			continue // the listening socket
		}
		t.mu.Lock()
		c := t.conns[ev.Cookie]
		if c == nil {
			c = &tapConn{}
			t.conns[ev.Cookie] = c
			t.order = append(t.order, ev.Cookie)
		}
		if t.events < maxTapEvents {
			c.events = append(c.events, ev)
			t.events++
		} else {
			t.overflow++
		}
		if ev.Kind == ktcp.KindState && ev.NewState == ktcp.StateClose {
			c.closed = true
			close(t.closedCh)
			t.closedCh = make(chan struct{})
		}
		t.mu.Unlock()
	}
}

// close stops the tracer and waits for the reading goroutine; the records stay.
func (t *kernelTap) close() error {
	t.final, _ = t.tracer.Stats()
	err := t.tracer.Close()
	<-t.done
	return errors.Join(err, t.err)
}

// KernelLossError says the kernel tap lost events: the ring buffer was full
// (the kernel dropped them) or the tap's store was (maxTapEvents). The records
// returned with it may miss events.
type KernelLossError struct {
	RingLost, StoreLost uint64
}

func (e *KernelLossError) Error() string {
	return fmt.Sprintf("lab path: kernel tap lost %d events in the ring buffer and %d over its store's limit: the kernel records may be incomplete", e.RingLost, e.StoreLost)
}

// errNoKernelTap: the path was started without Config.KernelTap.
var errNoKernelTap = errors.New("lab path: no kernel tap: start the path with Config.KernelTap")

// KernelConns returns the kernel's record of every connection to the server's
// addresses so far, in the order they were first seen, once every event the
// kernel produced before the call has been read. With a connection still open,
// its record holds what happened until now (Closed false). If events were lost,
// it returns the records with a *KernelLossError. After Close it returns what
// the tap recorded until then.
func (p *Path) KernelConns(ctx context.Context) ([]KernelConn, error) {
	t := p.kernel
	if t == nil {
		return nil, errNoKernelTap
	}
	select {
	case <-t.done:
	default:
		if err := t.tracer.Sync(ctx); err != nil && !errors.Is(err, ktcp.ErrClosed) {
			return nil, fmt.Errorf("lab path: kernel tap: %w", err)
		}
	}
	t.mu.Lock()
	conns := make([]KernelConn, 0, len(t.order))
	for _, cookie := range t.order {
		conns = append(conns, t.conns[cookie].record(cookie, t.tracer.UnixNs))
	}
	overflow := t.overflow
	t.mu.Unlock()
	return conns, t.lossError(overflow)
}

// KernelConn waits until the server's socket connected to client has closed
// (its CLOSE state change was read) and returns its record: the whole of what
// the kernel reported on that connection. It returns ctx's error if that does
// not happen before ctx ends.
func (p *Path) KernelConn(ctx context.Context, client netip.AddrPort) (KernelConn, error) {
	t := p.kernel
	if t == nil {
		return KernelConn{}, errNoKernelTap
	}
	for {
		t.mu.Lock()
		for i := len(t.order) - 1; i >= 0; i-- {
			c := t.conns[t.order[i]]
			if c.closed && len(c.events) > 0 && c.events[0].Remote == client {
				record := c.record(t.order[i], t.tracer.UnixNs)
				overflow := t.overflow
				t.mu.Unlock()
				return record, t.lossError(overflow)
			}
		}
		changed := t.closedCh
		t.mu.Unlock()
		select {
		case <-changed:
		case <-t.done:
			return KernelConn{}, fmt.Errorf("lab path: kernel tap stopped before the server's socket to %s closed", client)
		case <-ctx.Done():
			return KernelConn{}, fmt.Errorf("lab path: waiting for the server's socket to %s to close: %w", client, ctx.Err())
		}
	}
}

func (t *kernelTap) lossError(overflow uint64) error {
	var ringLost uint64
	select {
	case <-t.done: // the tracer is closed: its counts when it closed stand
		ringLost = t.final.Lost
	default:
		if stats, err := t.tracer.Stats(); err == nil {
			ringLost = stats.Lost
		}
	}
	if ringLost == 0 && overflow == 0 {
		return nil
	}
	return &KernelLossError{RingLost: ringLost, StoreLost: overflow}
}

// record turns a socket's events into its KernelConn.
func (c *tapConn) record(cookie uint64, unixNs func(monoNs int64) int64) KernelConn {
	k := KernelConn{Cookie: cookie, Closed: c.closed}
	if len(c.events) == 0 {
		return k
	}
	first := &c.events[0]
	k.Server, k.Client = first.Local, first.Remote
	base := first.Sock.SndUna
	for i := range c.events {
		ev := &c.events[i]
		if ev.Kind == ktcp.KindState && ev.NewState == ktcp.StateEstablished {
			// After the handshake the SYN/ACK is acknowledged: snd_una = ISN + 1.
			k.ISN, k.ISNKnown, base = ev.Sock.SndUna-1, true, ev.Sock.SndUna
			break
		}
	}
	rel := func(seq uint32) uint32 { return seq - base }
	for i := range c.events {
		ev := &c.events[i]
		unixNs := unixNs(ev.MonoNs)
		switch ev.Kind {
		case ktcp.KindProbe:
			if k.InitialWindow == 0 {
				k.InitialWindow = int(ev.Sock.SndCwnd)
			}
			k.ACKs = append(k.ACKs, KernelACK{
				UnixNs:     unixNs,
				Ack:        rel(ev.Segment.AckSeq),
				DataBytes:  int(ev.Segment.DataBytes()),
				SndUna:     rel(ev.Sock.SndUna),
				SndNxt:     rel(ev.Sock.SndNxt),
				WriteSeq:   rel(ev.Sock.WriteSeq),
				Cwnd:       ev.Sock.SndCwnd,
				SSThresh:   ev.Sock.SndSSThresh,
				SRTT:       time.Duration(ev.Sock.SRTTMicros) * time.Microsecond,
				MSS:        int(ev.Sock.MSS),
				RwndBytes:  ev.Sock.SndWndBytes,
				PacketsOut: ev.Sock.PacketsOut,
				CAState:    ev.Sock.CAState,
			})
		case ktcp.KindState:
			if cc := ev.CongestionControl(); cc != "" {
				k.CongestionControl = cc
			}
			if ev.NewState == ktcp.StateEstablished && k.EstablishedUnixNs == 0 {
				k.EstablishedUnixNs = unixNs
				k.EstablishedWindow = int(ev.Sock.SndCwnd)
				k.MSS = int(ev.Sock.MSS)
			}
			k.States = append(k.States, KernelState{UnixNs: unixNs, From: ev.OldState, To: ev.NewState, Cwnd: ev.Sock.SndCwnd})
		case ktcp.KindRetransmit:
			k.Retransmits = append(k.Retransmits, KernelRetransmit{
				UnixNs: unixNs, Start: rel(ev.Segment.Seq), End: rel(ev.Segment.EndSeq), CAState: ev.Sock.CAState,
			})
		case ktcp.KindCongestionState:
			if cc := ev.CongestionControl(); cc != "" && k.CongestionControl == "" {
				k.CongestionControl = cc
			}
		}
	}
	return k
}
