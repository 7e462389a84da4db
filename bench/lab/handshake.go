package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/internal/netnsexec"
	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/lab/netlab"
)

// handshakeTimes is what the kernel's own timestamps on the two ends' interfaces say
// about a set of TCP handshakes.
type handshakeTimes struct {
	// ClientHandshakeMs: SYN sent → SYN/ACK received, at the client's interface: the
	// handshake RTT a client-side capture shows.
	ClientHandshakeMs lab.Stats `json:"client_handshake_ms"`
	// ServerTurnaroundMs: SYN received → SYN/ACK sent, at the server's interface: the
	// server kernel's own time, which every handshake RTT includes.
	ServerTurnaroundMs lab.Stats `json:"server_turnaround_ms"`
	// PathRTTMs: the handshake RTT less the server's turnaround: the time the SYN and
	// the SYN/ACK spent between the two interfaces, i.e. on the path.
	PathRTTMs lab.Stats `json:"path_rtt_ms"`
	// OneWayErrorUs: for every packet seen on both interfaces (SYN, SYN/ACK, ACK, FIN
	// and so on), its time from one interface to the other less the configured one-way
	// delay, in µs, both directions together.
	OneWayErrorUs lab.Stats `json:"one_way_error_us"`
	// Through the emulator, the one-way error in three parts, from the emulator's own
	// timestamps (RunOptions.Tap) beside the kernel's: ReadLatencyUs from the kernel
	// handing the packet to the TUN device to the emulator reading it; HoldErrorUs the
	// emulator's write less its read less the one-way delay; WriteLatencyUs from the
	// emulator's write to the kernel receiving the packet on the other device.
	ReadLatencyUs  *lab.Stats `json:"read_latency_us,omitempty"`
	HoldErrorUs    *lab.Stats `json:"hold_error_us,omitempty"`
	WriteLatencyUs *lab.Stats `json:"write_latency_us,omitempty"`
}

// handshakeResult is what the handshake subcommand prints.
type handshakeResult struct {
	RTTMs       float64 `json:"configured_rtt_ms"`
	Mode        string  `json:"emulator_mode"`
	Connections int     `json:"connections"`
	// Emulator: the connections through the emulator (a trial's TUN devices).
	Emulator handshakeTimes `json:"emulator"`
	// Veth: the same connections over a veth pair between two namespaces, with no
	// emulator: the kernel's own floor on this machine, measured in the same run.
	Veth handshakeTimes `json:"veth"`
	// EmulatorReleaseLatenessMaxUs is the emulator's own count of how late it wrote a
	// packet after its time.
	EmulatorReleaseLatenessMaxUs float64 `json:"emulator_release_lateness_max_us"`
}

// ends are the two sides of a path to measure handshakes on.
type ends struct {
	clientNetns, serverNetns string // namespace files
	clientIf, serverIf       string
	clientAddr, serverAddr   netip.Addr
}

// runHandshake opens count TCP connections, one every interval, from the client
// namespace to a listener in the server namespace, first through the emulator and then
// over a veth pair, capturing both ends' interfaces (AF_PACKET, kernel timestamps), and
// times each handshake and each packet's way across.
func runHandshake(ctx context.Context, args []string) (*handshakeResult, error) {
	fs := flag.NewFlagSet("handshake", flag.ExitOnError)
	var path pathFlags
	path.register(fs, "70ms")
	count := fs.Int("count", 200, "connections")
	interval := fs.Duration("interval", 50*time.Millisecond, "time between connections")
	fs.Parse(args)
	if err := path.parse(); err != nil {
		return nil, err
	}
	res := &handshakeResult{RTTMs: float64(path.rttNs) / 1e6, Mode: path.mode(), Connections: *count}

	clientToServer, serverToClient := path.configs()
	taps := &tapRecorder{}
	trial, err := startTrial(ctx, nil, clientToServer, serverToClient, path.runOptions(), taps.tap)
	if err != nil {
		return nil, err
	}
	emulated := ends{
		clientNetns: trial.trial.NamespacePath(netlab.Client), serverNetns: trial.trial.NamespacePath(netlab.Server),
		clientIf: netlab.TUNName, serverIf: netlab.TUNName,
		clientAddr: trial.trial.ClientAddr, serverAddr: trial.trial.ServerAddr,
	}
	res.Emulator, err = measureHandshakes(ctx, emulated, *count, *interval, path.rttNs/2, taps)
	stats, stopErr := trial.stop()
	if err != nil || stopErr != nil {
		return nil, fmt.Errorf("through the emulator: %w", errors.Join(err, stopErr))
	}
	res.EmulatorReleaseLatenessMaxUs = float64(max(stats.AToB.LatenessMaxNs, stats.BToA.LatenessMaxNs)) / 1e3

	veth, removeVeth, err := makeVethPair(ctx)
	if err != nil {
		return nil, err
	}
	res.Veth, err = measureHandshakes(ctx, veth, *count, *interval, 0, nil)
	if removeErr := removeVeth(); err == nil && removeErr != nil {
		err = removeErr
	}
	if err != nil {
		return nil, fmt.Errorf("over a veth pair: %w", err)
	}
	return res, nil
}

