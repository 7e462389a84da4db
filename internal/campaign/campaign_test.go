package campaign

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/internal/hoststeal"
	"github.com/slowstart/slowstart/report"
)

// suiteSeed and suiteTrials are the fixed sample the suite runs: the same trials
// every run (bench/truth runs the thousands with other seeds).
const (
	suiteSeed   = 20261127
	suiteTrials = 240
)

// TestCampaign runs the fixed sample of the truth campaign: every reading, from
// both ends of every trial, holds the server kernel's own initial window (an exact
// reading equal to it, a lower bound at most it, a range around it). A trial with
// a wrong reading keeps its captures in $SLOWSTART_KEEP (or the test's log says
// how to run it again).
func TestCampaign(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the lab needs root")
	}
	meter := hoststeal.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	keepDir := os.Getenv("SLOWSTART_KEEP")
	if keepDir == "" {
		keepDir = t.TempDir()
	}
	tally, results, err := Run(ctx, Options{Seed: suiteSeed, Trials: suiteTrials, Parallel: 4, KeepDir: keepDir})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	tally.Write(&out)
	t.Logf("steal %s\n%s", meter.Read(), out.String())
	for _, r := range results {
		for _, x := range r.Readings {
			if x.Wrong != "" && r.Distorted != "" {
				// The host stalled the emulator or a peer in every run of the
				// trial: the packets show a path that was not drawn.
				t.Logf("%s (on a path the host distorted: %s): %s %s reading: %s", r.Name, r.Distorted, x.Vantage, x.Source, x.Wrong)
			} else if x.Wrong != "" {
				t.Errorf("%s (truth %d from the %s; go run ./bench/truth -seed %d -first %d -trials 1): %s %s reading: %s",
					r.Name, r.TruthIW, r.TruthSource, suiteSeed, r.Index, x.Vantage, x.Source, x.Wrong)
			}
		}
	}
	// The sample must be a sample: most trials run through, and the readings span
	// the verdicts (a campaign whose trials all failed, or that reads nothing
	// exact, checks nothing).
	if tally.Failed > tally.Trials/10 {
		t.Errorf("%d of %d trials did not run through", tally.Failed, tally.Trials)
		for _, r := range results {
			if r.Error != "" {
				t.Logf("%s: %s", r.Name, r.Error)
			}
		}
	}
	// A wrong reading of a trial the host distorted in every run fails
	// nothing: when most trials are, the host, not the analysis, was measured.
	if tally.Distorted > tally.Trials/2 {
		t.Errorf("%d of %d trials stayed distorted by the host after their reruns", tally.Distorted, tally.Trials)
		for _, r := range results {
			if r.Distorted != "" {
				t.Logf("%s: %s", r.Name, r.Distorted)
			}
		}
	}
	if tally.ExactRight == 0 || tally.BoundHolds == 0 || tally.RangeHolds == 0 {
		t.Errorf("the sample read %d exact, %d bounds and %d ranges: it covers too little", tally.ExactRight, tally.BoundHolds, tally.RangeHolds)
	}
}

// TestDrawIsReproducible: a trial is its seed and index: the same pair draws the
// same spec, another index another one, and every drawn spec is one the lab runs.
func TestDrawIsReproducible(t *testing.T) {
	seen := map[string]bool{}
	for i := range 500 {
		a, b := Draw(7, i), Draw(7, i)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("trial %d drawn twice differs:\n%+v\n%+v", i, a, b)
		}
		s := a
		if err := s.Normalize(); err != nil {
			t.Errorf("trial %d: %+v: %v", i, a, err)
		}
		seen[s.Label()+s.Server+s.Client+s.CC] = true
	}
	if len(seen) < 400 {
		t.Errorf("500 trials drew only %d distinct specs", len(seen))
	}
	// The space is covered: each dimension takes each of its values somewhere.
	var servers, ccs, tls = map[string]bool{}, map[string]bool{}, map[string]bool{}
	var advmss, ipv6, noTS, writes, loss, reorder, proxy bool
	for i := range 500 {
		s := Draw(7, i)
		servers[s.Server], ccs[s.CC], tls[s.TLS] = true, true, true
		advmss = advmss || s.ServerAdvMSS > 0
		ipv6 = ipv6 || s.IPv6
		noTS = noTS || s.NoTimestamps
		writes = writes || s.WriteChunkBytes > 0
		loss = loss || s.LossRate > 0
		reorder = reorder || s.Reorder
		proxy = proxy || s.ProxyUpstreamRTTNs > 0
	}
	if len(servers) != 4 || len(ccs) != 3 || len(tls) != 3 || !advmss || !ipv6 || !noTS || !writes || !loss || !reorder || !proxy {
		t.Errorf("500 trials miss part of the space: servers %v, cc %v, TLS %v, advmss %v, IPv6 %v, no timestamps %v, writes %v, loss %v, reorder %v, proxy %v",
			servers, ccs, tls, advmss, ipv6, noTS, writes, loss, reorder, proxy)
	}
}

