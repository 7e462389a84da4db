//go:build linux

package ktcp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/ktcp"
	"github.com/slowstart/slowstart/lab/labpath"
)

func needRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "BPF programs and network namespaces")
}

// startPath makes a lab path (a client and a server namespace, no delay).
func startPath(t *testing.T) *labpath.Path {
	t.Helper()
	p, err := labpath.Start(context.Background(), labpath.Config{})
	if err != nil {
		t.Fatalf("lab path: %v", err)
	}
	t.Cleanup(func() {
		p.Close()
		labpath.CloseAll()
	})
	return p
}

func netnsOf(t *testing.T, p *labpath.Path, side labpath.Side) uint32 {
	t.Helper()
	inode, err := ktcp.NetnsInode(p.NamespacePath(side))
	if err != nil {
		t.Fatal(err)
	}
	return inode
}

// collector reads a tracer in a goroutine and hands the events over a channel.
type collector struct {
	tracer *ktcp.Tracer
	events chan ktcp.Event
	done   chan error
}

func collect(t *testing.T, opts ktcp.Options) *collector {
	t.Helper()
	tracer, err := ktcp.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	c := &collector{tracer: tracer, events: make(chan ktcp.Event, 1<<16), done: make(chan error, 1)}
	go func() {
		var ev ktcp.Event
		for {
			if err := tracer.Read(&ev); err != nil {
				close(c.events)
				c.done <- err
				return
			}
			c.events <- ev
		}
	}()
	t.Cleanup(func() { tracer.Close() })
	return c
}

// synced returns every event the kernel wrote until now.
func (c *collector) synced(t *testing.T) []ktcp.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.tracer.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	var events []ktcp.Event
	for {
		select {
		case ev := <-c.events:
			events = append(events, ev)
		default:
			return events
		}
	}
}

// server listens on addr in the path's server namespace; each connection
// reads a line, answers with size bytes, and closes once the client has.
func server(t *testing.T, p *labpath.Path, addr netip.AddrPort, size int) {
	t.Helper()
	ln, err := p.Listen(labpath.Server, "tcp", addr.String())
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	p.Go(context.Background(), func(ctx context.Context) error {
		go func() { <-ctx.Done(); ln.Close() }()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return nil
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				conn.Write(make([]byte, size))
				io.Copy(io.Discard, r)
			}()
		}
	})
}

// exchange connects from the client namespace, sends a line, reads size bytes
// and closes; it returns the client's address.
func exchange(t *testing.T, p *labpath.Path, addr netip.AddrPort, size int) netip.AddrPort {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := p.Dial(ctx, "tcp", addr.String())
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, make([]byte, size)); err != nil {
		t.Fatalf("read the answer from %s: %v", addr, err)
	}
	a := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// TestOneConnection follows a server socket from its SYN to its CLOSE: the
