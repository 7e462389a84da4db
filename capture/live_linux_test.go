//go:build linux

package capture

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/slowstart/slowstart/internal/netnsexec"
	"golang.org/x/sys/unix"
)

// Live capture tests need root (CAP_NET_RAW, and CAP_SYS_ADMIN for network
// namespaces). They send traffic only on loopback and inside namespaces they
// make, which t.Cleanup removes.

// requireRoot skips a test that needs root, or fails it under CI=true where
// it must run.
func requireRoot(t *testing.T) { t.Helper(); testroot.Require(t, "live capture") }

// waitTimeout bounds how long a test waits for something that should happen
// at once; reaching it is a failure.
const waitTimeout = 10 * time.Second

// testName16 is a 16-bit hash of the test's name, to make names unique per
// test and process.
func testName16(t *testing.T) uint16 {
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	sum := h.Sum32()
	return uint16(sum ^ sum>>16)
}

func runCommand(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// netnsPair is two network namespaces joined by a veth pair, with IPv4 and
// IPv6 addresses on each end.
type netnsPair struct {
	clientPath, serverPath string // namespace files, for LiveOptions.Netns
	clientIf, serverIf     string
	client4, server4       netip.Addr
	client6, server6       netip.Addr
}

// newNetnsPair makes the namespaces and the veth pair (segmentation and
// receive offloads on); t.Cleanup deletes them, and the veth with them.
func newNetnsPair(t *testing.T) *netnsPair {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command (iproute2) is not installed")
	}
	suffix := fmt.Sprintf("%d%04x", os.Getpid()%1_000_000, testName16(t))
	clientNs, serverNs := "capturetest-c"+suffix, "capturetest-s"+suffix
	p := &netnsPair{
		clientPath: filepath.Join("/run/netns", clientNs), serverPath: filepath.Join("/run/netns", serverNs),
		clientIf: "ssc" + suffix, serverIf: "sss" + suffix,
		client4: netip.MustParseAddr("198.18.0.1"), server4: netip.MustParseAddr("198.18.0.2"),
		client6: netip.MustParseAddr("2001:2::1"), server6: netip.MustParseAddr("2001:2::2"),
	}
	for _, ns := range []string{clientNs, serverNs} {
		runCommand(t, "ip", "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("removing network namespace %s: %v\n%s", ns, err, out)
			}
		})
	}
	// Fixed MAC addresses and permanent neighbour entries: the first IPv6
	// neighbour solicitation on a fresh veth goes unanswered for a second.
	const clientMAC, serverMAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
	runCommand(t, "ip", "link", "add", p.clientIf, "address", clientMAC, "netns", clientNs,
		"type", "veth", "peer", "name", p.serverIf, "address", serverMAC, "netns", serverNs)
	for _, end := range []struct {
		ns, iface    string
		addr4, addr6 netip.Addr
		peer4, peer6 netip.Addr
		peerMAC      string
	}{
		{clientNs, p.clientIf, p.client4, p.client6, p.server4, p.server6, serverMAC},
		{serverNs, p.serverIf, p.server4, p.server6, p.client4, p.client6, clientMAC},
	} {
		runCommand(t, "ip", "-n", end.ns, "addr", "add", end.addr4.String()+"/24", "dev", end.iface)
		runCommand(t, "ip", "-n", end.ns, "addr", "add", end.addr6.String()+"/64", "dev", end.iface, "nodad")
		runCommand(t, "ip", "-n", end.ns, "link", "set", "lo", "up")
		runCommand(t, "ip", "-n", end.ns, "link", "set", end.iface, "up")
		for _, peer := range []netip.Addr{end.peer4, end.peer6} {
			runCommand(t, "ip", "-n", end.ns, "neigh", "replace", peer.String(), "lladdr", end.peerMAC, "dev", end.iface, "nud", "permanent")
		}
		if _, err := exec.LookPath("ethtool"); err == nil {
			out, err := exec.Command("ip", "netns", "exec", end.ns, "ethtool", "-K", end.iface, "tso", "on", "gso", "on", "gro", "on").CombinedOutput()
			if err != nil {
				t.Logf("turning offloads on for %s: %v: %s", end.iface, err, out)
			}
		}
	}
	return p
}