// measureHandshakes does the connections on e and analyzes both ends' captures;
// oneWayNs is the configured one-way delay; taps, when not nil, has the emulator's
// timestamps of the same packets.
func measureHandshakes(ctx context.Context, e ends, count int, interval time.Duration, oneWayNs int64, taps *tapRecorder) (handshakeTimes, error) {
	var listener net.Listener
	err := netnsexec.Run(e.serverNetns, func() error {
		var err error
		listener, err = net.Listen("tcp4", netip.AddrPortFrom(e.serverAddr, 0).String())
		return err
	})
	if err != nil {
		return handshakeTimes{}, fmt.Errorf("listening in the server namespace: %w", err)
	}
	defer listener.Close()
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	port := uint16(listener.Addr().(*net.TCPAddr).Port)
	filter := capture.Filter{LocalPort: port}
	clientCapture, err := startCollecting(ctx, e.clientNetns, e.clientIf, filter)
	if err != nil {
		return handshakeTimes{}, err
	}
	serverCapture, err := startCollecting(ctx, e.serverNetns, e.serverIf, filter)
	if err != nil {
		clientCapture.finish()
		return handshakeTimes{}, err
	}

	target := netip.AddrPortFrom(e.serverAddr, port).String()
	next := time.Now()
	var dialErr error
	for range count {
		if dialErr = ctx.Err(); dialErr != nil {
			break
		}
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		dialErr = netnsexec.Run(e.clientNetns, func() error {
			conn, err := net.DialTimeout("tcp4", target, 5*time.Second)
			if err != nil {
				return err
			}
			return conn.Close()
		})
		if dialErr != nil {
			break
		}
	}
	// The last connection's FINs are still under way: give them the path's round trip.
	time.Sleep(time.Duration(2*oneWayNs) + 100*time.Millisecond)
	clientPackets, clientErr := clientCapture.finish()
	serverPackets, serverErr := serverCapture.finish()
	if err := errors.Join(dialErr, clientErr, serverErr); err != nil {
		return handshakeTimes{}, err
	}
	return analyzeHandshakes(clientPackets, serverPackets, e.clientAddr, oneWayNs, taps)
}

// tapRecorder keeps the time the emulator read or wrote each TCP packet, by device
// (0: the client's TUN, 1: the server's): a packet from the client is read at 0 and
// written at 1, one from the server the other way round.
type tapRecorder struct {
	mu   sync.Mutex
	seen [2]map[packetKey]int64
}

func (r *tapRecorder) tap(device int, data []byte, unixNs int64) {
	key, ok := parseKey(data)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[device] == nil {
		r.seen[device] = map[packetKey]int64{}
	}
	if _, dup := r.seen[device][key]; !dup {
		r.seen[device][key] = unixNs
	}
}

// times returns when the emulator read the packet and when it wrote it.
func (r *tapRecorder) times(key packetKey, fromClient bool) (readNs, writeNs int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in, out := 0, 1
	if !fromClient {
		in, out = 1, 0
	}
	readNs, readOK := r.seen[in][key]
	writeNs, writeOK := r.seen[out][key]
	return readNs, writeNs, readOK && writeOK
}

