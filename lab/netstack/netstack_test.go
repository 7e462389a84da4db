package netstack_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/slowstart/slowstart/internal/testroot"
	"github.com/slowstart/slowstart/lab/client"
	"github.com/slowstart/slowstart/lab/labpath"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/lab/netstack"
	"github.com/slowstart/slowstart/lab/server"
)

// firstRound reads the server's side of a connection from the packets the emulator
// wrote to and read from the server namespace's TUN device, in their order: the
// server's first flight of data, counted up to the first client ACK that
// acknowledges server data (the ACK clock's first cut, as a capture at the server
// shows it).
type firstRound struct {
	mu         sync.Mutex
	server     netip.Addr
	serverISN  uint32
	synAck     bool
	clientMSS  int
	cut        bool
	segments   int
	bytes      int
	maxPayload int
	seen       map[uint32]bool
}

func (f *firstRound) tap(device int, data []byte, _ int64) {
	if device != 1 {
		return // the client's device: the same packets, 20 ms apart
	}
	packet := gopacket.NewPacket(data, layers.LayerTypeIPv4, gopacket.Default)
	ip, _ := packet.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	tcp, _ := packet.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if ip == nil || tcp == nil {
		return
	}
	src, _ := netip.AddrFromSlice(ip.SrcIP)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return
	}
	fromServer := src == f.server
	switch {
	case tcp.SYN && !tcp.ACK:
		for _, o := range tcp.Options {
			if o.OptionType == layers.TCPOptionKindMSS && len(o.OptionData) == 2 {
				f.clientMSS = int(o.OptionData[0])<<8 | int(o.OptionData[1])
			}
		}
	case tcp.SYN && fromServer:
		f.serverISN, f.synAck = tcp.Seq, true
	case fromServer && len(tcp.Payload) > 0:
		if !f.seen[tcp.Seq] {
			f.seen[tcp.Seq] = true
			f.segments++
			f.bytes += len(tcp.Payload)
			f.maxPayload = max(f.maxPayload, len(tcp.Payload))
		}
	case !fromServer && f.synAck && tcp.ACK && tcp.Ack-f.serverISN > 1:
		f.cut = true // the first ACK of server data reached the server
	}
}