// inNamespace runs fn in the network namespace file path (see netnsexec.Run).
func inNamespace(t *testing.T, path string, fn func() error) {
	t.Helper()
	if err := netnsexec.Run(path, fn); err != nil {
		t.Fatal(err)
	}
}

// serveOnce accepts one connection on ln, sends it size bytes, half-closes,
// reads until the client closes, and reports the outcome on the channel.
func serveOnce(ln net.Listener, size int) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			conn, err := ln.Accept()
			if err != nil {
				return err
			}
			defer conn.Close()
			if _, err := conn.Write(make([]byte, size)); err != nil {
				return fmt.Errorf("sending %d bytes: %w", size, err)
			}
			if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
				return err
			}
			// The client's FIN has crossed the client's interface once this returns.
			_, err = io.Copy(io.Discard, conn)
			return err
		}()
	}()
	return done
}

// fetchAll reads conn until the server closes, then closes it.
func fetchAll(conn net.Conn) (int64, error) {
	defer conn.Close()
	return io.Copy(io.Discard, conn)
}

// collectPackets calls Next until io.EOF, copying payloads.
func collectPackets(live *Live) ([]Packet, error) {
	var packets []Packet
	for {
		var p Packet
		err := live.Next(&p)
		if err == io.EOF {
			return packets, nil
		}
		if err != nil {
			return packets, err
		}
		p.Payload = bytes.Clone(p.Payload)
		packets = append(packets, p)
	}
}

// collectInBackground collects packets in another goroutine.
func collectInBackground(live *Live) func(t *testing.T) []Packet {
	type result struct {
		packets []Packet
		err     error
	}
	done := make(chan result, 1)
	go func() {
		packets, err := collectPackets(live)
		done <- result{packets, err}
	}()
	return func(t *testing.T) []Packet {
		t.Helper()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("Next: %v", r.err)
			}
			return r.packets
		case <-time.After(waitTimeout):
			t.Fatalf("Next did not return io.EOF within %v of Stop", waitTimeout)
			return nil
		}
	}
}

// checkConnection checks that packets hold exactly one whole connection
// between client and server (the server sending size bytes), and nothing
// else: handshake, both FINs, every data byte in sequence space, kernel
// timestamps in order within [startNs, endNs].
func checkConnection(t *testing.T, packets []Packet, client, server netip.AddrPort, size int, startNs, endNs int64) {
	t.Helper()
	if len(packets) == 0 {
		t.Fatal("no packets captured")
	}
	var sawSYN, sawSYNACK, sawServerFIN, sawClientFIN bool
	var serverISN uint32
	type span struct{ from, to int64 }
	var data []span
	var fromClient, fromServer int
	for i, p := range packets {
		src, dst := netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort)
		switch {
		case src == client && dst == server:
			fromClient++
			if p.Has(FlagSYN) && !p.Has(FlagACK) {
				sawSYN = true
			}
			if p.Has(FlagFIN) {
				sawClientFIN = true
			}
		case src == server && dst == client:
			fromServer++
			if p.Has(FlagSYN | FlagACK) {
				sawSYNACK, serverISN = true, p.Seq
			}
			if p.Has(FlagFIN) {
				sawServerFIN = true
			}
			if p.PayloadLen > 0 {
				if !sawSYNACK {
					t.Fatalf("packet %d: data before the SYN/ACK", i)
				}
				from := int64(p.Seq - serverISN - 1)
				data = append(data, span{from, from + int64(p.PayloadLen)})
			}
		default:
			t.Fatalf("packet %d: %s -> %s is not of the connection %s -> %s: the filter let it through", i, src, dst, client, server)
		}
		if p.TimestampNs < startNs || p.TimestampNs > endNs {
			t.Errorf("packet %d: timestamp %d outside the transfer's [%d, %d]", i, p.TimestampNs, startNs, endNs)
		}
		if i > 0 && p.TimestampNs < packets[i-1].TimestampNs {
			t.Errorf("packet %d: timestamp %d before the previous packet's %d", i, p.TimestampNs, packets[i-1].TimestampNs)
		}
	}
	if !sawSYN || !sawSYNACK || !sawServerFIN || !sawClientFIN {
		t.Errorf("SYN %v, SYN/ACK %v, server FIN %v, client FIN %v: want all", sawSYN, sawSYNACK, sawServerFIN, sawClientFIN)
	}
	sort.Slice(data, func(i, j int) bool { return data[i].from < data[j].from })
	var covered int64 // bytes [0, covered) of the response were seen
	for _, s := range data {
		if s.from > covered {
			t.Fatalf("response bytes [%d, %d) are missing from the capture", covered, s.from)
		}
		covered = max(covered, s.to)
	}
	if covered != int64(size) {
		t.Errorf("the capture covers %d bytes of sequence space; the server sent %d", covered, size)
	}
	t.Logf("%d packets (%d from the client, %d from the server), %d carrying data", len(packets), fromClient, fromServer, len(data))
}