// state changes a passive open and a passive close go through, the request
// segment as the client sent it (6 bytes, acknowledging only the SYN/ACK),
// the window at it (the kernel's default initial window, 10), the ACK of all
// 3000 bytes of the answer, one cookie and one namespace on all of them, and
// the counters agreeing with what Read gave.
func TestOneConnection(t *testing.T) {
	needRoot(t)
	p := startPath(t)
	serverNetns := netnsOf(t, p, labpath.Server)
	c := collect(t, ktcp.Options{Filter: ktcp.Filter{Netns: []uint32{serverNetns}, LocalPorts: []uint16{8080}}})
	addr := netip.AddrPortFrom(p.ServerAddr, 8080)
	server(t, p, addr, 3000)
	before := time.Now().UnixNano()
	client := exchange(t, p, addr, 3000)

	// Wait for the server socket's CLOSE (it closes after the client: LAST_ACK
	// ends when the client's ACK of its FIN arrives).
	var conn []ktcp.Event
	deadline := time.After(20 * time.Second)
	for closed := false; !closed; {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("the tracer stopped: %v", <-c.done)
			}
			if ev.Remote.Port() == 0 {
				continue // the listening socket
			}
			conn = append(conn, ev)
			closed = ev.Kind == ktcp.KindState && ev.NewState == ktcp.StateClose
		case <-deadline:
			t.Fatalf("no CLOSE of the server's socket; events: %+v", conn)
		}
	}
	after := time.Now().UnixNano()

	var states []string
	var probes []ktcp.Event
	var established *ktcp.Event
	for i, ev := range conn {
		if ev.Cookie != conn[0].Cookie || ev.Netns != serverNetns || ev.Local != addr || ev.Remote != client || ev.IPv6Socket {
			t.Errorf("event %d (%s) is of socket %d in namespace %d, %s → %s; want the server's socket %s → %s in %d",
				i, ev.Kind, ev.Cookie, ev.Netns, ev.Local, ev.Remote, addr, client, serverNetns)
		}
		if unix := c.tracer.UnixNs(ev.MonoNs); unix < before || unix > after {
			t.Errorf("event %d at Unix %d, outside the exchange [%d, %d]", i, unix, before, after)
		}
		switch ev.Kind {
		case ktcp.KindState:
			states = append(states, ev.OldState.String()+"→"+ev.NewState.String())
			if ev.CongestionControl() != "cubic" {
				t.Errorf("state change with congestion control %q, want the lab's cubic", ev.CongestionControl())
			}
			if ev.NewState == ktcp.StateEstablished {
				established = &conn[i]
			}
		case ktcp.KindProbe:
			probes = append(probes, ev)
		}
	}
	wantStates := []string{"LISTEN→SYN_RECV", "SYN_RECV→ESTABLISHED", "ESTABLISHED→CLOSE_WAIT", "CLOSE_WAIT→LAST_ACK", "LAST_ACK→CLOSE"}
	if !slices.Equal(states, wantStates) {
		t.Errorf("state changes %v, want %v", states, wantStates)
	}
	if established == nil || len(probes) < 2 {
		t.Fatalf("established %v, %d tcp_probe events: want both", established, len(probes))
	}
	isn := established.Sock.SndUna - 1
	req := probes[0]
	if req.Segment.DataBytes() != 6 || req.Segment.AckSeq != isn+1 || req.Segment.Seq != established.Sock.RcvNxt {
		t.Errorf("first segment %+v (%d data bytes): want the 6-byte request at the client's next sequence number %d acknowledging %d",
			req.Segment, req.Segment.DataBytes(), established.Sock.RcvNxt, isn+1)
	}
	if req.Sock.SndCwnd != 10 || req.Sock.SndSSThresh != ktcp.InfiniteSSThresh || req.Sock.MSS != 1448 {
		t.Errorf("at the request: window %d, ssthresh %d, MSS %d; want 10, infinite, 1448", req.Sock.SndCwnd, req.Sock.SndSSThresh, req.Sock.MSS)
	}
	if req.Sock.SndUna != isn+1 || req.Sock.SndNxt != isn+1 || req.Sock.WriteSeq != isn+1 {
		t.Errorf("at the request the server had sent or written something: %+v", req.Sock)
	}
	acked := false
	for _, ev := range probes {
		acked = acked || ev.Segment.AckSeq == isn+1+3000
	}
	if !acked {
		t.Errorf("no segment acknowledged all 3000 bytes: %+v", probes)
	}
	stats, err := c.tracer.Stats()
	if err != nil {
		t.Fatal(err)
	}
	c.synced(t)
	if stats, err = c.tracer.Stats(); err != nil || stats.Lost != 0 || stats.Submitted != stats.Read {
		t.Errorf("stats %+v (%v): want nothing lost and everything submitted read", stats, err)
	}
}

// TestFilter: each filter delivers the events of the sockets it selects and
// nothing else, and the kernel does not even submit the others (its counter
// of submitted events equals what was read).
func TestFilter(t *testing.T) {
	needRoot(t)
	p := startPath(t)
	serverNetns, clientNetns := netnsOf(t, p, labpath.Server), netnsOf(t, p, labpath.Client)
	addrs := map[string]netip.AddrPort{
		"v4:8080": netip.AddrPortFrom(p.ServerAddr, 8080),
		"v4:8081": netip.AddrPortFrom(p.ServerAddr, 8081),
		"v6:8082": netip.AddrPortFrom(p.ServerAddr6, 8082),
	}
	for _, a := range addrs {
		server(t, p, a, 100)
	}
	cases := []struct {
		name   string
		filter ktcp.Filter
		want   []string // the sockets with events, as "server:<port>" or "client:<server port>"
	}{
		{"local port", ktcp.Filter{Netns: []uint32{serverNetns}, LocalPorts: []uint16{8081}}, []string{"server:8081"}},
		{"local ports", ktcp.Filter{Netns: []uint32{serverNetns}, LocalPorts: []uint16{8080, 8082}}, []string{"server:8080", "server:8082"}},
		{"remote port", ktcp.Filter{Netns: []uint32{clientNetns}, RemotePorts: []uint16{8080}}, []string{"client:8080"}},
		{"IPv6", ktcp.Filter{Netns: []uint32{serverNetns, clientNetns}, Family: ktcp.IPv6}, []string{"server:8082", "client:8082"}},
		{"IPv4", ktcp.Filter{Netns: []uint32{serverNetns}, Family: ktcp.IPv4}, []string{"server:8080", "server:8081"}},
		{"local address", ktcp.Filter{Netns: []uint32{serverNetns, clientNetns}, LocalAddrs: []netip.Addr{p.ServerAddr6}}, []string{"server:8082"}},
		{"other namespace", ktcp.Filter{Netns: []uint32{1}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := collect(t, ktcp.Options{Filter: tc.filter})
			clients := map[netip.AddrPort]string{}
			for _, name := range []string{"v4:8080", "v4:8081", "v6:8082"} {
				clients[exchange(t, p, addrs[name], 100)] = name
			}
			// Everything the kernel submitted before the count was taken is read
			// by the Sync after it, and checked to be of a selected socket below.
			before, err := c.tracer.Stats()
			if err != nil {
				t.Fatal(err)
			}
			events := c.synced(t)
			seen := map[string]bool{}
			for _, ev := range events {
				switch {
				case ev.Remote.Port() == 0: // a listening socket: counted by its port
					seen[fmt.Sprintf("server:%d", ev.Local.Port())] = true
				case ev.Netns == serverNetns:
					seen[fmt.Sprintf("server:%d", ev.Local.Port())] = true
				case ev.Netns == clientNetns:
					seen[fmt.Sprintf("client:%d", ev.Remote.Port())] = true
				default:
					t.Errorf("an event of namespace %d: %+v", ev.Netns, ev)
				}
				// A connecting socket has no local port yet as it enters SYN_SENT.
				connecting := ev.Kind == ktcp.KindState && ev.NewState == ktcp.StateSynSent && ev.Local.Port() == 0
				if ev.Netns == clientNetns && !connecting {
					if _, ok := clients[ev.Local]; !ok {
						t.Errorf("a client socket %s that no exchange made", ev.Local)
					}
				}
			}
			var got []string
			for s := range seen {
				got = append(got, s)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("events of %v, want %v", got, want)
			}
			if before.Submitted > uint64(len(events)) || before.Lost != 0 || (len(tc.want) > 0) != (before.Submitted > 0) {
				t.Errorf("the kernel had submitted %d events and lost %d; %d were read", before.Submitted, before.Lost, len(events))
			}
		})
	}
}

