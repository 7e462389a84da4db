package link

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Addresses of the emulated pair, from the benchmarking range 198.18.0.0/15 (RFC 2544).
const (
	testClientAddress = "198.18.0.1"
	testServerAddress = "198.18.0.2"
)

// skipUnlessTUNWorks skips tests that need root, /dev/net/tun and the ip command.
func skipUnlessTUNWorks(tb testing.TB) {
	tb.Helper()
	testroot.Require(tb, "network namespaces and TUN devices")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		tb.Skip("needs /dev/net/tun")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs the ip command (iproute2)")
	}
}

// testNamespace is a network namespace that exists for one test.
type testNamespace struct {
	name   string
	handle netns.NsHandle
}

// newTestNamespace makes a named network namespace and removes it when the test ends,
// whether it passed or not.
func newTestNamespace(tb testing.TB, role string) *testNamespace {
	tb.Helper()
	name := fmt.Sprintf("slowstart-link-test-%d-%s", os.Getpid(), role)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	handle, err := netns.GetFromName(name)
	if err != nil {
		tb.Fatalf("opening namespace %s: %v", name, err)
	}
	tb.Cleanup(func() { handle.Close() })
	return &testNamespace{name: name, handle: handle}
}

// do runs fn on an OS thread switched into the namespace. The thread is returned to the
// Go scheduler only if switching back worked; otherwise it ends with its goroutine.
func (ns *testNamespace) do(fn func() error) error {
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		original, err := netns.Get()
		if err != nil {
			result <- fmt.Errorf("reading the current namespace: %w", err)
			return
		}
		defer original.Close()
		if err := netns.Set(ns.handle); err != nil {
			result <- fmt.Errorf("entering namespace %s: %w", ns.name, err)
			return
		}
		fnErr := fn()
		if err := netns.Set(original); err != nil {
			result <- errors.Join(fnErr, fmt.Errorf("leaving namespace %s: %w", ns.name, err))
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		result <- fnErr
	}()
	return <-result
}

// addTUN creates a TUN device (IFF_TUN|IFF_NO_PI) in the namespace, gives it address/30,
// brings it and loopback up, and returns it as a Device.
func (ns *testNamespace) addTUN(tb testing.TB, address string) *TUN {
	tb.Helper()
	var file *os.File
	err := ns.do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening /dev/net/tun: %w", err)
		}
		request, err := unix.NewIfreq("tun0")
		if err != nil {
			unix.Close(fd)
			return err
		}
		request.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, request); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF: %w", err)
		}
		f := os.NewFile(uintptr(fd), "/dev/net/tun (tun0 in "+ns.name+")")
		file = f
		return nil
	})
	if err != nil {
		tb.Fatalf("creating a TUN device in %s: %v", ns.name, err)
	}
	tun, err := NewTUN(file)
	if err != nil {
		file.Close()
		tb.Fatal(err)
	}
	handle, err := netlink.NewHandleAt(ns.handle)
	if err != nil {
		tun.Close()
		tb.Fatalf("netlink in %s: %v", ns.name, err)
	}
	defer handle.Close()
	configure := func() error {
		tunLink, err := handle.LinkByName("tun0")
		if err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(address + "/30")
		if err != nil {
			return err
		}
		if err := handle.AddrAdd(tunLink, addr); err != nil {
			return fmt.Errorf("adding %s: %w", address, err)
		}
		if err := handle.LinkSetUp(tunLink); err != nil {
			return err
		}
		loopback, err := handle.LinkByName("lo")
		if err != nil {
			return err
		}
		return handle.LinkSetUp(loopback)
	}
	if err := configure(); err != nil {
		tun.Close()
		tb.Fatalf("configuring tun0 in %s: %v", ns.name, err)
	}
	return tun
}

// startEmulatedPair makes a client and a server namespace joined by the emulator and
// returns them; everything is removed when the test ends.
func startEmulatedPair(tb testing.TB, clientToServer, serverToClient Config, options RunOptions) (client, server *testNamespace) {
	tb.Helper()
	client = newTestNamespace(tb, "c")
	server = newTestNamespace(tb, "s")
	clientTUN := client.addTUN(tb, testClientAddress)
	serverTUN := server.addTUN(tb, testServerAddress)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		stats, err := Run(ctx, clientTUN, serverTUN, clientToServer, serverToClient, options)
		for _, direction := range []struct {
			name  string
			stats DirectionStats
		}{{"client→server", stats.AToB}, {"server→client", stats.BToA}} {
			if out := direction.stats.PacketsOut; out > 0 {
				tb.Logf("%s: %d packets out, released late by %v on average, %v at most; timer late by %v on average, %v at most",
					direction.name, out,
					time.Duration(direction.stats.LatenessSumNs/out), time.Duration(direction.stats.LatenessMaxNs),
					time.Duration(direction.stats.TimerLatenessSumNs/max(direction.stats.TimerWakeups, 1)),
					time.Duration(direction.stats.TimerLatenessMaxNs))
			}
		}
		done <- err
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	return client, server
}

