// Command ktcp measures package ktcp on real kernel TCP: how many events a
// second its reader takes from the kernel, how many it loses, what it costs a
// server's connection rate, and how much of one core the reader uses. It runs
// itself again in a network namespace of its own (nothing outside it is
// traced, nothing is left behind), where clients and a server talk over the
// loopback device:
//
//   - short: many short connections (connect, a request, a 1 KB answer,
//     close), first without a tracer (the peer), then with one following the
//     server's port (every kind of event);
//   - drain: the same short connections with a tracer whose reader waits
//     until they are over (its ring holds all their events), then reads them
//     all as fast as it can: the rate a reader on one core sustains, which a
//     machine of two cores cannot otherwise produce on its own;
//   - bulk: bulk transfers with the loopback's MTU at 1500 and its offloads
//     off, so that every segment and every ACK is a tcp_probe event, with a
//     tracer following both ends.
//
// It prints connections/s with and without the tracer and their ratio, events
// read per second while the traffic runs, events lost, the reader's CPU time,
// and the drain rate. It is a benchmarking aid, not part of the
// slowstart binary; it needs root.
//
//	go run ./bench/ktcp [-seconds 5] [-clients 64] [-bulk-streams 2] [-ring-mb 16]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/slowstart/slowstart/bench/internal/loopload"
	"github.com/slowstart/slowstart/ktcp"
)

// insideEnv marks the copy of the command that runs in the new namespace.
const insideEnv = "SLOWSTART_KTCP_BENCH_INSIDE"

func main() {
	seconds := flag.Float64("seconds", 5, "length of each phase")
	clients := flag.Int("clients", 64, "concurrent clients making short connections")
	bulkStreams := flag.Int("bulk-streams", 2, "bulk transfers at once in the bulk phase (0: no bulk phase)")
	ringMB := flag.Int("ring-mb", 16, "the tracer's ring buffer, MiB (a power of two)")
	drainMB := flag.Int("drain-ring-mb", 512, "the drain phase's ring buffer, MiB (a power of two): room for all of its events")
	flag.Parse()
	loopload.Isolate("bench/ktcp", insideEnv)
	cfg := config{
		phase:       time.Duration(*seconds * float64(time.Second)),
		clients:     *clients,
		bulkStreams: *bulkStreams,
		ringBytes:   *ringMB << 20,
		drainBytes:  *drainMB << 20,
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ktcp:", err)
		os.Exit(1)
	}
}

type config struct {
	phase       time.Duration
	clients     int
	bulkStreams int
	ringBytes   int
	drainBytes  int
}

