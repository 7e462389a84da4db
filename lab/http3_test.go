package lab

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// TestHTTP3Trials runs points over TCP and their HTTP/3 twins through the emulated
// path (40 ms) with a small and a large certificate chain, and checks what the
// configuration decides: every transfer delivers the page; TCP's handshakes take two
// round trips (TCP, then TLS 1.3: both chains fit in IW 10); QUIC's handshake takes
// one round trip when the server's flight (the chain and about 700 bytes) fits in
// three times quic-go's 1,280-byte first datagram, and two when the chain alone is
// larger than that; and no QUIC handshake is faster than a round trip.
func TestHTTP3Trials(t *testing.T) {
	needRoot(t)
	const rttMs = 40
	servers := []string{ServerBuiltin}
	if _, err := exec.LookPath("caddy"); err == nil {
		servers = append(servers, ServerCaddy)
	} else {
		t.Log("caddy is not installed (apt-get install caddy): the built-in server only")
	}
	var jobs []Job
	for _, srv := range servers {
		for _, chain := range []int{1500, 9000} {
			tcp := Spec{RTTNs: rttMs * 1e6, IW: 10, SizeBytes: 100_000, TLS: "1.3", HTTP2: true, ChainBytes: chain, Server: srv, Seed: 1}
			if err := tcp.Normalize(); err != nil {
				t.Fatal(err)
			}
			quic, err := tcp.HTTP3Twin()
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, Job{Spec: tcp, Trial: 1, RoundTrips: true}, Job{Spec: quic, Trial: 1, RoundTrips: true})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := NewEnv()
	rows, err := env.RunJobs(ctx, jobs, RunOptions{Parallel: 2, CaptureDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// A trial whose time to the last byte is shorter than the round trips its
	// capture was read to take is run once more, and the miss is logged; a miss
	// that repeats fails. (CI once read 2 + 4 with 80.9 ms from first to last
	// byte: the capture had run on to the server's close_notify, a round trip
	// after the client's close, which counted as a round then. The analysis now
	// leaves such an alert out: TestCloseAlertIsNoRound.)
	for i, row := range rows {
		rt := row.RoundTrips
		if row.Error != "" || rt == nil || row.FCTUserMs >= float64(rt.Total)*rttMs*0.9 {
			continue
		}
		t.Logf("%s-%s: FCT %.1f ms (first to last byte %.1f ms) for %d + %d round trips of %d ms: running the trial again",
			jobs[i].Spec.Label(), jobs[i].Spec.Server, row.FCTUserMs, row.FCTPaperMs, rt.Handshake, rt.Data, rttMs)
		again, err := env.RunJobs(ctx, []Job{jobs[i]}, RunOptions{Parallel: 1, CaptureDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = again[0]
	}
	for i, row := range rows {
		spec := jobs[i].Spec
		t.Run(fmt.Sprintf("%s-%s-chain%d", spec.Label(), spec.Server, spec.ChainBytes), func(t *testing.T) {
			if row.Error != "" {
				t.Fatalf("trial failed: %s", row.Error)
			}
			if row.Bytes != spec.SizeBytes {
				t.Errorf("%d bytes received, want %d", row.Bytes, spec.SizeBytes)
			}
			if row.RoundTrips == nil {
				t.Fatal("no round trips counted")
			}
			rt := row.RoundTrips
			want := 2 // TCP, then TLS 1.3
			if spec.HTTP3 {
				want = 1
				if spec.ChainBytes > 3*1280 {
					want = 2
				}
				if row.Protocol != ProtocolHTTP3 || row.KeyLog == "" {
					t.Errorf("protocol %q, key log %q", row.Protocol, row.KeyLog)
				}
			}
			if rt.Handshake != want {
				t.Errorf("%d handshake round trips, want %d (chain %d bytes)", rt.Handshake, want, spec.ChainBytes)
			}
			if rt.Data < 1 || rt.Total != rt.Handshake+rt.Data {
				t.Errorf("round trips %+v", *rt)
			}
			if row.ConnectMs < rttMs || row.FCTUserMs < float64(rt.Total)*rttMs*0.9 {
				t.Errorf("connect %.1f ms, FCT %.1f ms for %d round trips of %d ms", row.ConnectMs, row.FCTUserMs, rt.Total, rttMs)
			}
			t.Logf("%s: round trips %d + %d, FCT user %.1f ms, paper %.1f ms", row.Protocol, rt.Handshake, rt.Data, row.FCTUserMs, row.FCTPaperMs)
		})
	}
}
