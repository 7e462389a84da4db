package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slowstart/slowstart/lab/netlab"
)

// Large socket buffers for the namespaces of a bulk transfer: the window autotuning
// may grow to 32 MB, well above the bandwidth-delay product of 1+ Gbit/s at 20 ms
// (2.5 MB and more); the kernel's defaults (6 MB receive, 4 MB send) would cap it.
// These are per-namespace sysctls, so the host's own settings are not touched.
var bulkSysctls = map[string]string{
	"ipv4/tcp_rmem": "4096 131072 33554432",
	"ipv4/tcp_wmem": "4096 65536 33554432",
}

// ipv4TCPHeaderBytes is what each full-sized segment of a bulk transfer carries
// besides its payload: IPv4 header (20), TCP header (20) and the timestamp option
// with its padding (12). A TUN device has no link layer, and the emulator's rate
// counts IP packet bytes, so payload + 52 is exactly what each segment costs the
// bottleneck (1448 + 52 = 1500 at MTU 1500).
const ipv4TCPHeaderBytes = 52

// iperfResult is one iperf3 transfer server→client through the emulator.
type iperfResult struct {
	RTTMs             float64 `json:"configured_rtt_ms"`
	RateBitsPerSecond int64   `json:"configured_rate_bps"` // 0: none
	Spin              bool    `json:"spin"`
	TxQueueLength     int     `json:"txqueuelen"` // 0: netlab's setting
	Seconds           float64 `json:"seconds"`    // measured, after the omitted start
	GoodputBitsPerSec float64 `json:"goodput_bps"`
	MSSBytes          int     `json:"mss_bytes"`
	WireBitsPerSecond float64 `json:"ip_rate_bps"` // goodput × (MSS + 52) / MSS
	RateRatio         float64 `json:"ip_rate_over_configured"`
	// DeliveredBitsPerSec is the IP rate the emulator wrote into the client namespace
	// (retransmissions included) over the same window, taken at the TUN device.
	DeliveredBitsPerSec float64      `json:"delivered_ip_bps"`
	DeliveredSeconds    float64      `json:"delivered_seconds"`
	DeliveredRatio      float64      `json:"delivered_over_configured"`
	Retransmits         int64        `json:"retransmits"`
	SenderCPUPercent    float64      `json:"sender_cpu_percent"`
	ReceiverCPUPercent  float64      `json:"receiver_cpu_percent"`
	DataPacketsOut      int64        `json:"emulator_data_packets_out"`
	DataPacketsDropped  int64        `json:"emulator_data_packets_dropped_queue"`
	ReleaseLatenessMaxM float64      `json:"release_lateness_max_ms"`
	Counters            pathCounters `json:"kernel_counters"`
}

// pathCounters are kernel counters read in the namespaces after the transfer: what
// the server's TCP retransmitted and what the client's TUN device or stack dropped.
type pathCounters struct {
	ServerRetransmittedSegments int64 `json:"server_retransmitted_segments"`
	ServerSentSegments          int64 `json:"server_sent_segments"`
	ClientTUNReceiveDropped     int64 `json:"client_tun_rx_dropped"`
	// ServerTUNTransmitDropped counts packets the server's TUN device refused because
	// the emulator had not read its queue (txqueuelen) in time.
	ServerTUNTransmitDropped int64  `json:"server_tun_tx_dropped"`
	ServerQdisc              string `json:"server_qdisc"`
}

// readPathCounters reads /proc/net/snmp in the server namespace and the client TUN's
// statistics in the client namespace.
func readPathCounters(ctx context.Context, trial *netlab.Trial) (pathCounters, error) {
	var c pathCounters
	snmp, err := trial.CommandContext(ctx, netlab.Server, "cat", "/proc/net/snmp").Output()
	if err != nil {
		return c, fmt.Errorf("reading /proc/net/snmp in the server namespace: %w", err)
	}
	lines := strings.Split(string(snmp), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "Tcp: ") || !strings.HasPrefix(lines[i+1], "Tcp: ") {
			continue
		}
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j := range min(len(names), len(values)) {
			v, _ := strconv.ParseInt(values[j], 10, 64)
			switch names[j] {
			case "RetransSegs":
				c.ServerRetransmittedSegments = v
			case "OutSegs":
				c.ServerSentSegments = v
			}
		}
		break
	}
	// /proc/net/dev follows the reader's network namespace (sysfs would not). Its
	// fields: receive bytes, packets, errs, drop and 4 more, then transmit bytes,
	// packets, errs, drop...
	tunDrops := func(side netlab.Side) (received, transmitted int64, err error) {
		devices, err := trial.CommandContext(ctx, side, "cat", "/proc/net/dev").Output()
		if err != nil {
			return 0, 0, fmt.Errorf("reading /proc/net/dev in the %s namespace: %w", side, err)
		}
		for _, line := range strings.Split(string(devices), "\n") {
			name, fields, ok := strings.Cut(line, ":")
			if f := strings.Fields(fields); ok && strings.TrimSpace(name) == netlab.TUNName && len(f) > 11 {
				received, _ = strconv.ParseInt(f[3], 10, 64)
				transmitted, _ = strconv.ParseInt(f[11], 10, 64)
			}
		}
		return received, transmitted, nil
	}
	if c.ClientTUNReceiveDropped, _, err = tunDrops(netlab.Client); err != nil {
		return c, err
	}
	if _, c.ServerTUNTransmitDropped, err = tunDrops(netlab.Server); err != nil {
		return c, err
	}
	qdisc, err := trial.CommandContext(ctx, netlab.Server, "tc", "-s", "qdisc", "show", "dev", netlab.TUNName).Output()
	if err != nil {
		return c, fmt.Errorf("reading the server TUN's qdisc: %w", err)
	}
	c.ServerQdisc = strings.Join(strings.Fields(string(qdisc)), " ")
	return c, nil
}

