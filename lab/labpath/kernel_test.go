//go:build linux

package labpath

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/ktcp"
	"github.com/slowstart/slowstart/lab/netlab"
)

// wirePacket is a TCP segment the emulator saw at the server's TUN device.
type wirePacket struct {
	unixNs   int64
	toServer bool // written into the server's namespace (from the client)
	seq, ack uint32
	flags    uint8
	payload  int
	mss      int // the MSS option of a SYN, 0 without
}

// wire records the segments at the server's device (Config.Tap, device 1): what
// a capture on the server's interface would show, read independently of the
// kernel's own counters.
type wire struct {
	mu      sync.Mutex
	server  netip.Addr // the server's address, set once the path is up
	packets []wirePacket
}

func (w *wire) tap(device int, data []byte, unixNs int64) {
	if device != 1 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pkt, ok := parseTCP(data, w.server)
	if !ok {
		return
	}
	pkt.unixNs = unixNs
	w.packets = append(w.packets, pkt)
}

// parseTCP reads the TCP header of an IPv4 or IPv6 packet; toServer says its
// destination is server.
func parseTCP(data []byte, server netip.Addr) (wirePacket, bool) {
	var p wirePacket
	var tcp []byte
	switch {
	case len(data) >= 20 && data[0]>>4 == 4:
		ihl := int(data[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(data[2:]))
		if data[9] != 6 || total > len(data) || ihl < 20 {
			return p, false
		}
		p.toServer = netip.AddrFrom4([4]byte(data[16:20])) == server
		tcp = data[ihl:total]
	case len(data) >= 40 && data[0]>>4 == 6:
		if data[6] != 6 {
			return p, false
		}
		p.toServer = netip.AddrFrom16([16]byte(data[24:40])) == server
		tcp = data[40 : 40+int(binary.BigEndian.Uint16(data[4:]))]
	default:
		return p, false
	}
	if len(tcp) < 20 {
		return p, false
	}
	p.seq = binary.BigEndian.Uint32(tcp[4:])
	p.ack = binary.BigEndian.Uint32(tcp[8:])
	p.flags = tcp[13]
	doff := int(tcp[12]>>4) * 4
	p.payload = len(tcp) - doff
	for opts := tcp[20:doff]; len(opts) > 0; {
		switch opts[0] {
		case 0:
			opts = nil
			continue
		case 1:
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			break
		}
		if opts[0] == 2 && opts[1] == 4 {
			p.mss = int(binary.BigEndian.Uint16(opts[2:]))
		}
		opts = opts[opts[1]:]
	}
	return p, true
}

// firstFlight returns what the server sent before the first ACK of its data
// reached it: its SYN/ACK's MSS option, and the sizes of its data segments.
func (w *wire) firstFlight() (synAckMSS int, segments []int) {
	w.mu.Lock()
	packets := slices.Clone(w.packets)
	w.mu.Unlock()
	sort.SliceStable(packets, func(i, j int) bool { return packets[i].unixNs < packets[j].unixNs })
	var isn uint32
	for _, p := range packets {
		if !p.toServer && p.flags&0x12 == 0x12 {
			isn, synAckMSS = p.seq, p.mss
		}
		if p.toServer && p.flags&0x10 != 0 && int32(p.ack-(isn+1)) > 0 {
			break // the first ACK of server data
		}
		if !p.toServer && p.payload > 0 {
			segments = append(segments, p.payload)
		}
	}
	return synAckMSS, segments
}

// serveBytes answers each connection's one-line request with size bytes, in
// the path's server namespace, and closes the connection once the client has
// closed it (as an HTTP server keeping connections alive does): the server's
// socket stays ESTABLISHED while the response's ACKs come back, and tcp_probe
// fires only there.
func serveBytes(t *testing.T, p *Path, addr netip.AddrPort, size int) {
	t.Helper()
	ln, err := p.Listen(Server, "tcp", addr.String())
	if err != nil {
		t.Fatalf("listen in the server namespace: %v", err)
	}
	response := make([]byte, size)
	p.Go(context.Background(), func(ctx context.Context) error {
		go func() { <-ctx.Done(); ln.Close() }()
		for {
			conn, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				if _, err := conn.Write(response); err != nil {
					return
				}
				io.Copy(io.Discard, r)
			}()
		}
	})
}

// fetch asks the server for its response and reads all of it; it returns the
// client's address, which names the connection.
func fetch(t *testing.T, p *Path, server netip.AddrPort, want int) netip.AddrPort {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := p.Dial(ctx, "tcp", server.String())
	if err != nil {
		t.Fatalf("dial the server: %v", err)
	}
	defer conn.Close()
	client := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	if _, err := conn.Write([]byte("GET\n")); err != nil {
		t.Fatal(err)
	}
	n, err := io.ReadFull(conn, make([]byte, want))
	if err != nil {
		t.Fatalf("read %d bytes of the response (%v), want %d", n, err, want)
	}
	return netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
}

