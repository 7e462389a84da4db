//go:build linux

package labpath

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/netlab"
)

func needRoot(t *testing.T) {
	t.Helper()
	testroot.Require(t, "network namespaces")
}

// ownNamespaces lists the namespaces of this process under netlab.NetnsDir.
func ownNamespaces(t *testing.T) []string {
	t.Helper()
	names, err := netlab.NamespacesOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// echoServer accepts connections in the path's server namespace and echoes what
// it reads, until the path closes (Path.Go).
func echoServer(t *testing.T, p *Path, port uint16) netip.AddrPort {
	t.Helper()
	addr := netip.AddrPortFrom(p.ServerAddr, port)
	ln, err := p.Listen(Server, "tcp", addr.String())
	if err != nil {
		t.Fatalf("listen in the server namespace: %v", err)
	}
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
			go func() { io.Copy(conn, conn); conn.Close() }()
		}
	})
	return addr
}

// TestPathDelaysAndCloses: a path of 60 ms carries a connection from the client
// namespace to a server in the server namespace no faster than its RTT, counts
// its packets, runs the registered teardowns before the namespaces go, and leaves
// nothing once closed.
func TestPathDelaysAndCloses(t *testing.T) {
	needRoot(t)
	t.Cleanup(func() { CloseAll() })
	const rtt = 60 * time.Millisecond
	ctx := context.Background()
	p, err := Start(ctx, Config{RTT: rtt, InitCwnd: 4})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	names := []string{p.ClientNamespace, p.ServerNamespace}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(netlab.NetnsDir, name)); err != nil {
			t.Fatalf("namespace %s of a started path: %v", name, err)
		}
	}
	addr := echoServer(t, p, 7)

	start := time.Now()
	conn, err := p.Dial(ctx, "tcp", addr.String())
	if err != nil {
		t.Fatalf("dial the server from the client namespace: %v", err)
	}
	connect := time.Since(start)
	start = time.Now()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 4)
	if _, err := io.ReadFull(conn, reply); err != nil || string(reply) != "ping" {
		t.Fatalf("echo: %q, %v", reply, err)
	}
	echo := time.Since(start)
	conn.Close()
	// The emulator holds each packet half the RTT each way: neither the handshake
	// nor a request and its answer can take less than one RTT.
	if connect < rtt || echo < rtt {
		t.Errorf("connect took %v and an echo %v over a path of RTT %v: the emulator did not delay them", connect, echo, rtt)
	}

	var order []string
	p.OnClose(func() error {
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(netlab.NetnsDir, name)); err != nil {
				t.Errorf("teardown ran after namespace %s was removed", name)
			}
		}
		order = append(order, "second")
		return nil
	})
	p.OnClose(func() error { order = append(order, "third"); return errors.New("third's error") })

	stats, err := p.Stop()
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The exchange completed, so the emulator delivered at least the client's SYN,
	// handshake ACK and request, and the server's SYN/ACK and echo (the FINs may
	// still be inside the emulator's delay when it stops).
	if stats.AToB.PacketsOut < 3 || stats.BToA.PacketsOut < 2 {
		t.Errorf("the emulator delivered %d packets client→server and %d server→client, want at least 3 and 2",
			stats.AToB.PacketsOut, stats.BToA.PacketsOut)
	}
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "third's error") {
		t.Errorf("Close returned %v, want the teardown's error", err)
	}
	if strings.Join(order, ",") != "third,second" {
		t.Errorf("teardowns ran in the order %v, want the reverse of their registration", order)
	}
	if again := p.Close(); again == nil || again.Error() != err.Error() {
		t.Errorf("a second Close returned %v, want the first's %v", again, err)
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(netlab.NetnsDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s is left after Close (%v)", name, err)
		}
	}
	late := false
	p.OnClose(func() error { late = true; return nil })
	if !late {
		t.Error("a teardown registered after Close did not run at once")
	}
}