// parseKey reads the key of an IPv4 TCP packet as a TUN device carries it.
func parseKey(packet []byte) (packetKey, bool) {
	if len(packet) < 20 || packet[0]>>4 != 4 || packet[9] != 6 {
		return packetKey{}, false
	}
	ipHeader := int(packet[0]&0x0f) * 4
	totalLength := int(binary.BigEndian.Uint16(packet[2:]))
	if len(packet) < ipHeader+20 || totalLength < ipHeader+20 {
		return packetKey{}, false
	}
	tcp := packet[ipHeader:]
	tcpHeader := int(tcp[12]>>4) * 4
	if tcpHeader < 20 || len(tcp) < tcpHeader {
		return packetKey{}, false
	}
	src, _ := netip.AddrFromSlice(packet[12:16])
	dst, _ := netip.AddrFromSlice(packet[16:20])
	key := packetKey{
		src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:])), dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:])),
		seq: binary.BigEndian.Uint32(tcp[4:]), ack: binary.BigEndian.Uint32(tcp[8:]), flags: tcp[13],
		payloadBytes: totalLength - ipHeader - tcpHeader,
	}
	for options := tcp[20:tcpHeader]; len(options) > 0; {
		kind := options[0]
		if kind == 0 {
			break
		}
		if kind == 1 || len(options) < 2 || int(options[1]) < 2 || int(options[1]) > len(options) {
			options = options[1:]
			continue
		}
		if kind == 8 && options[1] == 10 {
			key.timestampOptions = binary.BigEndian.Uint32(options[2:])
		}
		options = options[options[1]:]
	}
	return key, true
}

// collector reads a live capture in the background.
type collector struct {
	live *capture.Live
	done chan struct{}
	got  []capture.Packet
	err  error
}

func startCollecting(ctx context.Context, netnsPath, iface string, filter capture.Filter) (*collector, error) {
	live, err := capture.OpenLive(ctx, capture.LiveOptions{Interface: iface, Netns: netnsPath, Filter: filter, Snaplen: 128})
	if err != nil {
		return nil, fmt.Errorf("capturing on %s in %s: %w", iface, netnsPath, err)
	}
	c := &collector{live: live, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			var p capture.Packet
			err := live.Next(&p)
			if err == io.EOF {
				return
			}
			if err != nil {
				c.err = err
				return
			}
			p.Payload = nil
			c.got = append(c.got, p)
		}
	}()
	return c, nil
}

// finish stops the capture and returns what it saw.
func (c *collector) finish() ([]capture.Packet, error) {
	c.live.Stop()
	<-c.done
	stats := c.live.Stats()
	c.live.Close()
	if c.err == nil && stats.KernelDrops > 0 {
		c.err = fmt.Errorf("the capture on %s lost %d packets", stats.Interface, stats.KernelDrops)
	}
	return c.got, c.err
}

// packetKey identifies one TCP segment on both interfaces.
type packetKey struct {
	src, dst         netip.AddrPort
	seq, ack         uint32
	flags            uint8
	payloadBytes     int
	timestampOptions uint32
}

func keyOf(p *capture.Packet) packetKey {
	return packetKey{netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort),
		p.Seq, p.Ack, p.Flags, p.PayloadLen, p.Options.TSVal}
}

