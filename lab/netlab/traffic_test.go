package netlab

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// ioTimeout bounds each test's network I/O so a broken path fails instead of hanging.
const ioTimeout = 10 * time.Second

// forwardFunc decides what happens to a packet read from one TUN file: it may
// write it (or others) to the other side's file with deliver.
type forwardFunc func(fromClient bool, packet []byte, deliver func(to Side, packet []byte))

// startBridge copies packets between the trial's TUN files in both directions, as
// the link emulator would but with no delay, through forward when it is not nil.
// It stops when the test ends, before the trial is closed.
func startBridge(t *testing.T, trial *Trial, forward forwardFunc) {
	t.Helper()
	if forward == nil {
		forward = func(fromClient bool, packet []byte, deliver func(Side, []byte)) {
			if fromClient {
				deliver(Server, packet)
			} else {
				deliver(Client, packet)
			}
		}
	}
	deliver := func(to Side, packet []byte) {
		// Write errors lose the packet, as a link would; TCP recovers or the test times out.
		trial.TUN(to).Write(packet)
	}
	var wg sync.WaitGroup
	for _, fromClient := range []bool{true, false} {
		from := trial.ServerTUN
		if fromClient {
			from = trial.ClientTUN
		}
		wg.Go(func() {
			buffer := make([]byte, MaxMTU)
			for {
				n, err := from.Read(buffer)
				if err != nil {
					return // deadline set by the cleanup below, or closed
				}
				forward(fromClient, buffer[:n], deliver)
			}
		})
	}
	t.Cleanup(func() {
		trial.ClientTUN.SetReadDeadline(time.Now())
		trial.ServerTUN.SetReadDeadline(time.Now())
		wg.Wait()
	})
}

func TestTransferOverTUN(t *testing.T) {
	requireRoot(t)
	trial := createTrial(t, Options{InitCwnd: 4, InitRwnd: 20})
	startBridge(t, trial, nil)
	const transferBytes = 1 << 20
	payload := make([]byte, transferBytes)
	random := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(random.Uint32())
	}
	for _, test := range []struct {
		name    string
		network string
		ipv6    bool
	}{
		{"IPv4", "tcp4", false},
		{"IPv6", "tcp6", true},
	} {
		t.Run(test.name, func(t *testing.T) {
			got := transfer(t, trial, test.network, trial.Addr(Server, test.ipv6), payload)
			if !bytes.Equal(got, payload) {
				t.Fatalf("client received %d bytes that differ from the %d sent", len(got), len(payload))
			}
		})
	}
}

// transfer listens in the server namespace on serverAddr, dials it from the client
// namespace, has the server send payload and close, and returns what the client read.
func transfer(t *testing.T, trial *Trial, network string, serverAddr netip.Addr, payload []byte) []byte {
	t.Helper()
	listener, err := trial.Listen(Server, network, net.JoinHostPort(serverAddr.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	serverErr := make(chan error, 1)
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(ioTimeout))
		_, err = conn.Write(payload)
		serverErr <- err
	}()

	ctx, cancel := context.WithTimeout(t.Context(), ioTimeout)
	defer cancel()
	conn, err := trial.DialContext(ctx, Client, network, listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if local := conn.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); local != trial.Addr(Client, serverAddr.Is6()) {
		t.Errorf("client connected from %s, want %s", local, trial.Addr(Client, serverAddr.Is6()))
	}
	conn.SetDeadline(time.Now().Add(ioTimeout))
	received, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("client read after %d bytes: %v", len(received), err)
	}
	if err := <-serverErr; err != nil {
		t.Fatalf("server: %v", err)
	}
	return received
}