// setAdvMSS replaces the server's route to the client with one that announces
// advmss (ip route ... advmss N), keeping its initcwnd.
func setAdvMSS(t *testing.T, p *Path, advmss int) {
	t.Helper()
	err := p.Do(Server, func() error {
		routes, err := netlink.RouteList(nil, unix.AF_INET)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst != nil && r.Dst.IP.Equal(p.ClientAddr.AsSlice()) {
				r.AdvMSS = advmss
				return netlink.RouteReplace(&r)
			}
		}
		return errors.New("no route to the client")
	})
	if err != nil {
		t.Fatalf("set advmss %d on the server's route: %v", advmss, err)
	}
}

// kernelTrial runs one transfer of size bytes over a path with a kernel tap and
// returns the kernel's record of it and the wire's first flight.
func kernelTrial(t *testing.T, cfg Config, size, advmss int) (KernelConn, *wire) {
	t.Helper()
	w := &wire{}
	cfg.KernelTap = true
	cfg.Tap = w.tap
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	w.mu.Lock()
	w.server = p.ServerAddr
	w.mu.Unlock()
	if advmss > 0 {
		setAdvMSS(t, p, advmss)
	}
	server := netip.AddrPortFrom(p.ServerAddr, 8080)
	serveBytes(t, p, server, size)
	client := fetch(t, p, server, size)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := p.KernelConn(ctx, client)
	if err != nil {
		t.Fatalf("kernel record of the connection from %s: %v", client, err)
	}
	return conn, w
}

// TestKernelTapInitialWindow: for each congestion control and route initcwnd N,
// the kernel's window at the server socket's first tcp_probe is N, as is its
// window when it became ESTABLISHED; the server put exactly N full segments on
// the wire before the first ACK of its data came back (read from the emulator's
// tap, not from the kernel); and under CUBIC and Reno the window then grows as
// slow start says: each ACK of the first flight adds the segments it newly
// acknowledges, so the second round's window is 2N.
func TestKernelTapInitialWindow(t *testing.T) {
	needRoot(t)
	t.Cleanup(func() { CloseAll() })
	const size = 400_000 // more than four rounds at IW 25
	cases := []struct {
		cc   string
		iw   int
		ipv6 bool
	}{
		{"cubic", 4, false}, {"cubic", 10, false}, {"cubic", 25, false},
		{"reno", 4, false}, {"reno", 10, false}, {"reno", 25, false},
		{"bbr", 4, false}, {"bbr", 10, false}, {"bbr", 25, false},
		{"cubic", 10, true},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/IW%d", c.cc, c.iw)
		if c.ipv6 {
			name += "/IPv6"
		}
		t.Run(name, func(t *testing.T) {
			conn, w := kernelTrial(t, Config{RTT: 60 * time.Millisecond, InitCwnd: c.iw, CongestionControl: c.cc, IPv6: c.ipv6}, size, 0)
			if conn.CongestionControl != c.cc {
				t.Errorf("congestion control %q, want %q", conn.CongestionControl, c.cc)
			}
			if !conn.ISNKnown || conn.EstablishedUnixNs == 0 || !conn.Closed {
				t.Fatalf("the record misses the connection's start or end: %+v", conn.States)
			}
			if conn.InitialWindow != c.iw || conn.EstablishedWindow != c.iw {
				t.Errorf("initial window %d (first tcp_probe), %d (at ESTABLISHED), want the route's initcwnd %d",
					conn.InitialWindow, conn.EstablishedWindow, c.iw)
			}
			mss := conn.MSS
			// 1500 - 20 (IPv4) or 40 (IPv6) - 20 (TCP) - 12 (timestamps).
			wantMSS := 1448
			if c.ipv6 {
				wantMSS = 1428
			}
			if mss != wantMSS {
				t.Errorf("the kernel's MSS %d, want %d", mss, wantMSS)
			}
			_, flight := w.firstFlight()
			if len(flight) != c.iw {
				t.Errorf("the server sent %d data segments before the first ACK of its data (%v), want %d", len(flight), flight, c.iw)
			}
			for _, n := range flight {
				if n != wantMSS {
					t.Errorf("a first-flight segment of %d bytes, want full ones of %d", n, wantMSS)
					break
				}
			}
			rounds := conn.Rounds()
			if len(rounds) < 3 {
				t.Fatalf("%d rounds, want at least 3 for %d bytes: %+v", len(rounds), size, rounds)
			}
			if r := rounds[0]; r.Segments != c.iw || r.Cwnd != uint32(c.iw) || r.CwndAtStart != uint32(c.iw) || r.QueuedBytes == 0 {
				t.Errorf("round 1: %+v, want %d segments sent under a window of %d with data still queued", r, c.iw, c.iw)
			}
			if c.cc == "bbr" {
				return
			}
			checkSlowStart(t, conn, rounds[0])
			if r := rounds[1]; r.Cwnd != 2*uint32(c.iw) {
				t.Errorf("round 2 was sent under a window of %d, want %d (slow start doubles it)", r.Cwnd, 2*c.iw)
			}
		})
	}
}