func run(cfg config) error {
	lo, err := loopload.Loopback()
	if err != nil {
		return err
	}
	netns, err := ktcp.NetnsInode("/proc/self/ns/net")
	if err != nil {
		return err
	}
	fmt.Printf("bench/ktcp: %d cores, GOMAXPROCS %d, phases of %v, ring %d MiB\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), cfg.phase, cfg.ringBytes>>20)

	// Short connections, without and with a tracer.
	srv, err := loopload.StartServer("127.0.0.1:8080", 1024)
	if err != nil {
		return err
	}
	defer srv.Close()
	base := shortConnections(cfg, srv.Addr().String())
	traced, err := withTracer(cfg, ktcp.Filter{Netns: []uint32{netns}, LocalPorts: []uint16{8080}}, func() float64 {
		return shortConnections(cfg, srv.Addr().String())
	})
	if err != nil {
		return err
	}
	fmt.Println("short connections (connect, request, 1 KB answer, close), server's port traced:")
	fmt.Printf("  without tracer  %10.0f connections/s\n", base)
	fmt.Printf("  with tracer     %10.0f connections/s  (%.3f× the peer)\n", traced.work, traced.work/base)
	traced.print()

	fmt.Println()
	if err := drain(cfg, netns, srv.Addr().String()); err != nil {
		return err
	}

	if cfg.bulkStreams > 0 {
		fmt.Println()
		if err := bulk(cfg, lo, netns); err != nil {
			return err
		}
	}
	return nil
}

// shortConnections runs the clients for one phase and returns connections/s.
func shortConnections(cfg config, addr string) float64 {
	start := time.Now()
	n := loopload.ShortConnections(addr, cfg.clients, cfg.phase, true)
	return float64(n) / time.Since(start).Seconds()
}

// traced is what a phase with a tracer measured.
type traced struct {
	work      float64 // the phase's own rate (connections/s or bytes/s)
	seconds   float64
	stats     ktcp.Stats
	readerCPU time.Duration
	readerRSS uint64
}

func (r traced) print() {
	perSecond := float64(r.stats.Read) / r.seconds
	fmt.Printf("  events read     %10.0f /s  (%d in %.1f s; %d submitted, %d lost)\n", perSecond, r.stats.Read, r.seconds, r.stats.Submitted, r.stats.Lost)
	for _, k := range r.stats.Kinds {
		fmt.Printf("    %-26s %10d read  %6d lost\n", k.Kind, k.Read, k.Lost)
	}
	fmt.Printf("  reader thread   %10.3f s of CPU (%.0f%% of one core)\n", r.readerCPU.Seconds(), 100*r.readerCPU.Seconds()/r.seconds)
	fmt.Printf("  process RSS     %10.1f MB (the ring's pages the reader has touched included)\n", float64(r.readerRSS)/1e6)
}

// withTracer opens a tracer, reads it on a thread of its own while work runs,
// and returns what it measured.
func withTracer(cfg config, filter ktcp.Filter, work func() float64) (traced, error) {
	tracer, err := ktcp.Open(ktcp.Options{Filter: filter, RingBytes: cfg.ringBytes})
	if err != nil {
		return traced{}, err
	}
	cpu := make(chan time.Duration, 1)
	go func() {
		runtime.LockOSThread()
		var ev ktcp.Event
		for tracer.Read(&ev) == nil {
		}
		cpu <- loopload.ThreadCPU()
	}()
	start := time.Now()
	rate := work()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tracer.Sync(ctx); err != nil {
		return traced{}, fmt.Errorf("sync: %w", err)
	}
	seconds := time.Since(start).Seconds()
	stats, err := tracer.Stats()
	if err != nil {
		return traced{}, err
	}
	rss := loopload.CurrentRSS()
	tracer.Close()
	return traced{work: rate, seconds: seconds, stats: stats, readerCPU: <-cpu, readerRSS: rss}, nil
}

// drain makes short connections while nobody reads the tracer, then reads
// all their events at once.
func drain(cfg config, netns uint32, addr string) error {
	tracer, err := ktcp.Open(ktcp.Options{Filter: ktcp.Filter{Netns: []uint32{netns}, LocalPorts: []uint16{8080}}, RingBytes: cfg.drainBytes})
	if err != nil {
		return err
	}
	defer tracer.Close()
	rate := shortConnections(cfg, addr)
	stats, err := tracer.Stats()
	if err != nil {
		return err
	}
	wall, cpu, err := loopload.Drain(tracer, stats.Submitted, nil)
	if err != nil {
		return err
	}
	fmt.Printf("drain: %.0f connections/s wrote %d events into a %d MiB ring (%d lost) while nobody read it; then\n",
		rate, stats.Submitted, cfg.drainBytes>>20, stats.Lost)
	fmt.Printf("  read all       %10.2f M events/s of wall time, %.2f M per second of the reader's CPU (%v, %v CPU)\n",
		float64(stats.Submitted)/wall.Seconds()/1e6, float64(stats.Submitted)/cpu.Seconds()/1e6, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
	return nil
}

// bulk runs bulk transfers over a loopback of MTU 1500 without offloads: every
// segment and ACK is an event.
func bulk(cfg config, lo netlink.Link, netns uint32) error {
	if err := netlink.LinkSetMTU(lo, 1500); err != nil {
		return fmt.Errorf("set lo's MTU: %w", err)
	}
	if out, err := exec.Command("ethtool", "-K", "lo", "tso", "off", "gso", "off", "gro", "off").CombinedOutput(); err != nil {
		return fmt.Errorf("turn lo's offloads off (ethtool): %v: %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:9000")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	transfer := func() float64 {
		var bytes atomic.Int64
		stop := time.Now().Add(cfg.phase)
		var wg sync.WaitGroup
		start := time.Now()
		for range cfg.bulkStreams {
			wg.Go(func() {
				conn, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					return
				}
				defer conn.Close()
				buf := make([]byte, 256<<10)
				for time.Now().Before(stop) {
					n, err := conn.Write(buf)
					bytes.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(bytes.Load()) / time.Since(start).Seconds()
	}
	base := transfer()
	r, err := withTracer(cfg, ktcp.Filter{Netns: []uint32{netns}}, transfer)
	if err != nil {
		return err
	}
	fmt.Printf("bulk transfers (%d streams, MTU 1500, no offloads), both ends traced:\n", cfg.bulkStreams)
	fmt.Printf("  without tracer  %10.1f MB/s\n", base/1e6)
	fmt.Printf("  with tracer     %10.1f MB/s  (%.3f× the peer)\n", r.work/1e6, r.work/base)
	r.print()
	return nil
}
