package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slowstart/slowstart/lab/link"
	"github.com/slowstart/slowstart/lab/netlab"
	"github.com/slowstart/slowstart/units"
)

// lossRun is one pass of datagrams through a lossy path.
type lossRun struct {
	Seed             uint64 `json:"seed"`
	Sent             int    `json:"sent"`
	Received         int    `json:"received"`
	EmulatorIn       int64  `json:"emulator_packets_in"`
	EmulatorLost     int64  `json:"emulator_packets_lost"`
	LostElsewhere    int    `json:"lost_outside_emulator"` // sent - received - emulator losses; should be 0
	LostSequenceHash string `json:"lost_sequence_hash"`    // FNV-1a of the lost datagram numbers
	lost             []uint32
}

// lossResult is what the loss subcommand prints.
type lossResult struct {
	LossRate        float64   `json:"configured_loss"`
	Packets         int       `json:"packets"`
	IntervalLow     int       `json:"binomial_99_low"`
	IntervalHigh    int       `json:"binomial_99_high"`
	Runs            []lossRun `json:"runs"` // seed, the same seed again, another seed
	SameSeedSame    bool      `json:"same_seed_same_drops"`
	OtherSeedDiffer bool      `json:"other_seed_different_drops"`
}

// runLoss sends numbered UDP datagrams from the server namespace to the client's
// through the emulator with random loss on that direction (as the lab puts it), three
// times: with a seed, with the same seed again, and with another seed. It counts what
// arrived and which numbers were lost.
func runLoss(ctx context.Context, args []string) (*lossResult, error) {
	fs := flag.NewFlagSet("loss", flag.ExitOnError)
	var path pathFlags
	path.register(fs, "2ms")
	lossFlag := fs.String("loss", "1%", "loss probability server→client")
	packets := fs.Int("packets", 100_000, "datagrams per run")
	seed := fs.Uint64("seed", 7, "seed of the first two runs (the third uses seed+1)")
	packetsPerSecond := fs.Int("pps", 40_000, "sending rate, paced so that nothing but the emulator drops")
	fs.Parse(args)
	if err := path.parse(); err != nil {
		return nil, err
	}
	lossRate, err := units.ParsePercent(*lossFlag)
	if err != nil {
		return nil, fmt.Errorf("-loss: %w", err)
	}
	res := &lossResult{LossRate: lossRate, Packets: *packets}
	res.IntervalLow, res.IntervalHigh = binomialInterval(*packets, lossRate, 0.99)
	for _, runSeed := range []uint64{*seed, *seed, *seed + 1} {
		clientToServer, serverToClient := path.configs()
		serverToClient.Seed = runSeed
		serverToClient.Loss = link.LossConfig{Model: link.LossBernoulli, Probability: lossRate}
		run, err := lossOnce(ctx, clientToServer, serverToClient, path.runOptions(), *packets, *packetsPerSecond)
		if err != nil {
			return nil, err
		}
		run.Seed = runSeed
		res.Runs = append(res.Runs, run)
	}
	res.SameSeedSame = slices.Equal(res.Runs[0].lost, res.Runs[1].lost)
	res.OtherSeedDiffer = !slices.Equal(res.Runs[0].lost, res.Runs[2].lost)
	return res, nil
}

const lossPort = 9000

func lossOnce(ctx context.Context, clientToServer, serverToClient link.Config, runOptions link.RunOptions, packets, packetsPerSecond int) (lossRun, error) {
	var run lossRun
	trial, err := startTrial(ctx, nil, clientToServer, serverToClient, runOptions, nil)
	if err != nil {
		return run, err
	}
	received, sendErr := sendDatagrams(ctx, trial.trial, packets, packetsPerSecond)
	stats, stopErr := trial.stop()
	if err := errors.Join(sendErr, stopErr); err != nil {
		return run, fmt.Errorf("loss: %w", err)
	}
	run.Sent = packets
	run.EmulatorIn, run.EmulatorLost = stats.BToA.PacketsIn, stats.BToA.PacketsDroppedLoss
	hash := fnv.New64a()
	var number [4]byte
	for i, ok := range received {
		if ok {
			run.Received++
			continue
		}
		run.lost = append(run.lost, uint32(i))
		binary.BigEndian.PutUint32(number[:], uint32(i))
		hash.Write(number[:])
	}
	run.LostElsewhere = run.Sent - run.Received - int(run.EmulatorLost)
	run.LostSequenceHash = fmt.Sprintf("%016x", hash.Sum64())
	return run, nil
}

