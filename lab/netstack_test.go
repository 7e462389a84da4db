package lab

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/slowstart/slowstart/lab/netstack"
)

var keepNetstackCaptures = flag.String("keep-netstack-captures", "", "copy the captures of TestNetstackTrials into this directory as NAME.client.pcap and NAME.server.pcap (see testdata/captures/README.md)")

// TestNetstackTrials: lab trials with the netstack server (gVisor's TCP, whose
// initial window is 10 segments and no option changes) complete with the right
// byte count for the built-in client and curl, over HTTP/1.1 and TLS, and the
// server-side capture shows a first round of exactly the configured IW: the
// server's data segments sent before the first ACK of its data reached the
// server, counted from the capture by gopacket, not by the analysis. Over TLS the
// certificate chain (16 KB) is larger than the window, so the handshake flight is
// the round the window cuts. The stack sends segments larger than the MSS it
// announced (they are sized by the client's), and its Nagle's algorithm is RFC
// 896's: with it on, the response's short last segment waits until everything
// sent before it is acknowledged, though the window has room; with it off, the
// same segment leaves in the same round as the rest.
func TestNetstackTrials(t *testing.T) {
	needRoot(t)
	writes := Spec{RTTNs: 40e6, SizeBytes: 25440, Client: ClientBuiltin, WriteChunkBytes: 1000}
	writesNagle := writes
	writesNagle.Nagle = true
	trials := []struct {
		name string
		spec Spec
		// nagleHeld: the response's last segment is short and left only once all
		// data before it was acknowledged (true), or before that (false).
		nagleHeld *bool
		// handshakeFlight: over TLS with a chain smaller than the window, round 1
		// is the handshake flight and round 2 the response, which the window cuts
		// at the IW plus the flight's packets (the stack grows its window with
		// every packet acknowledged, even when it had not used it).
		handshakeFlight bool
	}{
		{"netstack-iw10-h1", Spec{RTTNs: 40e6, SizeBytes: 20 * 1448, Client: ClientBuiltin}, nil, false},
		{"netstack-iw10-mss536-h1", Spec{RTTNs: 40e6, SizeBytes: 20 * 1448, Client: ClientCurl, ServerMSS: 536}, nil, false},
		{"netstack-iw10-writes1000-nagle", writesNagle, ptr(true), false},
		{"netstack-iw10-writes1000", writes, ptr(false), false},
		{"netstack-iw10-reno-nosack-tls13-chain16k", Spec{RTTNs: 80e6, SizeBytes: 20000, Client: ClientCurl, TLS: "1.3", ChainBytes: 16000, CC: "reno", NoSACK: true}, nil, false},
		{"netstack-iw10-tls12h2-chain16k-nagle", Spec{RTTNs: 20e6, SizeBytes: 20000, Client: ClientBuiltin, TLS: "1.2", HTTP2: true, ChainBytes: 16000, Nagle: true}, nil, false},
		{"netstack-iw10-tls13", Spec{RTTNs: 40e6, SizeBytes: 30 * 1448, Client: ClientCurl, TLS: "1.3"}, nil, true},
	}
	var jobs []Job
	for _, tr := range trials {
		spec := tr.spec
		spec.Server, spec.IW, spec.InitRwnd = ServerNetstack, netstack.InitialWindowSegments, 300
		jobs = append(jobs, Job{Spec: spec, Trial: 1, Name: tr.name})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := NewEnv().RunJobs(ctx, jobs, RunOptions{Parallel: 2, CaptureDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows {
		spec, tr := jobs[i].Spec, trials[i]
		t.Run(tr.name+"-"+spec.Client, func(t *testing.T) {
			if row.Error != "" {
				t.Fatalf("trial failed: %s", row.Error)
			}
			if row.Bytes != spec.SizeBytes {
				t.Errorf("received %d body bytes, want %d", row.Bytes, spec.SizeBytes)
			}
			c, err := readServerSide(row.ServerPcap)
			if err != nil {
				t.Fatal(err)
			}
			rounds := c.rounds()
			switch segments, bytes := c.firstRound(); {
			case tr.handshakeFlight:
				if len(rounds) < 3 || segments != rounds[0] || segments >= spec.IW || rounds[1] != spec.IW+rounds[0] {
					t.Errorf("rounds of %v packets (the first %d, %d bytes), want a handshake flight shorter than the IW, %d, then the IW and the flight's packets",
						rounds, segments, bytes, spec.IW)
				}
			case segments != spec.IW || rounds[0] != segments:
				t.Errorf("the server-side capture shows %d segments (%d bytes) before the first ACK of server data (rounds %v), want the IW, %d",
					segments, bytes, rounds, spec.IW)
			}
			if spec.ServerMSS > 0 && c.largestSegment() <= spec.ServerMSS {
				t.Errorf("largest segment %d bytes, want more than the %d the server announced (the client's MSS sizes them)", c.largestSegment(), spec.ServerMSS)
			}
			if tr.nagleHeld != nil {
				tail := c.data[len(c.data)-1]
				held := c.allAckedBefore(tail)
				if tail.bytes >= spec.WriteChunkBytes || held != *tr.nagleHeld {
					t.Errorf("last segment %d bytes at %.1f ms; sent after everything before it was acknowledged: %v, want %v",
						tail.bytes, float64(tail.atNs-c.startNs)/1e6, held, *tr.nagleHeld)
				}
			}
		})
	}
	if *keepNetstackCaptures != "" {
		for i, row := range rows {
			if err := row.KeepCaptures(*keepNetstackCaptures, trials[i].name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// serverSide is a server-side capture of one connection, read with gopacket: the
// server's new data segments and the client's acknowledgements of server data,
// in capture order, with sequence numbers relative to the server's ISN.
type serverSide struct {
	startNs int64
	data    []dataSegment
	acks    []clientACK
}

// Each has its index in the capture (the order in which the emulator wrote them
// to or read them from the server's device) and its time.
type dataSegment struct {
	index      int
	atNs       int64
	seq, bytes int
}

type clientACK struct {
	index int
	atNs  int64
	ack   int
}

func readServerSide(path string) (*serverSide, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := &serverSide{}
	var serverPort layers.TCPPort
	var serverISN uint32
	sent := 0 // the highest relative sequence number sent
	for index := 0; ; index++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		at := ci.Timestamp.UnixNano()
		if c.startNs == 0 {
			c.startNs = at
		}
		packet := gopacket.NewPacket(data, layers.LayerTypeIPv4, gopacket.Default)
		tcp, _ := packet.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil {
			continue
		}
		switch {
		case tcp.SYN && tcp.ACK:
			serverPort, serverISN = tcp.SrcPort, tcp.Seq
		case serverPort == 0:
		case tcp.SrcPort == serverPort && len(tcp.Payload) > 0:
			seq := int(tcp.Seq - serverISN)
			if seq >= sent { // new data, not a retransmission
				c.data = append(c.data, dataSegment{index: index, atNs: at, seq: seq, bytes: len(tcp.Payload)})
				sent = seq + len(tcp.Payload)
			}
		case tcp.DstPort == serverPort && tcp.ACK && tcp.Ack-serverISN > 1:
			c.acks = append(c.acks, clientACK{index: index, atNs: at, ack: int(tcp.Ack - serverISN)})
		}
	}
	if len(c.data) == 0 || len(c.acks) == 0 {
		return nil, fmt.Errorf("%s: %d server data segments, %d ACKs of them", path, len(c.data), len(c.acks))
	}
	return c, nil
}

// firstRound counts the server's data segments sent before the first ACK of its
// data reached it.
func (c *serverSide) firstRound() (segments, bytes int) {
	for _, d := range c.data {
		if d.index > c.acks[0].index {
			break
		}
		segments++
		bytes += d.bytes
	}
	return segments, bytes
}

// rounds splits the server's data segments by its ACK clock and counts each
// round's: a round ends when an ACK of its first segment reaches the server, and
// the next segment sent starts the next round.
func (c *serverSide) rounds() []int {
	var counts []int
	roundStartSeq, ended := -1, true
	next := 0 // the next ACK to look at
	for _, d := range c.data {
		for ; next < len(c.acks) && c.acks[next].index < d.index; next++ {
			if roundStartSeq >= 0 && c.acks[next].ack > roundStartSeq {
				ended = true
			}
		}
		if ended {
			counts = append(counts, 0)
			roundStartSeq, ended = d.seq, false
		}
		counts[len(counts)-1]++
	}
	return counts
}

func (c *serverSide) largestSegment() int {
	largest := 0
	for _, d := range c.data {
		largest = max(largest, d.bytes)
	}
	return largest
}

// allAckedBefore tells whether an ACK of all the data sent before d reached the
// server before d left.
func (c *serverSide) allAckedBefore(d dataSegment) bool {
	for _, a := range c.acks {
		if a.ack >= d.seq && a.index < d.index {
			return true
		}
	}
	return false
}

// TestNetstackSpecChecks: what the netstack server cannot do is refused before any
// trial, with the reason, and its own options are refused for other servers; an
// accepted netstack point names the stack's IW, 10, even when it gave none.
func TestNetstackSpecChecks(t *testing.T) {
	cases := []struct {
		name    string
		spec    Spec
		wantErr string // "" for a spec that is accepted
	}{
		{"defaults", Spec{Server: ServerNetstack}, ""},
		{"iw 10 and reno", Spec{Server: ServerNetstack, IW: 10, CC: "reno", ServerMSS: 536, NoSACK: true, Nagle: true}, ""},
		{"another iw", Spec{Server: ServerNetstack, IW: 4}, "fixed 10 segments"},
		{"bbr", Spec{Server: ServerNetstack, CC: "bbr"}, "netstack offers cubic and reno"},
		{"http3", Spec{Server: ServerNetstack, HTTP3: true}, "TCP only"},
		{"mss too small", Spec{Server: ServerNetstack, ServerMSS: 50}, "MSS 50"},
		{"mss on linux", Spec{Server: ServerBuiltin, ServerMSS: 1400}, "an option of the netstack server"},
		// SACK off is every server's option now: a kernel server's through tcp_sack.
		{"no sack on nginx", Spec{Server: ServerNginx, NoSACK: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			err := spec.Normalize()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			case err == nil && spec.Server == ServerNetstack && spec.IW != 10:
				t.Errorf("IW %d after Normalize, want the stack's 10", spec.IW)
			}
		})
	}
}