func TestLiveNetnsTransfer(t *testing.T) {
	requireRoot(t)
	pair := newNetnsPair(t)
	const (
		port, otherPort = 8080, 8081
		size, otherSize = 3 << 20, 1 << 20
	)
	for _, tt := range []struct {
		name           string
		client, server netip.Addr
	}{
		{"IPv4", pair.client4, pair.server4},
		{"IPv6", pair.client6, pair.server6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			iface, src, err := RouteInterfaceIn(pair.clientPath, tt.server)
			if err != nil {
				t.Fatal(err)
			}
			if iface != pair.clientIf || src != tt.client {
				t.Errorf("route to %s: interface %q, source %s; want %q, %s", tt.server, iface, src, pair.clientIf, tt.client)
			}

			var ln, otherLn net.Listener
			inNamespace(t, pair.serverPath, func() (err error) {
				if ln, err = net.Listen("tcp", netip.AddrPortFrom(tt.server, port).String()); err != nil {
					return err
				}
				otherLn, err = net.Listen("tcp", netip.AddrPortFrom(tt.server, otherPort).String())
				return err
			})
			defer ln.Close()
			defer otherLn.Close()

			live, err := OpenLive(context.Background(), LiveOptions{
				Interface: pair.clientIf, Netns: pair.clientPath, Filter: Filter{Remote: tt.server, Port: port},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer live.Close()
			collected := collectInBackground(live)
			startNs := time.Now().UnixNano()

			served, otherServed := serveOnce(ln, size), serveOnce(otherLn, otherSize)
			var conn, otherConn net.Conn
			inNamespace(t, pair.clientPath, func() (err error) {
				if conn, err = net.Dial("tcp", ln.Addr().String()); err != nil {
					return err
				}
				otherConn, err = net.Dial("tcp", otherLn.Addr().String())
				return err
			})
			fetched, otherFetched := make(chan int64, 1), make(chan int64, 1)
			go func() { n, _ := fetchAll(otherConn); otherFetched <- n }()
			go func() { n, _ := fetchAll(conn); fetched <- n }()
			if n := <-fetched; n != size {
				t.Errorf("fetched %d bytes, want %d", n, size)
			}
			if n := <-otherFetched; n != otherSize {
				t.Errorf("fetched %d bytes on the other port, want %d", n, otherSize)
			}
			for _, done := range []<-chan error{served, otherServed} {
				if err := <-done; err != nil {
					t.Fatalf("server: %v", err)
				}
			}
			live.Stop()
			endNs := time.Now().UnixNano()
			packets := collected(t)

			checkConnection(t, packets, netip.MustParseAddrPort(conn.LocalAddr().String()), netip.AddrPortFrom(tt.server, port), size, startNs, endNs)
			st := live.Stats()
			if st.Packets != int64(len(packets)) || st.TCP != st.Packets || st.KernelPackets != st.Packets || st.KernelDrops != 0 {
				t.Errorf("stats %+v: want Packets = TCP = KernelPackets = %d packets returned (the other connection filtered in the kernel), no drops", st, len(packets))
			}
			if st.Interface != pair.clientIf || st.LinkType != "Raw" || st.Snaplen != DefaultSnaplen {
				t.Errorf("stats %+v: want interface %s, link type Raw, snaplen %d", st, pair.clientIf, DefaultSnaplen)
			}
			if live.untimed != 0 {
				t.Errorf("%d packets came without a kernel timestamp", live.untimed)
			}
			largest := 0
			for _, p := range packets {
				largest = max(largest, p.HeaderLen+p.PayloadLen)
			}
			// Offloads are on: the server's kernel hands the veth segments
			// larger than the MTU, and they arrive whole.
			if largest <= 1500 {
				t.Errorf("the largest TCP segment captured is %d bytes: with offloads on some should exceed the 1500-byte MTU", largest)
			}
			t.Logf("largest TCP segment %d bytes; %d timestamps raised to keep them in order (by at most %d ns)",
				largest, st.ClampedTimestamps, st.MaxClampNs)
		})
	}
}

func TestLiveLoopbackEachPacketOnceAndTee(t *testing.T) {
	requireRoot(t)
	for _, snaplen := range []int{0, 128} {
		t.Run(fmt.Sprintf("snaplen %d", snaplen), func(t *testing.T) { testLoopbackOnceAndTee(t, snaplen) })
	}
}

// testLoopbackOnceAndTee captures a transfer on loopback keeping snaplen bytes
// of each packet (0: the default).
func testLoopbackOnceAndTee(t *testing.T, snaplen int) {
	const size = 1 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	server := netip.MustParseAddrPort(ln.Addr().String())

	live, err := OpenLive(context.Background(), LiveOptions{
		Interface: "lo", Filter: Filter{Remote: server.Addr(), Port: server.Port()}, BufferBytes: 32 << 20, Snaplen: snaplen,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var teeFile bytes.Buffer
	tee, err := NewPcapWriter(&teeFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	live.Tee(tee)
	collected := collectInBackground(live)
	startNs := time.Now().UnixNano()

	served := serveOnce(ln, size)
	conn, err := net.Dial("tcp", server.String())
	if err != nil {
		t.Fatal(err)
	}
	client := netip.MustParseAddrPort(conn.LocalAddr().String())
	if n, err := fetchAll(conn); n != size || err != nil {
		t.Fatalf("fetched %d bytes (%v), want %d", n, err, size)
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	live.Stop()
	packets := collected(t)
	checkConnection(t, packets, client, server, size, startNs, time.Now().UnixNano())

	// Each packet once: no two packets are the same, and the response's
	// segments cover its size exactly. A segment the server's TCP sent again
	// (a retransmission timer fired while the machine stalled: seen once
	// under the race detector) is another packet, and covers bytes already
	// covered; it is counted apart and named.
	var payloadBytes, resentBytes int
	var ranges [][2]uint32 // the server's segments, as sequence ranges
	seen := map[string]int{}
	for i, p := range packets {
		if p.Src == server.Addr() && p.SrcPort == server.Port() && p.PayloadLen > 0 {
			ranges = append(ranges, [2]uint32{p.Seq, p.Seq + uint32(p.PayloadLen)})
		}
		// The options whole: the client's acknowledgements of a zero window,
		// one for each of the server's window probes, differ only in the
		// timestamp they echo (and one for a segment sent again in its D-SACK
		// block), where a copy of the same packet is the same in all.
		key := fmt.Sprintf("%v %d %d %d %d %x %d %+v", p.Src, p.SrcPort, p.Seq, p.Ack, p.PayloadLen, p.Flags, p.Window, p.Options)
		if j, dup := seen[key]; dup {
			t.Errorf("packets %d and %d are the same packet (%s): loopback copies were not removed", j, i, key)
		}
		seen[key] = i
	}
	payloadBytes, resentBytes = coveredBytes(ranges)
	if resentBytes > 0 {
		t.Logf("the server's TCP sent %d bytes again", resentBytes)
	}
	if payloadBytes != size {
		t.Errorf("the server's segments cover %d bytes, want %d: packets were missed", payloadBytes, size)
	}
	var keptBytes, wireBytes int64
	for i, p := range packets {
		headerBytes := p.HeaderLen + ipv4HeaderBytes
		keptBytes += int64(headerBytes + len(p.Payload))
		wireBytes += int64(headerBytes + p.PayloadLen)
		if snaplen != 0 && headerBytes+len(p.Payload) > snaplen {
			t.Fatalf("packet %d: %d bytes kept, more than the snap length %d", i, headerBytes+len(p.Payload), snaplen)
		}
	}
	if snaplen != 0 && keptBytes >= wireBytes {
		t.Errorf("a %d-byte snap length kept all %d bytes", snaplen, keptBytes)
	}
	if st := live.Stats(); st.Packets != int64(len(packets)) || st.Bytes != wireBytes || st.KernelDrops != 0 {
		t.Errorf("stats %+v: want %d packets, %d bytes (as on the wire), no drops", st, len(packets), wireBytes)
	}

	// The tee'd pcap holds what Next returned.
	if err := tee.Flush(); err != nil {
		t.Fatal(err)
	}
	fromTee, stats, err := readAll(t, teeFile.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(fromTee) != len(packets) || stats.TCP != int64(len(packets)) || stats.Undecodable != 0 {
		t.Fatalf("the tee'd pcap holds %d packets (stats %+v), Next returned %d", len(fromTee), stats, len(packets))
	}
	for i := range packets {
		if d := diffPacket(fromTee[i], packets[i]); d != "" {
			t.Fatalf("tee'd packet %d differs from Next's:%s", i, d)
		}
	}
}

// coveredBytes is how many bytes sequence ranges cover (from the first range's
// start, modulo 2³²) and how many more they carry (bytes sent again).
func coveredBytes(ranges [][2]uint32) (covered, again int) {
	if len(ranges) == 0 {
		return 0, 0
	}
	base := ranges[0][0]
	rel := make([][2]int64, len(ranges))
	total := 0
	for i, r := range ranges {
		rel[i] = [2]int64{int64(r[0] - base), int64(r[1] - base)}
		total += int(r[1] - r[0])
	}
	slices.SortFunc(rel, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	end := int64(0)
	for _, r := range rel {
		if r[1] > end {
			covered += int(r[1] - max(r[0], end))
			end = r[1]
		}
	}
	return covered, total - covered
}

// TestCoveredBytes: the helper above counts a range sent again once, a
// partial resend by its new bytes only, across the 2³² wrap.
func TestCoveredBytes(t *testing.T) {
	const w = 1<<32 - 100
	for _, tc := range []struct {
		ranges         [][2]uint32
		covered, again int
	}{
		{[][2]uint32{{10, 20}, {20, 30}}, 20, 0},
		{[][2]uint32{{10, 20}, {20, 30}, {20, 30}}, 20, 10},
		{[][2]uint32{{10, 20}, {15, 40}}, 30, 5},
		{[][2]uint32{{w, 0}, {0, 50}, {w + 50, 20}}, 150, 70}, // w+100 wraps to 0
		{[][2]uint32{{10, 20}, {30, 40}}, 20, 0},              // a hole: 20 of the 30 bytes from 10
	} {
		if c, a := coveredBytes(tc.ranges); c != tc.covered || a != tc.again {
			t.Errorf("%v: covered %d, again %d; want %d, %d", tc.ranges, c, a, tc.covered, tc.again)
		}
	}
}

func TestLiveSetFilter(t *testing.T) {
	requireRoot(t)
	var listeners [2]net.Listener
	var ports [2]uint16
	for i := range listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		listeners[i] = ln
		ports[i] = netip.MustParseAddrPort(ln.Addr().String()).Port()
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	transfer := func(i int) netip.AddrPort {
		t.Helper()
		served := serveOnce(listeners[i], 1000)
		conn, err := net.Dial("tcp", listeners[i].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		local := netip.MustParseAddrPort(conn.LocalAddr().String())
		if n, err := fetchAll(conn); n != 1000 || err != nil {
			t.Fatalf("fetched %d bytes (%v), want 1000", n, err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		return local
	}

	live, err := OpenLive(context.Background(), LiveOptions{Interface: "lo", Filter: Filter{Remote: loopback, Port: ports[0]}})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	collected := collectInBackground(live)
	first := transfer(0)
	if err := live.SetFilter(Filter{Remote: loopback, Port: ports[1]}); err != nil {
		t.Fatal(err)
	}
	unseen := transfer(0)
	second := transfer(1)
	live.Stop()
	packets := collected(t)
	if err := live.SetFilter(Filter{}); err == nil {
		t.Error("SetFilter after Stop: no error")
	}

	perClient := map[netip.AddrPort]int{}
	for _, p := range packets {
		if p.Has(FlagSYN) && !p.Has(FlagACK) {
			perClient[netip.AddrPortFrom(p.Src, p.SrcPort)]++
		}
	}
	if perClient[first] != 1 || perClient[second] != 1 || perClient[unseen] != 0 || len(perClient) != 2 {
		t.Errorf("SYNs per client %v: want one from %s (before SetFilter) and %s (the new port), none from %s",
			perClient, first, second, unseen)
	}
}

// readers are the two ways a Live reads: the packet ring, and recvmmsg
// (where the kernel gives no ring).
var readers = []struct {
	name     string
	recvmmsg bool
}{{"ring", false}, {"recvmmsg", true}}

// checkReader fails the test when the Live does not read the way asked.
func checkReader(t *testing.T, live *Live, recvmmsg bool) {
	t.Helper()
	if (live.ring == nil) != recvmmsg {
		t.Fatalf("the capture reads with a ring: %t, want %t", live.ring != nil, !recvmmsg)
	}
}

func TestLiveStopWakesBlockedNext(t *testing.T) {
	requireRoot(t)
	for _, reader := range readers {
		t.Run(reader.name, func(t *testing.T) { testLiveStopWakesBlockedNext(t, reader.recvmmsg) })
	}
}

func testLiveStopWakesBlockedNext(t *testing.T, recvmmsg bool) {
	// A filter nothing matches: an address of 127/8 nobody uses, port 9.
	quiet := netip.AddrFrom4([4]byte{127, 77, byte(os.Getpid() >> 8), byte(os.Getpid())})
	live, err := OpenLive(context.Background(), LiveOptions{Interface: "lo", Filter: Filter{Remote: quiet, Port: 9}, Ring: !recvmmsg})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	checkReader(t, live, recvmmsg)
	started := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		close(started)
		var p Packet
		result <- live.Next(&p)
	}()
	<-started
	live.Stop()
	select {
	case err := <-result:
		if err != io.EOF {
			t.Errorf("Next after Stop: got %v, want io.EOF", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Next was still blocked %v after Stop", waitTimeout)
	}
	var p Packet
	if err := live.Next(&p); err != io.EOF {
		t.Errorf("Next again: got %v, want io.EOF", err)
	}
	live.Stop() // a second Stop does nothing
	if err := live.Close(); err != nil {
		t.Error(err)
	}
	if err := live.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestLiveContextStops(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	live, err := OpenLive(ctx, LiveOptions{Interface: "lo", Filter: Filter{Remote: netip.MustParseAddr("127.0.0.1"), Port: 9}})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	collected := collectInBackground(live)
	cancel()
	if packets := collected(t); len(packets) != 0 {
		t.Errorf("captured %d packets on a port nobody uses", len(packets))
	}
}

// rstBurst is count TCP RST segments from src to dst on loopback, sent
// through a raw socket: the kernel answers none of them.
type rstBurst struct {
	src, dst netip.AddrPort
	packets  [][]byte
	fd       int
}

func newRSTBurst(t *testing.T, src, dst netip.AddrPort, count int, firstSeq uint32) *rstBurst {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	b := &rstBurst{src: src, dst: dst, fd: fd}
	for i := range count {
		b.packets = append(b.packets, buildIP(t, testSegment{
			src: src.Addr(), dst: dst.Addr(), srcPort: src.Port(), dstPort: dst.Port(),
			seq: firstSeq + uint32(i), flags: FlagRST, wantOptions: noOptions,
		}))
	}
	return b
}

func (b *rstBurst) send(t *testing.T) {
	t.Helper()
	to := &unix.SockaddrInet4{Addr: b.dst.Addr().As4()}
	for i, packet := range b.packets {
		if err := unix.Sendto(b.fd, packet, 0, to); err != nil {
			t.Fatalf("sending RST %d: %v", i, err)
		}
	}
}

// checkBurst checks that packets are the burst's, each once, in order.
func checkBurst(t *testing.T, packets []Packet, count int, firstSeq uint32) {
	t.Helper()
	if len(packets) != count {
		t.Errorf("captured %d of the %d packets sent before Stop", len(packets), count)
	}
	for i, p := range packets {
		if p.Seq != firstSeq+uint32(i) || !p.Has(FlagRST) {
			t.Fatalf("packet %d: seq %d flags %#x, want seq %d, RST: lost or reordered", i, p.Seq, p.Flags, firstSeq+uint32(i))
		}
	}
}

func TestLiveNoLossAtStop(t *testing.T) {
	requireRoot(t)
	for _, reader := range readers {
		t.Run(reader.name, func(t *testing.T) { testLiveNoLossAtStop(t, reader.recvmmsg) })
	}
}

func testLiveNoLossAtStop(t *testing.T, recvmmsg bool) {
	const count = 10_000
	pid := os.Getpid()
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 78, byte(pid >> 8), byte(pid)}), 9)
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 79, byte(pid >> 8), byte(pid)}), 40000)
	filter := Filter{Remote: dst.Addr(), Port: dst.Port(), LocalPort: src.Port()}
	// Room for the whole burst in the kernel: a small packet takes about a
	// kilobyte of receive buffer.
	const bufferBytes = 64 << 20

	t.Run("reader running", func(t *testing.T) {
		burst := newRSTBurst(t, src, dst, count, 1)
		live, err := OpenLive(context.Background(), LiveOptions{Interface: "lo", Filter: filter, BufferBytes: bufferBytes, Ring: !recvmmsg})
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		checkReader(t, live, recvmmsg)
		collected := collectInBackground(live)
		burst.send(t)
		live.Stop()
		checkBurst(t, collected(t), count, 1)
		if live.untimed != 0 {
			t.Errorf("%d packets came without a kernel timestamp", live.untimed)
		}
		if st := live.Stats(); st.KernelDrops != 0 || st.KernelPackets != count {
			t.Errorf("stats %+v: want %d kernel packets, no drops", st, count)
		}
	})

	t.Run("drained after Stop", func(t *testing.T) {
		burst := newRSTBurst(t, src, dst, count, 1)
		late := newRSTBurst(t, src, dst, 100, count+1)
		live, err := OpenLive(context.Background(), LiveOptions{Interface: "lo", Filter: filter, BufferBytes: bufferBytes, Ring: !recvmmsg})
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		checkReader(t, live, recvmmsg)
		burst.send(t)

		// Take half the burst while the capture runs, the rest after Stop.
		var packets []Packet
		for range count / 2 {
			var p Packet
			if err := live.Next(&p); err != nil {
				t.Fatal(err)
			}
			packets = append(packets, p)
		}
		live.Stop()
		late.send(t) // after Stop: must not be captured
		rest, err := collectPackets(live)
		if err != nil {
			t.Fatal(err)
		}
		checkBurst(t, append(packets, rest...), count, 1)
		if st := live.Stats(); st.KernelDrops != 0 {
			t.Errorf("stats %+v: want no drops", st)
		}
	})
}

func TestLiveNextAllocatesNothing(t *testing.T) {
	requireRoot(t)
	for _, reader := range readers {
		t.Run(reader.name, func(t *testing.T) { testLiveNextAllocatesNothing(t, reader.recvmmsg) })
	}
}

func testLiveNextAllocatesNothing(t *testing.T, recvmmsg bool) {
	const count = 4000
	pid := os.Getpid()
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 80, byte(pid >> 8), byte(pid)}), 9)
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 81, byte(pid >> 8), byte(pid)}), 40000)
	burst := newRSTBurst(t, src, dst, count, 1)
	live, err := OpenLive(context.Background(), LiveOptions{Interface: "lo", Filter: Filter{Remote: dst.Addr()}, BufferBytes: 32 << 20, Ring: !recvmmsg})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	checkReader(t, live, recvmmsg)
	var teeFile bytes.Buffer
	teeFile.Grow(count * 100)
	tee, err := NewPcapWriter(&teeFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	live.Tee(tee)
	burst.send(t)
	var p Packet
	// AllocsPerRun calls once more than asked, to warm up.
	allocs := testing.AllocsPerRun(count-1, func() {
		if err := live.Next(&p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Next allocates %.2f times per packet, want 0", allocs)
	}
	if p.Seq != count {
		t.Errorf("the last packet has seq %d, want %d", p.Seq, count)
	}
}

func TestParseControl(t *testing.T) {
	const timestampNs, wireBytes = 1_700_000_000_123_456_789, 70_000
	cmsg := func(level, typ int32, payload []byte) []byte {
		b := make([]byte, unix.CmsgSpace(len(payload)))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(len(payload)))
		copy(b[unix.CmsgLen(0):], payload)
		return b
	}
	ts := unix.NsecToTimespec(timestampNs)
	timestamp := cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)))
	aux := unix.TpacketAuxdata{Len: wireBytes, Snaplen: 65535}
	auxdata := cmsg(unix.SOL_PACKET, unix.PACKET_AUXDATA, unsafe.Slice((*byte)(unsafe.Pointer(&aux)), unsafe.Sizeof(aux)))
	other := cmsg(unix.SOL_SOCKET, unix.SCM_RIGHTS, []byte{1, 2, 3, 4})
	tests := []struct {
		name                 string
		control              []byte
		wantTimeNs, wantWire int64
	}{
		{"both", slices.Concat(timestamp, auxdata), timestampNs, wireBytes},
		{"both, other order, another message first", slices.Concat(other, auxdata, timestamp), timestampNs, wireBytes},
		{"timestamp only", timestamp, timestampNs, 0},
		{"none", nil, 0, 0},
		{"cut inside a message", slices.Concat(timestamp, auxdata[:len(auxdata)-8]), timestampNs, 0},
		{"cut inside a header", slices.Concat(timestamp, auxdata[:6]), timestampNs, 0},
	}
	for _, tt := range tests {
		// Copy into 8-byte aligned memory, as the kernel's buffer is.
		aligned := make([]uint64, (len(tt.control)+7)/8)
		control := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(aligned))), len(aligned)*8)[:len(tt.control)]
		copy(control, tt.control)
		gotTime, gotWire := parseControl(control)
		if gotTime != tt.wantTimeNs || int64(gotWire) != tt.wantWire {
			t.Errorf("%s: got time %d, wire length %d; want %d, %d", tt.name, gotTime, gotWire, tt.wantTimeNs, tt.wantWire)
		}
	}
}