// TestFirstRoundIsTheWindowItReports: netstack serving a response of 30
// segments over a 40 ms path sends 10 segments before the first ACK of its data
// reaches it, as a capture at the server counts them, and its own state (the
// TCP probe) says the same: a window of 10 packets when the request came. Its
// segments are the client's MSS less the 40 bytes it keeps for options with SACK
// and timestamps on (12 for timestamps alone, 36 for SACK alone: four SACK
// blocks, none for neither), whatever MSS it announced itself (TCP_MAXSEG).
func TestFirstRoundIsTheWindowItReports(t *testing.T) {
	testroot.Require(t, "network namespaces and TUN devices")
	t.Cleanup(func() { labpath.CloseAll() })
	cases := []struct {
		name        string
		opts        netstack.Options
		timestamps  bool // the client offers timestamps (tcp_timestamps=1)
		wantPayload int  // the client's MSS (1460) less what netstack keeps for options
	}{
		{"sack-timestamps", netstack.Options{}, true, 1460 - 40},
		{"timestamps-announce-536", netstack.Options{NoSACK: true, MSS: 536, CongestionControl: netstack.CongestionReno}, true, 1460 - 12},
		{"sack-no-timestamps", netstack.Options{Nagle: true}, false, 1460 - 36},
		{"no-options", netstack.Options{NoSACK: true}, false, 1460},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			round := &firstRound{seen: map[uint32]bool{}}
			cfg := labpath.Config{RTT: 40 * time.Millisecond, Tap: round.tap}
			if !tc.timestamps {
				cfg.Sysctls = map[string]string{"ipv4/tcp_timestamps": "0"}
			}
			path, err := labpath.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer path.Close()

			var mu sync.Mutex
			var samples []netstack.Sample
			opts := tc.opts
			opts.Probe = func(s netstack.Sample) {
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
			running, err := server.StartOnPath(ctx, path, server.OnPath{Kind: server.KindNetstack,
				Addr: netip.AddrPortFrom(path.ServerAddr, 80), Netstack: opts})
			if err != nil {
				t.Fatal(err)
			}
			if running.Addr.Addr() != running.Netstack.Addr4 || running.Addr.Addr() == path.ServerAddr {
				t.Fatalf("the netstack server listens at %v, want its own address %v", running.Addr, running.Netstack.Addr4)
			}
			round.mu.Lock()
			round.server = running.Addr.Addr()
			round.mu.Unlock()

			const bodyBytes = 30 * 1448
			res, err := client.Fetch(ctx, client.FetchConfig{URL: fmt.Sprintf("http://%s/bytes/%d", running.Addr, bodyBytes), Dial: path.Dial})
			if err != nil {
				t.Fatal(err)
			}
			if res.Bytes != bodyBytes {
				t.Fatalf("fetched %d body bytes, want %d", res.Bytes, bodyBytes)
			}
			if err := path.Close(); err != nil {
				t.Fatal(err)
			}

			round.mu.Lock()
			defer round.mu.Unlock()
			if !round.cut || round.clientMSS != 1460 {
				t.Fatalf("the capture shows no ACK of server data (cut %v) or a client MSS of %d, want 1460", round.cut, round.clientMSS)
			}
			if round.segments != netstack.InitialWindowSegments {
				t.Errorf("the server sent %d segments (%d bytes) before the first ACK of its data, want its initial window, %d",
					round.segments, round.bytes, netstack.InitialWindowSegments)
			}
			if round.maxPayload != tc.wantPayload {
				t.Errorf("largest segment %d bytes, want %d", round.maxPayload, tc.wantPayload)
			}

			mu.Lock()
			defer mu.Unlock()
			// The first segment the connection received after its handshake is the
			// request (or the handshake's last ACK): nothing sent yet, the window whole.
			if len(samples) == 0 || samples[0].SndNxt != samples[0].SndUna {
				t.Fatalf("the probe saw no segment before the response (%d samples)", len(samples))
			}
			request := samples[0]
			if request.CwndSegments != netstack.InitialWindowSegments || request.MaxPayloadBytes != tc.wantPayload {
				t.Errorf("the stack's own state when the request came: cwnd %d segments, largest payload %d bytes; want %d and %d",
					request.CwndSegments, request.MaxPayloadBytes, netstack.InitialWindowSegments, tc.wantPayload)
			}
		})
	}
}

// TestCloseLeavesNothing: a stack's TUN device goes with the stack, and the
// path's namespaces with the path.
func TestCloseLeavesNothing(t *testing.T) {
	testroot.Require(t, "network namespaces and TUN devices")
	t.Cleanup(func() { labpath.CloseAll() })
	ctx := context.Background()
	path, err := labpath.Start(ctx, labpath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer path.Close()
	stack, err := netstack.Start(ctx, path, netstack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deviceExists := func() bool {
		var exists bool
		if err := path.Do(labpath.Server, func() error {
			_, err := net.InterfaceByName(netstack.TUNName)
			exists = err == nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return exists
	}
	if !deviceExists() {
		t.Fatalf("no %s in the server namespace of a started stack", netstack.TUNName)
	}
	if err := stack.Close(); err != nil {
		t.Fatal(err)
	}
	if deviceExists() {
		t.Errorf("%s is still in the server namespace after Close", netstack.TUNName)
	}
	names := []string{path.ClientNamespace, path.ServerNamespace}
	if err := path.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := os.Stat(netlab.NetnsDir + "/" + name); err == nil {
			t.Errorf("namespace %s is left after the path closed", name)
		}
	}
}
