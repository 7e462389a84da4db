package h3client

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quic"
	"github.com/slowstart/slowstart/quicanalysis"
)

// compareWithTshark reads a capture with tshark and the key log, and checks that
// package quic decrypted the same packets: every packet's direction, packet number
// space, number and length in order, the CRYPTO frames' offsets and lengths and the
// ACK frames' largest acknowledged packets.
func compareWithTshark(t *testing.T, pcap, keylogPath string, keys *keylog.Log) {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark is not installed (apt-get install tshark): no comparison")
		return
	}
	out, err := exec.Command(tshark, "-r", pcap, "-o", "tls.keylog_file:"+keylogPath, "-Y", "quic && !icmp", "-T", "fields",
		"-E", "separator=;", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "udp.srcport", "-e", "quic.header_form", "-e", "quic.long.packet_type", "-e", "quic.packet_number",
		"-e", "quic.packet_length", "-e", "quic.crypto.offset", "-e", "quic.crypto.length",
		"-e", "quic.ack.largest_acknowledged", "-e", "quic.decryption_failed").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	theirs := readTshark(t, string(out))

	src, err := quicanalysis.OpenFile(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	a := quicanalysis.New(quicanalysis.Options{Keys: keys})
	var d quicanalysis.Datagram
	for src.NextDatagram(&d) == nil {
		a.Add(d)
	}
	var ours packetSummary
	for _, p := range a.Packets() {
		dir := "s2c"
		if p.FromClient {
			dir = "c2s"
		}
		if !p.Decrypted {
			t.Errorf("our decoder did not decrypt %s %s packet (%s)", dir, p.Type, p.Problem)
		}
		ours.packets = append(ours.packets, fmt.Sprintf("%s %s %d %d", dir, p.Space, p.Number, p.Bytes))
		for _, f := range p.Frames {
			switch f.Type {
			case quic.FrameCrypto:
				ours.crypto = append(ours.crypto, fmt.Sprintf("%s %d+%d", dir, f.Offset, f.Length))
			case quic.FrameAck, quic.FrameAckECN:
				ours.acks = append(ours.acks, fmt.Sprintf("%s %d", dir, f.AckRanges[0].Largest))
			}
		}
	}
	if theirs.failed > 0 {
		t.Errorf("tshark could not decrypt %d packets", theirs.failed)
	}
	if n, m := len(ours.packets), len(theirs.packets); n != m {
		k := min(n, m)
		t.Errorf("%d packets decoded, tshark %d; past the common %d: ours %q, tshark %q", n, m, k, ours.packets[k:], theirs.packets[k:])
	}
	for i := range min(len(ours.packets), len(theirs.packets)) {
		if ours.packets[i] != theirs.packets[i] {
			t.Errorf("packet %d: ours %q, tshark %q", i, ours.packets[i], theirs.packets[i])
			break
		}
	}
	for _, c := range []struct {
		name        string
		ours, their []string
	}{{"CRYPTO frames", ours.crypto, theirs.crypto}, {"ACK frames", ours.acks, theirs.acks}} {
		slices.Sort(c.ours)
		slices.Sort(c.their)
		if !slices.Equal(c.ours, c.their) {
			t.Errorf("%s differ: ours %d, tshark %d (ours %.300v; tshark %.300v)", c.name, len(c.ours), len(c.their), c.ours, c.their)
		}
	}
	t.Logf("tshark agrees on %d packets, %d CRYPTO and %d ACK frames", len(theirs.packets), len(theirs.crypto), len(theirs.acks))
}

type packetSummary struct {
	packets, crypto, acks []string
	failed                int
}

// readTshark turns tshark's fields (one line per frame, a comma-separated list per
// field for coalesced packets) into per-packet summaries.
func readTshark(t *testing.T, out string) packetSummary {
	t.Helper()
	var s packetSummary
	split := func(f string) []string {
		if f == "" {
			return nil
		}
		return strings.Split(f, ",")
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, ";")
		if len(f) < 9 {
			t.Fatalf("tshark line %q", line)
		}
		dir := "c2s"
		if f[0] == "443" {
			dir = "s2c"
		}
		forms, types, numbers, lengths := split(f[1]), split(f[2]), split(f[3]), split(f[4])
		if len(numbers) != len(forms) || len(lengths) != len(forms) {
			t.Fatalf("tshark line %q: packets without numbers (not decrypted?)", line)
		}
		for i, form := range forms {
			space := "application"
			if form == "1" {
				switch types[0] {
				case "0":
					space = "initial"
				case "2":
					space = "handshake"
				}
				types = types[1:]
			}
			s.packets = append(s.packets, fmt.Sprintf("%s %s %s %s", dir, space, numbers[i], lengths[i]))
		}
		offsets, cryptoLengths := split(f[5]), split(f[6])
		for i := range offsets {
			s.crypto = append(s.crypto, fmt.Sprintf("%s %s+%s", dir, offsets[i], cryptoLengths[i]))
		}
		for _, l := range split(f[7]) {
			s.acks = append(s.acks, dir+" "+l)
		}
		if f[8] != "" {
			n, _ := strconv.Atoi(f[8])
			s.failed += max(n, 1)
		}
	}
	return s
}
