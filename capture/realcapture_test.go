package capture

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// realCapturesDir holds real captures (RAW link type, snaplen 200) of the lab's
// ground truth; its README says how they were made.
const realCapturesDir = "../testdata/captures"

// TestRealCaptures reads every shared capture and checks each packet against
// gopacket's full (allocating) decoder, and a couple of files' TCP counts
// against tcpdump when it is installed.
func TestRealCaptures(t *testing.T) {
	// The ground-truth pairs (rtt*); the tail-loss-probe ones are pcapng.
	paths, _ := filepath.Glob(filepath.Join(realCapturesDir, "rtt*.pcap"))
	if len(paths) == 0 {
		t.Skipf("no captures in %s (the shared captures directory next to the repository); nothing to compare against", realCapturesDir)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := decodeWithGopacket(t, file)
			got, stats, err := readAll(t, file)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d TCP packets, gopacket finds %d", len(got), len(want))
			}
			for i := range want {
				if d := diffPacket(got[i], want[i]); d != "" {
					t.Fatalf("packet %d:%s", i, d)
				}
			}
			if stats.Format != FormatPcap || stats.Snaplen != 200 || len(stats.LinkTypes) != 1 || stats.LinkTypes[0] != "Raw" ||
				stats.Truncated || stats.Undecodable != 0 || stats.Records != stats.TCP+stats.NonTCP {
				t.Errorf("stats %+v: want pcap, snaplen 200, Raw, whole, all records decoded", stats)
			}
			if len(got) > 0 && (stats.FirstNs > got[0].TimestampNs || stats.LastNs < got[len(got)-1].TimestampNs) {
				t.Errorf("time span [%d, %d] does not cover the packets", stats.FirstNs, stats.LastNs)
			}
		})
	}

	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Log("tcpdump is not installed: TCP counts not compared with it")
		return
	}
	for _, path := range []string{paths[0], paths[len(paths)-1]} {
		out, err := exec.Command(tcpdump, "-r", path, "-nn", "tcp").Output()
		if err != nil {
			t.Fatalf("tcpdump -r %s: %v", path, err)
		}
		wantTCP := strings.Count(string(out), "\n")
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var p Packet
		for err == nil {
			err = r.Next(&p)
		}
		r.Close()
		if !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if got := r.Stats().TCP; got != int64(wantTCP) {
			t.Errorf("%s: %d TCP packets, tcpdump counts %d", filepath.Base(path), got, wantTCP)
		} else {
			t.Logf("%s: %d TCP packets, as tcpdump", filepath.Base(path), got)
		}
	}
}

// decodeWithGopacket decodes a capture with gopacket's packet API, as an
// independent reference. It needs whole TCP headers (true of these files).
func decodeWithGopacket(t *testing.T, file []byte) []Packet {
	t.Helper()
	pr, err := pcapgo.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var out []Packet
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(data, pr.LinkType(), gopacket.Default)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil {
			continue
		}
		p := Packet{
			TimestampNs: ci.Timestamp.UnixNano(),
			SrcPort:     uint16(tcp.SrcPort), DstPort: uint16(tcp.DstPort),
			Seq: tcp.Seq, Ack: tcp.Ack, Window: tcp.Window,
			HeaderLen: int(tcp.DataOffset) * 4, Payload: tcp.Payload,
			Options:  optionsFromGopacket(tcp.Options),
			Protocol: ProtocolTCP,
		}
		for i, set := range []bool{tcp.FIN, tcp.SYN, tcp.RST, tcp.PSH, tcp.ACK, tcp.URG, tcp.ECE, tcp.CWR} {
			if set {
				p.Flags |= 1 << i
			}
		}
		switch ip := pkt.NetworkLayer().(type) {
		case *layers.IPv4:
			p.Src, p.Dst = addr(t, ip.SrcIP), addr(t, ip.DstIP)
			p.IPID = ip.Id
			p.PayloadLen = int(ip.Length) - int(ip.IHL)*4 - p.HeaderLen
		case *layers.IPv6:
			p.Src, p.Dst = addr(t, ip.SrcIP), addr(t, ip.DstIP)
			p.PayloadLen = int(ip.Length) - p.HeaderLen // no extension headers in these files
		default:
			t.Fatalf("TCP over %T", ip)
		}
		out = append(out, p)
	}
}

// optionsFromGopacket converts gopacket's decoded TCP options, ignoring known
// kinds with the wrong length.
func optionsFromGopacket(options []layers.TCPOption) TCPOptions {
	opts := TCPOptions{WindowScale: -1}
	for _, o := range options {
		d := o.OptionData
		switch {
		case o.OptionType == layers.TCPOptionKindMSS && len(d) == 2:
			opts.MSS = uint16(d[0])<<8 | uint16(d[1])
		case o.OptionType == layers.TCPOptionKindWindowScale && len(d) == 1:
			opts.WindowScale = int8(min(d[0], 14))
		case o.OptionType == layers.TCPOptionKindSACKPermitted && len(d) == 0:
			opts.SACKPermitted = true
		case o.OptionType == layers.TCPOptionKindTimestamps && len(d) == 8:
			opts.HasTimestamps = true
			opts.TSVal, opts.TSEcr = be32(d[0:4]), be32(d[4:8])
		case o.OptionType == layers.TCPOptionKindSACK && len(d)%8 == 0:
			for ; len(d) >= 8 && opts.NumSACK < 4; d = d[8:] {
				opts.SACK[opts.NumSACK] = SACKBlock{be32(d[0:4]), be32(d[4:8])}
				opts.NumSACK++
			}
		}
	}
	return opts
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addr(t *testing.T, ip []byte) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		t.Fatalf("bad IP address % x", ip)
	}
	return a
}