// TestInitialWindowHonoured measures the server's first flight the way an active
// IW measurement does: the bridge forwards the handshake but holds every client
// packet that acknowledges data, so the server can send only its initial window
// and then must retransmit on timeout. Distinct payload bytes before the first
// retransmission, divided by the MSS, are the initial window. Tail loss probes,
// which would send one segment beyond the window, are turned off.
func TestInitialWindowHonoured(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name         string
		initCwnd     int
		ipv6         bool
		wantSegments int
	}{
		{"initcwnd 4 IPv4", 4, false, 4},
		{"initcwnd 4 IPv6", 4, true, 4},
		{"kernel default IPv4", 0, false, 10},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			trial := createTrial(t, Options{InitCwnd: test.initCwnd, InitRwnd: 20,
				Sysctls: map[string]string{"ipv4/tcp_early_retrans": "0"}})
			flight := &firstFlight{}
			startBridge(t, trial, flight.forward)
			network := "tcp4"
			if test.ipv6 {
				network = "tcp6"
			}
			payload := bytes.Repeat([]byte("slowstart"), 100_000/9)
			got := transfer(t, trial, network, trial.Addr(Server, test.ipv6), payload)
			if len(got) != len(payload) {
				t.Fatalf("client received %d bytes, want %d", len(got), len(payload))
			}

			bytesSent, segments, mss, err := flight.result()
			if err != nil {
				t.Fatal(err)
			}
			wantMSS := 1448 // MTU 1500 less IPv4 and TCP headers and the timestamp option
			if test.ipv6 {
				wantMSS = 1428
			}
			if mss != wantMSS {
				t.Errorf("negotiated MSS less options = %d bytes, want %d", mss, wantMSS)
			}
			if segments != test.wantSegments || bytesSent != test.wantSegments*mss {
				t.Errorf("first flight = %d segments, %d bytes; want %d segments of %d bytes (%d)",
					segments, bytesSent, test.wantSegments, mss, test.wantSegments*mss)
			}
		})
	}
}

// firstFlight is a forwardFunc that holds the client's data ACKs until the server
// retransmits, and counts the server's data up to that retransmission.
type firstFlight struct {
	mu             sync.Mutex
	serverISN      uint32
	synAckSeen     bool
	clientMSS      int
	serverMSS      int
	timestamps     bool
	released       bool     // the server retransmitted: forward everything
	held           [][]byte // client packets held back, in order
	nextSeq        uint32   // end of the highest server data seen
	flightBytes    int
	flightSegments int
}

func (f *firstFlight) forward(fromClient bool, packet []byte, deliver func(Side, []byte)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	segment, isTCP := parseTCP(packet)
	if fromClient {
		switch {
		case isTCP && segment.flags&tcpFlagSYN != 0:
			f.clientMSS = segment.mss
		case f.released || !isTCP || !f.synAckSeen || segment.ack == f.serverISN+1:
			// Not TCP, or the handshake's last ACK: let it through.
		default:
			f.held = append(f.held, bytes.Clone(packet))
			return
		}
		deliver(Server, packet)
		return
	}
	deliver(Client, packet)
	if !isTCP {
		return
	}
	if segment.flags&tcpFlagSYN != 0 {
		f.serverISN, f.serverMSS, f.synAckSeen = segment.seq, segment.mss, true
		f.timestamps = segment.timestamps
		f.nextSeq = segment.seq + 1
		return
	}
	if f.released || segment.payloadBytes == 0 {
		return
	}
	end := segment.seq + uint32(segment.payloadBytes)
	if int32(end-f.nextSeq) <= 0 {
		// A retransmission: the first flight is over; release the held ACKs.
		f.released = true
		for _, held := range f.held {
			deliver(Server, held)
		}
		f.held = nil
		return
	}
	f.flightBytes += int(end - f.nextSeq)
	f.flightSegments++
	f.nextSeq = end
}

// result returns the first flight's bytes and segments and the MSS less the
// timestamp option, once the server has retransmitted.
func (f *firstFlight) result() (flightBytes, segments, mss int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.released {
		return 0, 0, 0, errors.New("the server never retransmitted: the first flight was not isolated")
	}
	mss = min(f.clientMSS, f.serverMSS)
	if f.timestamps {
		mss -= 12
	}
	return f.flightBytes, f.flightSegments, mss, nil
}

// tcpFlagSYN is the SYN bit of the TCP flags byte.
const tcpFlagSYN = 0x02

// tcpSegment is what the tests need of a TCP segment.
type tcpSegment struct {
	seq, ack     uint32
	flags        uint8
	payloadBytes int
	mss          int  // 0 without the option
	timestamps   bool // the timestamp option is present
}