// TestLostEventsAreCounted: with a ring of one page that nobody reads, the
// kernel drops what does not fit and counts it: what the small tracer
// submitted plus what it lost is what a second tracer with room for all of it
// submitted, for the same sockets.
func TestLostEventsAreCounted(t *testing.T) {
	needRoot(t)
	p := startPath(t)
	filter := ktcp.Filter{Netns: []uint32{netnsOf(t, p, labpath.Server)}}
	small, err := ktcp.Open(ktcp.Options{Filter: filter, RingBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	big := collect(t, ktcp.Options{Filter: filter})
	addr := netip.AddrPortFrom(p.ServerAddr, 8080)
	server(t, p, addr, 20000)
	for range 10 {
		exchange(t, p, addr, 20000)
	}
	// Once the ten server sockets have closed, nothing more happens on the
	// sockets the filter selects, and both tracers' counts are final.
	var events []ktcp.Event
	deadline := time.After(20 * time.Second)
	for closed := 0; closed < 10; {
		select {
		case ev := <-big.events:
			events = append(events, ev)
			if ev.Kind == ktcp.KindState && ev.NewState == ktcp.StateClose && ev.Remote.Port() != 0 {
				closed++
			}
		case <-deadline:
			t.Fatalf("%d of the 10 server sockets closed", closed)
		}
	}
	events = append(events, big.synced(t)...)
	s, err := small.Stats()
	if err != nil {
		t.Fatal(err)
	}
	b, err := big.tracer.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Lost == 0 || s.Submitted+s.Lost != b.Submitted || b.Lost != 0 || b.Submitted != uint64(len(events)) {
		t.Errorf("one-page ring: %d submitted, %d lost; large ring: %d submitted, %d lost, %d read: want losses in the first that add up to the second",
			s.Submitted, s.Lost, b.Submitted, b.Lost, len(events))
	}
	// 4096 bytes hold 23 records of 168 bytes and their 8-byte headers.
	if s.Submitted != 4096/(168+8) {
		t.Errorf("a ring of 4096 bytes took %d records, want %d", s.Submitted, 4096/(168+8))
	}
}

// TestCloseStopsReadAndSync: Close makes a waiting Read return ErrClosed, and
// Sync after Close does too.
func TestCloseStopsReadAndSync(t *testing.T) {
	needRoot(t)
	tracer, err := ktcp.Open(ktcp.Options{Filter: ktcp.Filter{Netns: []uint32{1}}})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		var ev ktcp.Event
		read <- tracer.Read(&ev)
	}()
	if err := tracer.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-read; !errors.Is(err, ktcp.ErrClosed) {
		t.Errorf("Read after Close: %v, want ErrClosed", err)
	}
	if err := tracer.Sync(context.Background()); !errors.Is(err, ktcp.ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
}

func TestOptionsRefused(t *testing.T) {
	for name, opts := range map[string]ktcp.Options{
		"ring not a power of two": {RingBytes: 5000},
		"ring under a page":       {RingBytes: 1024},
		"unknown kind":            {Kinds: []ktcp.Kind{42}},
		"kind twice":              {Kinds: []ktcp.Kind{ktcp.KindProbe, ktcp.KindProbe}},
	} {
		if tr, err := ktcp.Open(opts); err == nil || errors.Is(err, ktcp.ErrUnavailable) {
			if tr != nil {
				tr.Close()
			}
			t.Errorf("%s: Open returned %v, want a refusal of the options", name, err)
		}
	}
}
