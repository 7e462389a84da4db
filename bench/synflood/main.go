// Command synflood writes a capture of a SYN flood for the analyze benchmark: N
// SYNs to one server from spread source addresses and ports, none answered, 10 µs
// apart, as raw IPv4 (link type Raw). It is a benchmarking aid, not part of the
// slowstart binary.
//
//	go run ./bench/synflood -n 1000000 /tmp/synflood.pcap
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func main() {
	n := flag.Int("n", 1_000_000, "how many SYNs")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-n N] OUT.pcap\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *n <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(flag.Arg(0), *n); err != nil {
		fmt.Fprintln(os.Stderr, "synflood:", err)
		os.Exit(1)
	}
}

func write(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		return err
	}
	server := net.IPv4(203, 0, 113, 7).To4()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	for i := 0; i < n; i++ {
		src := make(net.IP, 4)
		binary.BigEndian.PutUint32(src, 0x0a000000|uint32(i/50)) // 10.x.y.z, 50 ports each
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src, DstIP: server, Id: uint16(i)}
		tcp := &layers.TCP{SrcPort: layers.TCPPort(20000 + i%50), DstPort: 443, Seq: uint32(i) * 2654435761, SYN: true, Window: 64240,
			Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}}
		if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
			return err
		}
		if err := gopacket.SerializeLayers(buf, opts, ip, tcp); err != nil {
			return err
		}
		data := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: start.Add(time.Duration(i) * 10 * time.Microsecond), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}