// parseTCP decodes an IPv4 or IPv6 packet (without extension headers) carrying TCP.
func parseTCP(packet []byte) (tcpSegment, bool) {
	var segment tcpSegment
	if len(packet) < 1 {
		return segment, false
	}
	var tcp []byte
	switch packet[0] >> 4 {
	case 4:
		if len(packet) < 20 || packet[9] != 6 {
			return segment, false
		}
		headerBytes := int(packet[0]&0x0f) * 4
		totalBytes := int(binary.BigEndian.Uint16(packet[2:4]))
		if totalBytes > len(packet) || headerBytes > totalBytes {
			return segment, false
		}
		tcp = packet[headerBytes:totalBytes]
	case 6:
		if len(packet) < 40 || packet[6] != 6 {
			return segment, false
		}
		payloadBytes := int(binary.BigEndian.Uint16(packet[4:6]))
		if 40+payloadBytes > len(packet) {
			return segment, false
		}
		tcp = packet[40 : 40+payloadBytes]
	default:
		return segment, false
	}
	if len(tcp) < 20 {
		return segment, false
	}
	headerBytes := int(tcp[12]>>4) * 4
	if headerBytes < 20 || headerBytes > len(tcp) {
		return segment, false
	}
	segment.seq = binary.BigEndian.Uint32(tcp[4:8])
	segment.ack = binary.BigEndian.Uint32(tcp[8:12])
	segment.flags = tcp[13]
	segment.payloadBytes = len(tcp) - headerBytes
	options := tcp[20:headerBytes]
	for len(options) > 0 {
		kind := options[0]
		if kind == 0 {
			break
		}
		if kind == 1 {
			options = options[1:]
			continue
		}
		if len(options) < 2 || int(options[1]) < 2 || int(options[1]) > len(options) {
			break
		}
		switch {
		case kind == 2 && options[1] == 4:
			segment.mss = int(binary.BigEndian.Uint16(options[2:4]))
		case kind == 8:
			segment.timestamps = true
		}
		options = options[options[1]:]
	}
	return segment, true
}

func TestParseTCP(t *testing.T) {
	// An IPv4 SYN with MSS 1460 and timestamps, and the same TCP header over IPv6.
	tcpHeader := []byte{
		0x30, 0x39, 0x01, 0xbb, // ports 12345 → 443
		0, 0, 0, 100, 0, 0, 0, 0, // seq 100, ack 0
		0x90, tcpFlagSYN, 0xff, 0xff, 0, 0, 0, 0, // data offset 9 words
		2, 4, 0x05, 0xb4, // MSS 1460
		1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, // NOP NOP timestamps
	}
	ipv4 := append([]byte{0x45, 0, 0, byte(20 + len(tcpHeader)), 0, 0, 0, 0, 64, 6, 0, 0,
		198, 18, 0, 1, 198, 18, 0, 2}, tcpHeader...)
	ipv6 := append(append([]byte{0x60, 0, 0, 0, 0, byte(len(tcpHeader)), 6, 64}, make([]byte, 32)...), tcpHeader...)
	withData := append(bytes.Clone(ipv4), "hello"...)
	withData[3] += 5
	tests := []struct {
		name   string
		packet []byte
		want   tcpSegment
		wantOK bool
	}{
		{"IPv4 SYN", ipv4, tcpSegment{seq: 100, flags: tcpFlagSYN, mss: 1460, timestamps: true}, true},
		{"IPv6 SYN", ipv6, tcpSegment{seq: 100, flags: tcpFlagSYN, mss: 1460, timestamps: true}, true},
		{"IPv4 with payload", withData, tcpSegment{seq: 100, flags: tcpFlagSYN, mss: 1460, timestamps: true, payloadBytes: 5}, true},
		{"truncated", ipv4[:30], tcpSegment{}, false},
		{"UDP", append([]byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17}, make([]byte, 18)...), tcpSegment{}, false},
		{"empty", nil, tcpSegment{}, false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, ok := parseTCP(test.packet)
			if ok != test.wantOK || (ok && got != test.want) {
				t.Errorf("parseTCP = %+v, %v; want %+v, %v", got, ok, test.want, test.wantOK)
			}
		})
	}
}