// TestMergeGRO: the copy of a capture merges back-to-back data segments of one
// direction into frames of many segments, keeps every byte, and the analysis reads
// the same bytes and rounds from it (the rounds count a merged frame as the
// segments it holds).
func TestMergeGRO(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.pcap")
	writeTransfer(t, in, 10, 20)
	out := filepath.Join(t.TempDir(), "gro.pcap")
	if err := mergeGRO(in, out); err != nil {
		t.Fatal(err)
	}
	frames := func(path string) (n, largest int) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		for {
			data, _, err := r.ReadPacketData()
			if err != nil {
				return n, largest
			}
			n++
			largest = max(largest, len(data))
		}
	}
	n0, l0 := frames(in)
	n1, l1 := frames(out)
	if n1 >= n0 || l1 <= 3*l0 {
		t.Fatalf("GRO copy: %d frames (largest %d bytes), the capture %d (largest %d): nothing merged", n1, l1, n0, l0)
	}
	read := func(path string) *report.Connection {
		rep, err := analysis.File(context.Background(), path, analysis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rep.Connections {
			if rep.Connections[i].BytesToClient > 0 {
				return &rep.Connections[i]
			}
		}
		t.Fatalf("%s: no connection with data", path)
		return nil
	}
	a, b := read(in), read(out)
	if a.BytesToClient != b.BytesToClient || len(a.Rounds) != len(b.Rounds) {
		t.Fatalf("GRO copy reads %d bytes in %d rounds, the capture %d in %d", b.BytesToClient, len(b.Rounds), a.BytesToClient, len(a.Rounds))
	}
	for i := range a.Rounds {
		if a.Rounds[i].Segments != b.Rounds[i].Segments {
			t.Errorf("round %d: %d segments in the GRO copy, %d in the capture", i+1, b.Rounds[i].Segments, a.Rounds[i].Segments)
		}
	}
}

// writeTransfer writes a raw-IPv4 capture, at the client, of a handshake, a request
// and a response of two rounds: first (segments arriving back to back), an
// acknowledgement, then second more, 50 ms apart.
func writeTransfer(t *testing.T, path string, first, second int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	client, server := net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2)
	at := time.Unix(1_700_000_000, 0)
	const mss = 1448
	write := func(ms float64, fromClient bool, flags string, seq, ack uint32, payload int) {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: server, DstIP: client}
		tcp := &layers.TCP{SrcPort: 80, DstPort: 40000, Seq: seq, Ack: ack, Window: 65535}
		if fromClient {
			ip.SrcIP, ip.DstIP = client, server
			tcp.SrcPort, tcp.DstPort = 40000, 80
		}
		tcp.SYN, tcp.ACK, tcp.PSH = strings.Contains(flags, "S"), strings.Contains(flags, "A"), strings.Contains(flags, "P")
		if tcp.SYN {
			tcp.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}
		}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp, gopacket.Payload(make([]byte, payload))); err != nil {
			t.Fatal(err)
		}
		ts := at.Add(time.Duration(ms * float64(time.Millisecond)))
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(buf.Bytes()), Length: len(buf.Bytes())}, buf.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	const cISN, sISN = 1000, 5000
	write(0, true, "S", cISN, 0, 0)
	write(50, false, "SA", sISN, cISN+1, 0)
	write(50.1, true, "A", cISN+1, sISN+1, 0)
	write(50.2, true, "PA", cISN+1, sISN+1, 100)
	seq := uint32(sISN + 1)
	for i := range first {
		write(100.2+0.01*float64(i), false, "A", seq, cISN+101, mss)
		seq += mss
	}
	write(100.4, true, "A", cISN+101, sISN+1+2*mss, 0)
	for i := range second {
		write(150.4+0.01*float64(i), false, "A", seq, cISN+101, mss)
		seq += mss
	}
	write(150.8, true, "A", cISN+101, seq, 0)
}