// runRate checks the rate stage: a long iperf3 transfer over a rate-limited path.
func runRate(ctx context.Context, args []string) (*iperfResult, error) {
	return iperfCommand(ctx, "rate", "20ms", args)
}

// runIperf measures throughput: iperf3 over a path with no rate limit.
func runIperf(ctx context.Context, args []string) (*iperfResult, error) {
	return iperfCommand(ctx, "iperf", "20ms", args)
}

func iperfCommand(ctx context.Context, name, defaultRTT string, args []string) (*iperfResult, error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	var path pathFlags
	path.register(fs, defaultRTT)
	seconds := fs.Int("seconds", 10, "measured seconds of transfer")
	omit := fs.Int("omit", 2, "seconds at the start left out of the measurement (slow start, queue filling)")
	txQueueLength := fs.Int("txqueuelen", 0, "set both TUN devices' txqueuelen (packets the kernel holds for the emulator to read); 0 leaves netlab's setting")
	fs.Parse(args)
	if err := path.parse(); err != nil {
		return nil, err
	}
	if name == "rate" && path.rateBitsPS == 0 {
		return nil, errors.New("rate: give -rate")
	}
	clientToServer, serverToClient := path.configs()
	var deliveries deliveryLog
	trial, err := startTrial(ctx, bulkSysctls, clientToServer, serverToClient, path.runOptions(), deliveries.tap)
	if err != nil {
		return nil, err
	}
	if *txQueueLength > 0 {
		for _, side := range []netlab.Side{netlab.Client, netlab.Server} {
			out, err := trial.trial.CommandContext(ctx, side, "ip", "link", "set", netlab.TUNName, "txqueuelen", strconv.Itoa(*txQueueLength)).CombinedOutput()
			if err != nil {
				trial.stop()
				return nil, fmt.Errorf("setting txqueuelen in the %s namespace: %w: %s", side, err, out)
			}
		}
	}
	deliveries.from = trial.trial.ServerAddr.As4()
	deliveries.ready.Store(true)
	report, runErr := iperfThrough(ctx, trial.trial, *seconds, *omit, 1)
	var counters pathCounters
	if runErr == nil {
		counters, runErr = readPathCounters(ctx, trial.trial)
	}
	stats, stopErr := trial.stop()
	if err := errors.Join(runErr, stopErr); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	res := &iperfResult{
		RTTMs: float64(path.rttNs) / 1e6, RateBitsPerSecond: path.rateBitsPS, Spin: path.spin, TxQueueLength: *txQueueLength,
		MSSBytes:            report.Start.MSS,
		Counters:            counters,
		Retransmits:         report.End.SumSent.Retransmits,
		SenderCPUPercent:    report.End.CPU.RemoteTotal, // -R: the server sends
		ReceiverCPUPercent:  report.End.CPU.HostTotal,
		DataPacketsOut:      stats.BToA.PacketsOut,
		DataPacketsDropped:  stats.BToA.PacketsDroppedQueue,
		ReleaseLatenessMaxM: float64(stats.BToA.LatenessMaxNs) / 1e6,
	}
	var bytesMeasured int64
	for _, interval := range report.Intervals {
		// iperf3 -R with -O sometimes reports the first measured interval with
		// the duration of two seconds and the bytes of one (the last omitted
		// second merged in), or an empty one: only whole one-second intervals
		// with data are counted.
		if !interval.Sum.Omitted && interval.Sum.Bytes > 0 && interval.Sum.Seconds > 0.5 && interval.Sum.Seconds < 1.5 {
			bytesMeasured += interval.Sum.Bytes
			res.Seconds += interval.Sum.Seconds
		}
	}
	if res.Seconds <= 0 || res.MSSBytes <= 0 {
		return nil, fmt.Errorf("%s: iperf3 reported no measured interval or no MSS", name)
	}
	res.GoodputBitsPerSec = float64(bytesMeasured) * 8 / res.Seconds
	res.WireBitsPerSecond = res.GoodputBitsPerSec * float64(res.MSSBytes+ipv4TCPHeaderBytes) / float64(res.MSSBytes)
	res.DeliveredBitsPerSec, res.DeliveredSeconds = deliveries.rate(time.Duration(*omit)*time.Second, time.Duration(*seconds)*time.Second)
	if path.rateBitsPS > 0 {
		res.RateRatio = res.WireBitsPerSecond / float64(path.rateBitsPS)
		res.DeliveredRatio = res.DeliveredBitsPerSec / float64(path.rateBitsPS)
	}
	return res, nil
}