// analyzeHandshakes matches the two captures packet by packet, and with the
// emulator's timestamps when taps is not nil.
func analyzeHandshakes(clientPackets, serverPackets []capture.Packet, clientAddr netip.Addr, oneWayNs int64, taps *tapRecorder) (handshakeTimes, error) {
	serverSeen := map[packetKey]int64{}
	for i := range serverPackets {
		serverSeen[keyOf(&serverPackets[i])] = serverPackets[i].TimestampNs
	}
	type handshake struct{ synOut, synAckIn, synIn, synAckOut int64 }
	handshakes := map[uint16]*handshake{} // by client port
	get := func(port uint16) *handshake {
		if handshakes[port] == nil {
			handshakes[port] = &handshake{}
		}
		return handshakes[port]
	}
	var oneWayErrors, readLatencies, holdErrors, writeLatencies []float64
	matched := 0
	for i := range clientPackets {
		p := &clientPackets[i]
		fromClient := p.Src == clientAddr
		serverNs, ok := serverSeen[keyOf(p)]
		if ok {
			matched++
			crossingNs := serverNs - p.TimestampNs // client → server
			if !fromClient {
				crossingNs = -crossingNs
			}
			oneWayErrors = append(oneWayErrors, float64(crossingNs-oneWayNs)/1e3)
			if taps != nil {
				if readNs, writeNs, ok := taps.times(keyOf(p), fromClient); ok {
					sentNs, receivedNs := p.TimestampNs, serverNs
					if !fromClient {
						sentNs, receivedNs = serverNs, p.TimestampNs
					}
					readLatencies = append(readLatencies, float64(readNs-sentNs)/1e3)
					holdErrors = append(holdErrors, float64(writeNs-readNs-oneWayNs)/1e3)
					writeLatencies = append(writeLatencies, float64(receivedNs-writeNs)/1e3)
				}
			}
		}
		switch {
		case fromClient && p.Flags&(capture.FlagSYN|capture.FlagACK) == capture.FlagSYN:
			h := get(p.SrcPort)
			if h.synOut == 0 {
				h.synOut = p.TimestampNs
				h.synIn = serverNs // 0 when not seen there
			}
		case !fromClient && p.Has(capture.FlagSYN|capture.FlagACK):
			h := get(p.DstPort)
			if h.synAckIn == 0 {
				h.synAckIn = p.TimestampNs
				h.synAckOut = serverNs
			}
		}
	}
	if matched < len(serverPackets)*9/10 {
		return handshakeTimes{}, fmt.Errorf("only %d of the server's %d packets were found in the client's capture", matched, len(serverPackets))
	}
	var rtt, turnaround, path []float64
	for _, h := range handshakes {
		if h.synOut == 0 || h.synAckIn == 0 || h.synIn == 0 || h.synAckOut == 0 {
			continue // a handshake the captures did not see whole
		}
		rtt = append(rtt, float64(h.synAckIn-h.synOut)/1e6)
		turnaround = append(turnaround, float64(h.synAckOut-h.synIn)/1e6)
		path = append(path, float64((h.synAckIn-h.synOut)-(h.synAckOut-h.synIn))/1e6)
	}
	if len(rtt) == 0 {
		return handshakeTimes{}, errors.New("no whole handshake in the captures")
	}
	times := handshakeTimes{
		ClientHandshakeMs: lab.Summarize(rtt), ServerTurnaroundMs: lab.Summarize(turnaround),
		PathRTTMs: lab.Summarize(path), OneWayErrorUs: lab.Summarize(oneWayErrors),
	}
	if len(readLatencies) > 0 {
		read, hold, write := lab.Summarize(readLatencies), lab.Summarize(holdErrors), lab.Summarize(writeLatencies)
		times.ReadLatencyUs, times.HoldErrorUs, times.WriteLatencyUs = &read, &hold, &write
	}
	return times, nil
}

// makeVethPair makes two namespaces joined by a veth pair (addresses in
// 198.19.255.0/30, a benchmarking range) and returns them and their removal.
func makeVethPair(ctx context.Context) (ends, func() error, error) {
	prefix := "ssbench-" + strconv.Itoa(os.Getpid())
	a, b := prefix+"-a", prefix+"-b"
	remove := func() error {
		var errs []error
		for _, ns := range []string{a, b} {
			if _, err := os.Stat(netlab.NetnsDir + "/" + ns); err == nil {
				if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", ns, err, out))
				}
			}
		}
		return errors.Join(errs...)
	}
	steps := [][]string{
		{"netns", "add", a}, {"netns", "add", b},
		{"-n", a, "link", "add", "veth0", "type", "veth", "peer", "name", "veth0", "netns", b},
		{"-n", a, "addr", "add", "198.19.255.1/30", "dev", "veth0"},
		{"-n", b, "addr", "add", "198.19.255.2/30", "dev", "veth0"},
		{"-n", a, "link", "set", "veth0", "up"}, {"-n", b, "link", "set", "veth0", "up"},
	}
	for _, step := range steps {
		if out, err := exec.CommandContext(ctx, "ip", step...).CombinedOutput(); err != nil {
			return ends{}, nil, errors.Join(fmt.Errorf("ip %v: %w: %s", step, err, out), remove())
		}
	}
	return ends{
		clientNetns: netlab.NetnsDir + "/" + a, serverNetns: netlab.NetnsDir + "/" + b,
		clientIf: "veth0", serverIf: "veth0",
		clientAddr: netip.MustParseAddr("198.19.255.1"), serverAddr: netip.MustParseAddr("198.19.255.2"),
	}, remove, nil
}