// checkSlowStart checks the kernel's window at each ACK of the first flight
// against slow start (RFC 5681, tcp_slow_start): the ACK that newly
// acknowledges k segments raises the window by k, so the next event reports
// the window plus k; all of the first flight acknowledged, it is twice the
// initial window.
func checkSlowStart(t *testing.T, conn KernelConn, first KernelRound) {
	t.Helper()
	mss := uint32(conn.MSS)
	last := -1
	for i := 0; i+1 < len(conn.ACKs); i++ {
		ack, next := conn.ACKs[i], conn.ACKs[i+1]
		if int32(ack.Ack-first.End) > 0 {
			break
		}
		if next.SSThresh != ktcp.InfiniteSSThresh || next.CAState != ktcp.CAOpen {
			t.Fatalf("ACK %d: the socket left slow start or the Open state during the first flight (ssthresh %d, %s)", i, next.SSThresh, next.CAState)
		}
		acked := (ack.Ack - ack.SndUna + mss - 1) / mss
		if next.Cwnd != ack.Cwnd+acked {
			t.Errorf("ACK %d acknowledged %d segments under a window of %d, and the next event shows %d, want %d",
				i, acked, ack.Cwnd, next.Cwnd, ack.Cwnd+acked)
		}
		last = i + 1
	}
	if last < 0 {
		t.Fatal("no ACK of the first flight in the record")
	}
	if got := conn.ACKs[last].Cwnd; got != 2*uint32(conn.InitialWindow) {
		t.Errorf("after the first flight was acknowledged the window is %d, want %d", got, 2*conn.InitialWindow)
	}
}

// TestKernelTapAdvMSS: a server route announcing a smaller MSS than the
// client's (advmss 1400, as some CDNs do) changes neither the size of the
// server's segments (bounded by the client's MSS, 1460) nor its initial window
// in segments.
func TestKernelTapAdvMSS(t *testing.T) {
	needRoot(t)
	t.Cleanup(func() { CloseAll() })
	for _, iw := range []int{4, 10, 25} {
		t.Run(fmt.Sprintf("IW%d", iw), func(t *testing.T) {
			conn, w := kernelTrial(t, Config{RTT: 60 * time.Millisecond, InitCwnd: iw}, 200_000, 1400)
			synAckMSS, flight := w.firstFlight()
			if synAckMSS != 1400 {
				t.Fatalf("the server announced MSS %d, want the route's advmss 1400", synAckMSS)
			}
			if conn.MSS != 1448 {
				t.Errorf("the kernel's send MSS %d, want 1448 (the client's 1460 less timestamps)", conn.MSS)
			}
			if conn.InitialWindow != iw {
				t.Errorf("initial window %d segments, want %d", conn.InitialWindow, iw)
			}
			if len(flight) != iw || slices.ContainsFunc(flight, func(n int) bool { return n != 1448 }) {
				t.Errorf("first flight %v, want %d segments of 1448 bytes", flight, iw)
			}
		})
	}
}

// TestKernelTapOnlyItsPath: a path's tap records its own server's connections
// and nothing else: not another path's (whose server may have the same address
// in another process), not a connection inside its server namespace to another
// address.
func TestKernelTapOnlyItsPath(t *testing.T) {
	needRoot(t)
	t.Cleanup(func() { CloseAll() })
	ctx := context.Background()
	var paths []*Path
	for range 2 {
		p, err := Start(ctx, Config{RTT: 10 * time.Millisecond, KernelTap: true})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer p.Close()
		paths = append(paths, p)
		serveBytes(t, p, netip.AddrPortFrom(p.ServerAddr, 8080), 1000)
	}
	clients := make([]netip.AddrPort, 2)
	for i, p := range paths {
		clients[i] = fetch(t, p, netip.AddrPortFrom(p.ServerAddr, 8080), 1000)
	}
	// Inside the first server namespace, a connection over its loopback.
	err := paths[0].Do(Server, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:9090")
		if err != nil {
			return err
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		s, err := ln.Accept()
		if err != nil {
			return err
		}
		c.Write([]byte("x"))
		s.Read(make([]byte, 1))
		s.Close()
		return c.Close()
	})
	if err != nil {
		t.Fatalf("loopback connection in the server namespace: %v", err)
	}
	for i, p := range paths {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if _, err := p.KernelConn(wctx, clients[i]); err != nil {
			t.Errorf("path %d: %v", i, err)
		}
		cancel()
		conns, err := p.KernelConns(ctx)
		if err != nil {
			t.Fatalf("path %d: %v", i, err)
		}
		if len(conns) != 1 || conns[0].Client != clients[i] || conns[0].Server != netip.AddrPortFrom(p.ServerAddr, 8080) {
			t.Errorf("path %d recorded %d connections (%v), want only its own from %s", i, len(conns), conns, clients[i])
		}
	}
}

// TestKernelTapNotAsked: a path started without KernelTap says so.
func TestKernelTapNotAsked(t *testing.T) {
	p := &Path{}
	if _, err := p.KernelConns(context.Background()); !errors.Is(err, errNoKernelTap) {
		t.Errorf("KernelConns without a tap: %v", err)
	}
	_ = netlab.Client
}