// listenEcho listens on TCP inside the server namespace and echoes every connection.
func listenEcho(tb testing.TB, server *testNamespace) net.Listener {
	tb.Helper()
	var listener net.Listener
	if err := server.do(func() (err error) {
		listener, err = net.Listen("tcp4", testServerAddress+":0")
		return err
	}); err != nil {
		tb.Fatalf("listening in %s: %v", server.name, err)
	}
	tb.Cleanup(func() { listener.Close() })
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn)
			}()
		}
	}()
	return listener
}

// dialFrom connects from inside the client namespace and returns the connection and the
// time the handshake took (one round trip).
func dialFrom(tb testing.TB, client *testNamespace, address string) (net.Conn, time.Duration) {
	tb.Helper()
	var conn net.Conn
	var handshake time.Duration
	if err := client.do(func() (err error) {
		start := time.Now()
		conn, err = net.DialTimeout("tcp4", address, 5*time.Second)
		handshake = time.Since(start)
		return err
	}); err != nil {
		tb.Fatalf("connecting from %s to %s: %v", client.name, address, err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn, handshake
}

func TestRunThroughTUNDevices(t *testing.T) {
	skipUnlessTUNWorks(t)
	polling := quietOptions()
	polling.Poll = true
	t.Run("timers", func(t *testing.T) { testRunThroughTUNDevices(t, quietOptions()) })
	t.Run("polling", func(t *testing.T) { testRunThroughTUNDevices(t, polling) })
}

func testRunThroughTUNDevices(t *testing.T, options RunOptions) {
	const oneWay = 10 * time.Millisecond
	client, server := startEmulatedPair(t, Config{DelayNs: int64(oneWay)}, Config{DelayNs: int64(oneWay)}, options)
	listener := listenEcho(t, server)
	conn, handshake := dialFrom(t, client, listener.Addr().String())

	rtts := []time.Duration{handshake}
	message := []byte("slowstart link emulator probe 01")
	reply := make([]byte, len(message))
	for range 5 {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		if _, err := conn.Write(message); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, reply); err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
		if string(reply) != string(message) {
			t.Fatalf("echo %q, want %q", reply, message)
		}
	}
	t.Logf("round trips through 2 × %v: %v", oneWay, rtts)
	// No round trip may be shorter than the configured delays: that would be a packet
	// released early. Upward, a busy shared machine can stall any thread for milliseconds,
	// so the bound applies to the median.
	for i, rtt := range rtts {
		if rtt < 2*oneWay {
			t.Errorf("round trip %d took %v, less than the configured %v", i, rtt, 2*oneWay)
		}
	}
	slices.Sort(rtts)
	if median := rtts[len(rtts)/2]; median >= 2*oneWay+5*time.Millisecond {
		t.Errorf("median round trip %v, want under %v", median, 2*oneWay+5*time.Millisecond)
	}
}

// BenchmarkTUNRoundTripAccuracy sends ICMP echo requests through a path of 0 and of
// 70 ms each way (one request per iteration, from an otherwise idle emulator) and reports
// by how much the round trip, timed by the kernel's receive timestamp, exceeds twice the
// configured delay. Run it with e.g. -bench TUNRoundTrip -benchtime 200x.
func BenchmarkTUNRoundTripAccuracy(b *testing.B) {
	skipUnlessTUNWorks(b)
	for _, oneWay := range []time.Duration{0, 70 * time.Millisecond} {
		b.Run(fmt.Sprintf("one-way=%v", oneWay), func(b *testing.B) { benchmarkRoundTrip(b, oneWay) })
	}
}

func benchmarkRoundTrip(b *testing.B, oneWay time.Duration) {
	client, _ := startEmulatedPair(b, Config{DelayNs: int64(oneWay)}, Config{DelayNs: int64(oneWay)}, quietOptions())
	var socket int
	if err := client.do(func() (err error) {
		socket, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	}); err != nil {
		b.Fatalf("ICMP socket: %v", err)
	}
	defer unix.Close(socket)
	if err := unix.SetsockoptInt(socket, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		b.Fatal(err)
	}
	if err := unix.SetsockoptTimeval(socket, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		b.Fatal(err)
	}
	destination := &unix.SockaddrInet4{Addr: [4]byte{198, 18, 0, 2}}
	var excess []time.Duration
	buffer, control := make([]byte, 1500), make([]byte, 128)
	b.ResetTimer()
	for i := range b.N {
		request := []byte{8, 0, 0, 0, 0x51, 0x51, byte(i >> 8), byte(i), 's', 'l', 'o', 'w'}
		checksum := icmpChecksum(request)
		request[2], request[3] = byte(checksum>>8), byte(checksum)
		if oneWay == 0 {
			time.Sleep(10 * time.Millisecond) // let the emulator go idle, as before a real probe
		}
		sent := time.Now()
		if err := unix.Sendto(socket, request, 0, destination); err != nil {
			b.Fatal(err)
		}
		for {
			n, controlLength, _, _, err := unix.Recvmsg(socket, buffer, control, 0)
			if err == unix.EINTR {
				continue // the Go runtime's preemption signal
			}
			if err != nil {
				b.Fatalf("waiting for echo reply %d: %v", i, err)
			}
			headerLength := int(buffer[0]&0x0f) * 4
			if n < headerLength+8 || buffer[headerLength] != 0 || buffer[headerLength+7] != byte(i) {
				continue // not our reply
			}
			received, err := kernelTimestamp(control[:controlLength])
			if err != nil {
				b.Fatal(err)
			}
			excess = append(excess, received.Sub(sent)-2*oneWay)
			break
		}
	}
	b.StopTimer()
	slices.Sort(excess)
	percentile := func(p float64) float64 { return float64(excess[int(p*float64(len(excess)-1))].Microseconds()) }
	b.ReportMetric(percentile(0.5), "p50-excess-µs")
	b.ReportMetric(percentile(0.99), "p99-excess-µs")
	b.ReportMetric(float64(excess[0].Microseconds()), "min-excess-µs")
}

func icmpChecksum(data []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(data); i += 2 {
		sum += uint32(data[i])<<8 | uint32(data[i+1])
	}
	if len(data)%2 == 1 {
		sum += uint32(data[len(data)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// kernelTimestamp finds the SO_TIMESTAMPNS time in a control message.
func kernelTimestamp(control []byte) (time.Time, error) {
	messages, err := unix.ParseSocketControlMessage(control)
	if err != nil {
		return time.Time{}, err
	}
	for _, message := range messages {
		if message.Header.Level == unix.SOL_SOCKET && message.Header.Type == unix.SCM_TIMESTAMPNS && len(message.Data) >= 16 {
			ts := (*unix.Timespec)(unsafe.Pointer(&message.Data[0]))
			return time.Unix(ts.Sec, ts.Nsec), nil
		}
	}
	return time.Time{}, errors.New("no SO_TIMESTAMPNS control message")
}

// BenchmarkTUNThroughput moves data over one TCP connection from the server namespace
// to the client through an unlimited-rate path of 10 ms each way (20 ms round trip);
// the reported MB/s is the emulator's throughput for MTU-sized packets.
func BenchmarkTUNThroughput(b *testing.B) {
	skipUnlessTUNWorks(b)
	const oneWay = 10 * time.Millisecond
	client, server := startEmulatedPair(b, Config{DelayNs: int64(oneWay)}, Config{DelayNs: int64(oneWay)}, quietOptions())
	var listener net.Listener
	if err := server.do(func() (err error) {
		listener, err = net.Listen("tcp4", testServerAddress+":0")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer listener.Close()
	const chunkBytes = 1 << 20
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := listener.Accept()
		if err == nil {
			accepted <- conn
		}
		close(accepted)
	}()
	conn, _ := dialFrom(b, client, listener.Addr().String())
	sender, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	defer sender.Close()
	chunk := make([]byte, chunkBytes)
	b.SetBytes(chunkBytes)
	b.ResetTimer()
	sendErr := make(chan error, 1)
	go func() {
		var err error
		for range b.N {
			if _, err = sender.Write(chunk); err != nil {
				break
			}
		}
		sendErr <- err
	}()
	if _, err := io.CopyN(io.Discard, conn, int64(b.N)*chunkBytes); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
}
