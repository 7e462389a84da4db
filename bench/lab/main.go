// Command lab measures the lab's link emulator from outside, through the real TUN path:
// one trial (two network namespaces from lab/netlab joined by lab/link), traffic from
// real sockets or tools inside the namespaces, and numbers printed as JSON for the
// bench/lab-*.sh scripts to compare against their targets. It is a benchmarking aid,
// not part of the slowstart binary, and it checks no target itself.
//
//	go build -o /tmp/slowstart-labbench ./bench/lab
//	/tmp/slowstart-labbench ping  -rtt 70ms -count 200 -interval 50ms
//	/tmp/slowstart-labbench rate  -rtt 20ms -rate 1.2mbit -seconds 10
//	/tmp/slowstart-labbench loss  -loss 1% -packets 100000 -seed 7
//	/tmp/slowstart-labbench iperf -rtt 20ms -seconds 10
//	/tmp/slowstart-labbench handshake -rtt 70ms -poll -count 200
//	/tmp/slowstart-labbench capture -rtt 10ms -loss 1% -jitter 1ms -out /tmp/lossy.pcap
//
// Every subcommand needs root, makes one trial and removes it when done, on error and
// on Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/units"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := netlab.HandleSignals(context.Background())
	defer stop()
	var result any
	var err error
	switch command, args := os.Args[1], os.Args[2:]; command {
	case "ping":
		result, err = runPing(ctx, args)
	case "rate":
		result, err = runRate(ctx, args)
	case "loss":
		result, err = runLoss(ctx, args)
	case "iperf":
		result, err = runIperf(ctx, args)
	case "handshake":
		result, err = runHandshake(ctx, args)
	case "capture":
		result, err = runCapture(ctx, args)
	default:
		usage()
		os.Exit(2)
	}
	if closeErr := netlab.CloseAll(); closeErr != nil {
		err = errors.Join(err, closeErr)
	}
	if err != nil {
		slog.Error("lab bench failed", "command", os.Args[1], "err", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(result); err != nil {
		slog.Error("writing the result", "err", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s ping|rate|loss|iperf|handshake|capture [flags] (each with -h)\n", os.Args[0])
}

// pathFlags are the flags every subcommand shares: the path and the emulator's timing.
type pathFlags struct {
	rtt, rate  string
	spin, poll bool
	rttNs      int64
	rateBitsPS int64
}

func (p *pathFlags) register(fs *flag.FlagSet, defaultRTT string) {
	fs.StringVar(&p.rtt, "rtt", defaultRTT, "round-trip propagation delay (half each way)")
	fs.StringVar(&p.rate, "rate", "0", "bottleneck rate each way (0: none)")
	fs.BoolVar(&p.spin, "spin", false, "let the emulator spin before deadlines (link's default, 300 µs); without it or -poll, timers only, as for parallel trials")
	fs.BoolVar(&p.poll, "poll", false, "run the emulator in polling mode, as the lab does for a trial that runs alone")
}

func (p *pathFlags) parse() error {
	var err error
	if p.rttNs, err = units.ParseDuration(p.rtt); err != nil {
		return fmt.Errorf("-rtt: %w", err)
	}
	if p.rate != "0" {
		if p.rateBitsPS, err = units.ParseRate(p.rate); err != nil {
			return fmt.Errorf("-rate: %w", err)
		}
	}
	return nil
}

// configs returns the two directions as the lab sets them up (labpath.Config): half
// the RTT each way, the rate each way with the lab's default queue.
func (p *pathFlags) configs() (clientToServer, serverToClient link.Config) {
	links := labpath.Config{RTT: time.Duration(p.rttNs), RateBitsPerSecond: p.rateBitsPS}.LinkConfigs()
	return links.ClientToServer, links.ServerToClient
}

// mode names the emulator's timing: poll, spin or timers.
func (p *pathFlags) mode() string {
	switch {
	case p.poll:
		return "poll"
	case p.spin:
		return "spin"
	}
	return "timers"
}

// runOptions is the emulator's timing: polling (a lone lab trial), spinning before
// deadlines (link's default), or timers only (parallel lab trials).
func (p *pathFlags) runOptions() link.RunOptions {
	switch {
	case p.poll:
		return link.RunOptions{Poll: true}
	case p.spin:
		return link.RunOptions{}
	}
	return link.RunOptions{EarlyWakeNs: -1}
}

// emulatedTrial is one lab path (package lab/labpath) with the emulator running
// between its two namespaces.
type emulatedTrial struct {
	trial *netlab.Trial
	path  *labpath.Path
}

// startTrial makes a path whose emulator runs the two directions given, with the
// sysctls in both namespaces, until stop. tap, when not nil, sees every packet as
// link.RunOptions.Tap does; runOptions says the emulator's timing (Poll, and
// EarlyWakeNs negative for timers only).
func startTrial(ctx context.Context, sysctls map[string]string, clientToServer, serverToClient link.Config, runOptions link.RunOptions,
	tap func(device int, data []byte, unixNs int64)) (*emulatedTrial, error) {
	path, err := labpath.Start(ctx, labpath.Config{
		Sysctls: sysctls,
		Links:   &labpath.Links{ClientToServer: clientToServer, ServerToClient: serverToClient},
		Poll:    runOptions.Poll,
		Spin:    runOptions.EarlyWakeNs >= 0,
		Tap:     tap,
	})
	if err != nil {
		return nil, fmt.Errorf("making the trial's path: %w", err)
	}
	return &emulatedTrial{trial: path.Trial, path: path}, nil
}

// stop ends the emulator and removes the path; it returns the emulator's counters.
func (e *emulatedTrial) stop() (link.Stats, error) {
	stats, err := e.path.Stop()
	return stats, errors.Join(err, e.path.Close())
}

// waitFor polls ready every 20 ms until it returns true or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ready() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
