package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/units"
)

// captureResult is a capture of lossy bulk transfers for the analyze benchmark.
type captureResult struct {
	Path           string  `json:"path"`
	Emulated       string  `json:"emulated_path"`
	Streams        int     `json:"streams"`
	Congestion     string  `json:"congestion_control"`
	Seconds        int     `json:"seconds"`
	Packets        int64   `json:"packets_captured"`
	KernelDrops    int64   `json:"packets_dropped_by_kernel"`
	EmulatorLost   int64   `json:"emulator_data_packets_lost"`
	Retransmits    int64   `json:"iperf3_retransmits"`
	GoodputBitsSec float64 `json:"goodput_bps"`
}

// runCapture makes the benchmark's lossy bulk capture: iperf3 streams from the
// server to the client over an emulated path with random loss and reordering
// jitter on the data direction, captured by tcpdump on the client's TUN device
// (raw IP) with a short snap length. The client's SACK blocks, the server's
// retransmissions and the reordered arrivals are all in it.
func runCapture(ctx context.Context, args []string) (*captureResult, error) {
	fs := flag.NewFlagSet("capture", flag.ExitOnError)
	var path pathFlags
	path.register(fs, "10ms")
	loss := fs.String("loss", "1%", "random loss on the server→client direction")
	jitter := fs.String("jitter", "300us", "uniform jitter on the server→client direction, with reordering")
	streams := fs.Int("streams", 4, "parallel iperf3 streams")
	seconds := fs.Int("seconds", 8, "seconds of transfer")
	snaplen := fs.Int("snaplen", 96, "tcpdump's snap length")
	cc := fs.String("cc", "bbr", "the server's congestion control (bbr keeps the rate under random loss; cubic falls to a few Mbit/s)")
	out := fs.String("out", "", "the capture to write (required)")
	fs.Parse(args)
	if *out == "" {
		return nil, errors.New("capture: give -out FILE")
	}
	if err := path.parse(); err != nil {
		return nil, err
	}
	lossRate, err := units.ParsePercent(*loss)
	if err != nil {
		return nil, fmt.Errorf("-loss: %w", err)
	}
	jitterNs, err := units.ParseDuration(*jitter)
	if err != nil {
		return nil, fmt.Errorf("-jitter: %w", err)
	}
	clientToServer, serverToClient := path.configs()
	serverToClient.Loss = link.LossConfig{Model: link.LossBernoulli, Probability: lossRate}
	serverToClient.Jitter = link.Jitter{SpreadNs: jitterNs, Distribution: link.JitterUniform, Reorder: true}
	serverToClient.Seed = 7
	sysctls := map[string]string{"ipv4/tcp_congestion_control": *cc}
	for k, v := range bulkSysctls {
		sysctls[k] = v
	}
	trial, err := startTrial(ctx, sysctls, clientToServer, serverToClient, path.runOptions(), nil)
	if err != nil {
		return nil, err
	}
	res, runErr := captureThrough(ctx, trial.trial, *out, *snaplen, *streams, *seconds)
	stats, stopErr := trial.stop()
	if err := errors.Join(runErr, stopErr); err != nil {
		os.Remove(*out)
		return nil, fmt.Errorf("capture: %w", err)
	}
	res.Emulated, res.Congestion = serverToClient.String(), *cc
	res.EmulatorLost = stats.BToA.PacketsDroppedLoss
	return res, nil
}

var tcpdumpCounts = regexp.MustCompile(`(?m)^(\d+) packets captured$|^(\d+) packets dropped by kernel$`)

func captureThrough(ctx context.Context, trial *netlab.Trial, out string, snaplen, streams, seconds int) (*captureResult, error) {
	dump := trial.CommandContext(ctx, netlab.Client, "tcpdump", "-i", netlab.TUNName, "-s", strconv.Itoa(snaplen), "-B", "262144",
		"--immediate-mode", "-n", "-Z", "root", "-w", out, "tcp")
	var dumpLog bytes.Buffer
	dump.Stderr = &dumpLog
	if err := dump.Start(); err != nil {
		return nil, fmt.Errorf("starting tcpdump: %w", err)
	}
	stopDump := func() error {
		dump.Process.Signal(syscall.SIGINT)
		return dump.Wait()
	}
	if err := waitFor(ctx, 5*time.Second, func() bool { return bytes.Contains(dumpLog.Bytes(), []byte("listening on")) }); err != nil {
		stopDump()
		return nil, fmt.Errorf("tcpdump did not start: %w: %s", err, dumpLog.String())
	}
	report, err := iperfThrough(ctx, trial, seconds, 0, streams)
	time.Sleep(200 * time.Millisecond) // the last ACKs
	if dumpErr := stopDump(); err == nil && dumpErr != nil {
		err = fmt.Errorf("tcpdump: %w: %s", dumpErr, dumpLog.String())
	}
	if err != nil {
		return nil, err
	}
	res := &captureResult{Path: out, Streams: streams, Seconds: seconds, Retransmits: report.End.SumSent.Retransmits}
	for _, m := range tcpdumpCounts.FindAllStringSubmatch(dumpLog.String(), -1) {
		if m[1] != "" {
			res.Packets, _ = strconv.ParseInt(m[1], 10, 64)
		} else {
			res.KernelDrops, _ = strconv.ParseInt(m[2], 10, 64)
		}
	}
	var bytesSent float64
	var secs float64
	for _, interval := range report.Intervals {
		bytesSent += float64(interval.Sum.Bytes)
		secs += interval.Sum.Seconds
	}
	if secs > 0 {
		res.GoodputBitsSec = bytesSent * 8 / secs
	}
	return res, nil
}