// deliveryLog records the IP packets the emulator wrote into the client namespace from
// the server (the data direction): when and how many bytes.
type deliveryLog struct {
	ready atomic.Bool
	from  [4]byte // the server's IPv4 address
	mu    sync.Mutex
	times []int64 // Unix ns
	bytes []int
}

// tap is a link.RunOptions.Tap: packets seen at device 0 (the client's TUN) with the
// server's source address are the ones written to the client.
func (d *deliveryLog) tap(device int, data []byte, unixNs int64) {
	if device != 0 || !d.ready.Load() || len(data) < 20 || data[0]>>4 != 4 || [4]byte(data[12:16]) != d.from {
		return
	}
	d.mu.Lock()
	d.times = append(d.times, unixNs)
	d.bytes = append(d.bytes, len(data))
	d.mu.Unlock()
}

// rate returns the IP bit rate delivered during [first+omit, first+omit+window], first
// being the first delivery, and the window's length in seconds (shorter if the
// transfer ended sooner).
func (d *deliveryLog) rate(omit, window time.Duration) (bitsPerSecond, seconds float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.times) == 0 {
		return 0, 0
	}
	startNs := d.times[0] + int64(omit)
	endNs := min(startNs+int64(window), d.times[len(d.times)-1])
	var total int64
	for i, t := range d.times {
		if t > startNs && t <= endNs {
			total += int64(d.bytes[i])
		}
	}
	seconds = float64(endNs-startNs) / 1e9
	if seconds <= 0 {
		return 0, 0
	}
	return float64(total) * 8 / seconds, seconds
}

// iperfReport is the part of `iperf3 -J` this program reads.
type iperfReport struct {
	Start struct {
		MSS int `json:"tcp_mss_default"`
	} `json:"start"`
	Intervals []struct {
		Sum struct {
			Bytes   int64   `json:"bytes"`
			Seconds float64 `json:"seconds"`
			Omitted bool    `json:"omitted"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumSent struct {
			Retransmits int64 `json:"retransmits"`
		} `json:"sum_sent"`
		CPU struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperfThrough runs an iperf3 server in the server namespace and a client in the
// client namespace that receives (-R) for omit+seconds over streams parallel
// connections, and returns the client's report. The data flows server→client, as
// in the lab's trials.
func iperfThrough(ctx context.Context, trial *netlab.Trial, seconds, omit, streams int) (*iperfReport, error) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return nil, fmt.Errorf("iperf3 is missing (apt-get install -y iperf3): %w", err)
	}
	serverCtx, stopServer := context.WithCancel(ctx)
	server := trial.CommandContext(serverCtx, netlab.Server, "iperf3", "-s", "-B", trial.ServerAddr.String())
	var serverOutput bytes.Buffer
	server.Stdout, server.Stderr = &serverOutput, &serverOutput
	if err := server.Start(); err != nil {
		stopServer()
		return nil, fmt.Errorf("starting the iperf3 server: %w", err)
	}
	defer func() {
		stopServer()
		server.Wait()
	}()
	var report iperfReport
	var lastOutput []byte
	// The server takes a moment to listen: retry while the connection is refused.
	err := waitFor(ctx, 5*time.Second, func() bool {
		client := trial.CommandContext(ctx, netlab.Client, "iperf3", "-c", trial.ServerAddr.String(), "-R", "-J",
			"-t", strconv.Itoa(seconds), "-O", strconv.Itoa(omit), "-P", strconv.Itoa(streams))
		lastOutput, _ = client.Output()
		report = iperfReport{}
		if err := json.Unmarshal(lastOutput, &report); err != nil {
			return false
		}
		return !strings.Contains(report.Error, "unable to connect")
	})
	if err != nil {
		return nil, fmt.Errorf("iperf3 client: %w: %s %s", err, lastOutput, serverOutput.String())
	}
	if report.Error != "" {
		return nil, fmt.Errorf("iperf3: %s", report.Error)
	}
	return &report, nil
}