// TestPathDropsSYNs: DropSYNs reaches the emulator, so the client's first SYN
// is lost and the connect waits for the kernel's retransmission timeout (1 s).
func TestPathDropsSYNs(t *testing.T) {
	needRoot(t)
	t.Cleanup(func() { CloseAll() })
	ctx := context.Background()
	p, err := Start(ctx, Config{RTT: 10 * time.Millisecond, DropSYNs: 1})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Close()
	addr := echoServer(t, p, 7)
	start := time.Now()
	conn, err := p.Dial(ctx, "tcp", addr.String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
	if took := time.Since(start); took < time.Second {
		t.Errorf("connect took %v with the first SYN dropped, want at least the 1 s retransmission timeout", took)
	}
}

// TestStartFailureLeavesNothing: a path Start refuses leaves no namespace behind.
func TestStartFailureLeavesNothing(t *testing.T) {
	needRoot(t)
	t.Cleanup(func() { CloseAll() })
	before := ownNamespaces(t)
	cases := map[string]Config{
		"negative RTT":                    {RTT: -time.Millisecond},
		"a sysctl outside /proc/sys/net":  {Sysctls: map[string]string{"../kernel/hostname": "x"}},
		"loss probability greater than 1": {LossRate: 2},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Start(context.Background(), cfg)
			if err == nil {
				p.Close()
				t.Fatalf("Start accepted %+v", cfg)
			}
			if now := ownNamespaces(t); len(now) != len(before) {
				t.Errorf("after a failed Start (%v) namespaces %v, before %v", err, now, before)
			}
		})
	}
}

// TestConfigLinks: the emulator's directions are the lab's: half the RTT each
// way, the seeds Seed+1 and Seed+2, the rate and default queue both ways, loss on
// the server→client path only, SYN drops on the client→server path only.
func TestConfigLinks(t *testing.T) {
	cfg := Config{RTT: 70 * time.Millisecond, RateBitsPerSecond: 1_200_000, LossRate: 0.01, DropSYNs: 2, Seed: 5}
	l := cfg.LinkConfigs()
	c2s, s2c := l.ClientToServer, l.ServerToClient
	if c2s.DelayNs != 35e6 || s2c.DelayNs != 35e6 {
		t.Errorf("delays %d and %d ns, want 35 ms each way", c2s.DelayNs, s2c.DelayNs)
	}
	if c2s.Seed != 6 || s2c.Seed != 7 {
		t.Errorf("seeds %d and %d, want 6 and 7", c2s.Seed, s2c.Seed)
	}
	if c2s.RateBitsPerSecond != 1_200_000 || s2c.RateBitsPerSecond != 1_200_000 {
		t.Errorf("rates %d and %d, want 1.2 Mbit/s each way", c2s.RateBitsPerSecond, s2c.RateBitsPerSecond)
	}
	// 1.2 Mbit/s × 70 ms = 10,500 bytes, under the floor of 10 packets of 1500 bytes.
	if c2s.Queue.LimitBytes != 15000 || s2c.Queue.LimitBytes != 15000 {
		t.Errorf("queues %d and %d bytes, want the floor of 15000", c2s.Queue.LimitBytes, s2c.Queue.LimitBytes)
	}
	if c2s.Loss.Probability != 0 || s2c.Loss.Probability != 0.01 {
		t.Errorf("loss %g client→server and %g server→client, want 0 and 0.01", c2s.Loss.Probability, s2c.Loss.Probability)
	}
	if c2s.Drop.Count != 2 || s2c.Drop.Count != 0 {
		t.Errorf("SYN drops %d client→server and %d server→client, want 2 and 0", c2s.Drop.Count, s2c.Drop.Count)
	}
	if q := (Config{RTT: 70 * time.Millisecond, RateBitsPerSecond: 1_200_000, QueuePackets: 100}).QueueDescription(); q != "drop-tail, 100 packets" {
		t.Errorf("queue description %q, want drop-tail, 100 packets", q)
	}
	if q := (Config{}).QueueDescription(); q != "none (no rate limit)" {
		t.Errorf("queue description without a rate %q", q)
	}
}
