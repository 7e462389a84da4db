package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/lab/netlab"
)

// pingResult is what the ping subcommand prints.
type pingResult struct {
	RTTMs       float64 `json:"configured_rtt_ms"`
	Spin        bool    `json:"spin"`
	Probes      int     `json:"probes"`
	Replies     int     `json:"replies"`
	MinMs       float64 `json:"min_ms"`
	MedianMs    float64 `json:"median_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	Ping        string  `json:"ping_summary"` // iputils ping's own "min/avg/max/mdev" line
	TimerLateMs float64 `json:"timer_lateness_max_ms"`
	ReleaseLate float64 `json:"release_lateness_max_ms"`
}

// runPing sends ICMP echo requests from the client namespace to the server through
// the emulator and times each one: sent just before sendto, received at the kernel's
// receive timestamp (SO_TIMESTAMPNS), as ping does. Then it runs iputils ping itself
// on the same trial for its summary line.
func runPing(ctx context.Context, args []string) (*pingResult, error) {
	fs := flag.NewFlagSet("ping", flag.ExitOnError)
	var path pathFlags
	path.register(fs, "70ms")
	count := fs.Int("count", 200, "echo requests")
	interval := fs.Duration("interval", 50*time.Millisecond, "time between requests")
	runPingTool := fs.Bool("ping", true, "also run iputils ping on the same path for its summary")
	fs.Parse(args)
	if err := path.parse(); err != nil {
		return nil, err
	}
	clientToServer, serverToClient := path.configs()
	trial, err := startTrial(ctx, nil, clientToServer, serverToClient, path.runOptions(), nil)
	if err != nil {
		return nil, err
	}
	res := &pingResult{RTTMs: float64(path.rttNs) / 1e6, Spin: path.spin, Probes: *count}
	samples, probeErr := echoProbes(ctx, trial.trial, *count, *interval)
	if probeErr == nil && *runPingTool {
		res.Ping, probeErr = runIputilsPing(ctx, trial.trial, *count, *interval)
	}
	stats, stopErr := trial.stop()
	if probeErr != nil || stopErr != nil {
		return nil, fmt.Errorf("ping: %w", errors.Join(probeErr, stopErr))
	}
	res.Replies = len(samples)
	if len(samples) == 0 {
		return nil, fmt.Errorf("ping: no reply to %d echo requests", *count)
	}
	rtt := lab.Summarize(samples)
	res.MinMs, res.MedianMs, res.P99Ms, res.MaxMs = rtt.Min, rtt.Median, rtt.P99, rtt.Max
	res.TimerLateMs = float64(max(stats.AToB.TimerLatenessMaxNs, stats.BToA.TimerLatenessMaxNs)) / 1e6
	res.ReleaseLate = float64(max(stats.AToB.LatenessMaxNs, stats.BToA.LatenessMaxNs)) / 1e6
	return res, nil
}

// echoProbes sends count echo requests, one every interval, on a raw ICMP socket made
// in the client namespace, and returns the round-trip times (ms) of the replies.
func echoProbes(ctx context.Context, trial *netlab.Trial, count int, interval time.Duration) ([]float64, error) {
	var fd int
	err := trial.Do(netlab.Client, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("raw ICMP socket in the client namespace: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	timeout := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &timeout); err != nil {
		return nil, fmt.Errorf("SO_RCVTIMEO: %w", err)
	}
	server := &unix.SockaddrInet4{Addr: trial.ServerAddr.As4()}
	identifier := uint16(os.Getpid())
	request := make([]byte, 64) // 8 bytes of header, 56 of payload, as ping sends
	reply := make([]byte, 1500)
	control := make([]byte, unix.CmsgSpace(16))
	var samples []float64
	next := time.Now()
	for sequence := range count {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		buildEchoRequest(request, identifier, uint16(sequence))
		sentNs := time.Now().UnixNano()
		if err := unix.Sendto(fd, request, 0, server); err != nil {
			return nil, fmt.Errorf("sending echo request %d: %w", sequence, err)
		}
		for {
			n, controlLength, _, _, err := unix.Recvmsg(fd, reply, control, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				break // no reply within the timeout: lost
			}
			if err != nil {
				return nil, fmt.Errorf("receiving echo reply %d: %w", sequence, err)
			}
			if !isEchoReply(reply[:n], identifier, uint16(sequence)) {
				continue
			}
			receivedNs, ok := receiveTimestamp(control[:controlLength])
			if !ok {
				return nil, fmt.Errorf("echo reply %d came without a kernel timestamp", sequence)
			}
			samples = append(samples, float64(receivedNs-sentNs)/1e6)
			break
		}
	}
	return samples, nil
}

// buildEchoRequest writes an ICMP echo request with its checksum into b.
func buildEchoRequest(b []byte, identifier, sequence uint16) {
	clear(b)
	b[0] = 8 // echo request
	binary.BigEndian.PutUint16(b[4:], identifier)
	binary.BigEndian.PutUint16(b[6:], sequence)
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[2:], ^uint16(sum))
}

// isEchoReply reports whether packet (an IPv4 packet, as a raw socket delivers it) is
// the reply to our request.
func isEchoReply(packet []byte, identifier, sequence uint16) bool {
	if len(packet) < 20 {
		return false
	}
	headerLength := int(packet[0]&0x0f) * 4
	icmp := packet[min(headerLength, len(packet)):]
	return len(icmp) >= 8 && icmp[0] == 0 &&
		binary.BigEndian.Uint16(icmp[4:]) == identifier && binary.BigEndian.Uint16(icmp[6:]) == sequence
}

// receiveTimestamp finds SCM_TIMESTAMPNS (Unix ns) in a control message buffer.
func receiveTimestamp(control []byte) (int64, bool) {
	messages, err := unix.ParseSocketControlMessage(control)
	if err != nil {
		return 0, false
	}
	for _, m := range messages {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			seconds := int64(binary.NativeEndian.Uint64(m.Data[0:]))
			nanoseconds := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			return seconds*1e9 + nanoseconds, true
		}
	}
	return 0, false
}

var pingSummary = regexp.MustCompile(`(?m)^rtt min/avg/max/mdev = .*$`)

// runIputilsPing runs `ping -c count -i interval -q SERVER` in the client namespace
// and returns its summary line.
func runIputilsPing(ctx context.Context, trial *netlab.Trial, count int, interval time.Duration) (string, error) {
	cmd := trial.CommandContext(ctx, netlab.Client, "ping", "-q", "-c", strconv.Itoa(count),
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', -1, 64), trial.ServerAddr.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ping (apt-get install -y iputils-ping): %w: %s", err, out)
	}
	line := pingSummary.Find(out)
	if line == nil {
		return "", fmt.Errorf("no summary in ping's output: %s", out)
	}
	return string(line), nil
}
