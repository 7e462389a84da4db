package lab

import (
	"context"
	"errors"
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

// TestNetstackTrialFirstRound: lab trials with the netstack server (gVisor's TCP,
// whose initial window is 10 segments and no option changes) complete with the
// right byte count for the built-in client and curl, over HTTP/1.1 and TLS, and
// the server-side capture shows a first round of exactly the configured IW: the
// server's data segments sent before the first ACK of its data reached the
// server, counted from the capture by gopacket, not by the analysis. Over TLS the
// certificate chain (16 KB) is larger than the window, so the handshake flight is
// the round the window cuts.
func TestNetstackTrialFirstRound(t *testing.T) {
	needRoot(t)
	specs := []Spec{
		{RTTNs: 20e6, IW: 10, SizeBytes: 30 * 1448, Client: ClientBuiltin},
		{RTTNs: 80e6, IW: 10, SizeBytes: 30 * 1448, Client: ClientCurl, ServerMSS: 536, NoSACK: true, CC: "reno"},
		{RTTNs: 80e6, IW: 10, SizeBytes: 20000, Client: ClientCurl, TLS: "1.3", ChainBytes: 16000},
		{RTTNs: 20e6, IW: 10, SizeBytes: 20000, Client: ClientBuiltin, TLS: "1.2", HTTP2: true, ChainBytes: 16000, Nagle: true},
	}
	var jobs []Job
	for i, spec := range specs {
		spec.Server = ServerNetstack
		jobs = append(jobs, Job{Spec: spec, Trial: 1, Name: fmt.Sprintf("netstack%d-%s", i, spec.Label())})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := NewEnv().RunJobs(ctx, jobs, RunOptions{Parallel: 2, CaptureDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows {
		spec := jobs[i].Spec
		t.Run(jobs[i].Name+"-"+spec.Client, func(t *testing.T) {
			if row.Error != "" {
				t.Fatalf("trial failed: %s", row.Error)
			}
			if row.Bytes != spec.SizeBytes {
				t.Errorf("received %d body bytes, want %d", row.Bytes, spec.SizeBytes)
			}
			segments, bytes, err := serverFirstRound(row.ServerPcap)
			if err != nil {
				t.Fatal(err)
			}
			if segments != spec.IW || spec.IW != netstack.InitialWindowSegments {
				t.Errorf("the server-side capture shows %d segments (%d bytes) before the first ACK of server data, want the IW, %d",
					segments, bytes, spec.IW)
			}
		})
	}
}

// serverFirstRound counts, in a server-side capture of one connection, the
// server's new data segments before the first client segment that acknowledges
// server data: the first round by the server's own ACK clock.
func serverFirstRound(path string) (segments, bytes int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	var serverPort layers.TCPPort
	var serverISN uint32
	seen := map[uint32]bool{}
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("%s: no ACK of server data after %d segments", path, segments)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", path, err)
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
		case tcp.SrcPort == serverPort && len(tcp.Payload) > 0 && !seen[tcp.Seq]:
			seen[tcp.Seq] = true
			segments++
			bytes += len(tcp.Payload)
		case tcp.DstPort == serverPort && tcp.ACK && tcp.Ack-serverISN > 1:
			return segments, bytes, nil
		}
	}
}

// TestNetstackSpecChecks: what the netstack server cannot do is refused before any
// trial, with the reason, and its own options are refused for other servers.
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
		{"mss on linux", Spec{Server: ServerBuiltin, ServerMSS: 1400}, "options of the netstack server"},
		{"no sack on nginx", Spec{Server: ServerNginx, NoSACK: true}, "options of the netstack server"},
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
			}
		})
	}
}