// sendDatagrams sends packets numbered datagrams server→client at packetsPerSecond
// and returns which numbers arrived.
func sendDatagrams(ctx context.Context, trial *netlab.Trial, packets, packetsPerSecond int) ([]bool, error) {
	clientAddress := netip.AddrPortFrom(trial.ClientAddr, lossPort)
	receiver, err := trial.ListenPacket(netlab.Client, "udp4", clientAddress.String())
	if err != nil {
		return nil, err
	}
	defer receiver.Close()
	if err := forceReceiveBuffer(receiver.(*net.UDPConn), 32<<20); err != nil {
		return nil, err
	}
	sender, err := trial.DialContext(ctx, netlab.Server, "udp4", clientAddress.String())
	if err != nil {
		return nil, err
	}
	defer sender.Close()

	received := make([]bool, packets)
	receiveDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := receiver.ReadFrom(buf)
			if err != nil {
				var netErr net.Error
				if errors.As(err, &netErr) && netErr.Timeout() {
					err = nil // drained
				}
				receiveDone <- err
				return
			}
			if n >= 4 {
				if i := binary.BigEndian.Uint32(buf); int(i) < packets {
					received[i] = true
				}
			}
		}
	}()

	const burst = 20
	interval := time.Duration(float64(time.Second) * burst / float64(packetsPerSecond))
	payload := make([]byte, 32)
	next := time.Now()
	for i := 0; i < packets; i++ {
		if i%burst == 0 {
			if err := ctx.Err(); err != nil {
				receiver.Close()
				<-receiveDone
				return nil, err
			}
			time.Sleep(time.Until(next))
			next = next.Add(interval)
		}
		binary.BigEndian.PutUint32(payload, uint32(i))
		if _, err := sender.Write(payload); err != nil {
			receiver.Close()
			<-receiveDone
			return nil, fmt.Errorf("sending datagram %d: %w", i, err)
		}
	}
	// Everything still in flight arrives within the path's delay; then the reader times out.
	receiver.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if err := <-receiveDone; err != nil {
		return nil, fmt.Errorf("receiving datagrams: %w", err)
	}
	return received, nil
}

// forceReceiveBuffer sets SO_RCVBUFFORCE (root may exceed net.core.rmem_max), so that
// a slow reader never makes the kernel drop datagrams.
func forceReceiveBuffer(conn *net.UDPConn, bytes int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var setErr error
	if err := raw.Control(func(fd uintptr) {
		setErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, syscall.SO_RCVBUFFORCE, bytes)
	}); err != nil {
		return err
	}
	if setErr != nil {
		return fmt.Errorf("SO_RCVBUFFORCE: %w", setErr)
	}
	return nil
}

// binomialInterval returns the central interval [low, high] that holds the number of
// successes of Binomial(n, p) with probability at least level: low is the smallest k
// with P(X ≤ k) ≥ (1-level)/2 and high the smallest with P(X ≤ k) ≥ (1+level)/2.
func binomialInterval(n int, p, level float64) (low, high int) {
	lowTail, highTail := (1-level)/2, (1+level)/2
	logPMF := func(k int) float64 {
		lgN, _ := math.Lgamma(float64(n + 1))
		lgK, _ := math.Lgamma(float64(k + 1))
		lgNK, _ := math.Lgamma(float64(n - k + 1))
		return lgN - lgK - lgNK + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
	}
	cdf := 0.0
	low = -1
	for k := 0; k <= n; k++ {
		cdf += math.Exp(logPMF(k))
		if low < 0 && cdf >= lowTail {
			low = k
		}
		if cdf >= highTail {
			return low, k
		}
	}
	return low, n
}