func TestOpenLiveErrors(t *testing.T) {
	requireRoot(t)
	missing := fmt.Sprintf("nosuch%d", os.Getpid())
	_, err := OpenLive(context.Background(), LiveOptions{Interface: missing})
	if !errors.Is(err, ErrNoInterface) || !strings.Contains(err.Error(), missing) {
		t.Errorf("unknown interface: got %v, want ErrNoInterface naming %s", err, missing)
	}
	for _, tt := range []struct {
		name string
		opts LiveOptions
	}{
		{"no interface", LiveOptions{}},
		{"missing namespace", LiveOptions{Interface: "lo", Netns: "/run/netns/" + missing}},
		{"negative buffer", LiveOptions{Interface: "lo", BufferBytes: -1}},
		{"negative snaplen", LiveOptions{Interface: "lo", Snaplen: -1}},
	} {
		if _, err := OpenLive(context.Background(), tt.opts); err == nil || errors.Is(err, ErrNoInterface) {
			t.Errorf("%s: got %v, want an error other than ErrNoInterface", tt.name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenLive(ctx, LiveOptions{Interface: "lo"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v, want context.Canceled", err)
	}
}

func TestRouteInterfaceLoopback(t *testing.T) {
	for _, dst := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::1"} {
		iface, src, err := RouteInterface(netip.MustParseAddr(dst))
		if err != nil {
			if dst == "::1" && !slices.ContainsFunc(mustInterfaceAddrs(t), netip.Addr.Is6) {
				continue // no IPv6 on this host
			}
			t.Fatalf("route to %s: %v", dst, err)
		}
		if iface != "lo" || !src.IsLoopback() {
			t.Errorf("route to %s: interface %q source %s, want lo and a loopback source", dst, iface, src)
		}
	}
	if _, _, err := RouteInterface(netip.Addr{}); err == nil {
		t.Error("route to the zero address: no error")
	}
}

func mustInterfaceAddrs(t *testing.T) []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if prefix, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, prefix.Addr())
		}
	}
	return out
}
