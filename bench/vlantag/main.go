// Command vlantag puts VLAN tags into the Ethernet frames of a pcap capture, chosen
// by the TCP connection's server port, for the analyze benchmark's IPv6-and-VLAN
// capture (bench/make-capture.sh --shape vlan6): the machine that makes it has no
// 802.1Q support in its kernel, so the traffic is real and the tags are added
// afterwards. Both directions of a connection get the same tags:
//
//	server port 8000, 8001  802.1Q VLAN 100
//	server port 8002        802.1Q VLAN 200
//	server port 8003        802.1ad (QinQ): outer VLAN 10, inner VLAN 300
//	any other               untagged
//
// The server port is the lower of the two ports (the clients' ports are 1024 and
// up, the servers' 8000-8004). It is a benchmarking aid, not part of the slowstart
// binary.
//
//	go run ./bench/vlantag IN.pcap OUT.pcap
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s IN.pcap OUT.pcap\n", os.Args[0])
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := tag(flag.Arg(0), flag.Arg(1)); err != nil {
		fmt.Fprintln(os.Stderr, "vlantag:", err)
		os.Exit(1)
	}
}

// tagOf is a tag of 4 bytes: its TPID and TCI.
type tagOf struct {
	tpid uint16
	id   uint16
}

// tagsFor returns the tags, outermost first, of a connection with this server port.
func tagsFor(serverPort uint16) []tagOf {
	switch serverPort {
	case 8000, 8001:
		return []tagOf{{0x8100, 100}}
	case 8002:
		return []tagOf{{0x8100, 200}}
	case 8003:
		return []tagOf{{0x88a8, 10}, {0x8100, 300}}
	}
	return nil
}

func tag(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return err
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		return fmt.Errorf("%s: link type %s, want Ethernet", in, r.LinkType())
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	defer o.Close()
	bw := bufio.NewWriterSize(o, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	// Room for 8 more bytes of tags within the snap length.
	if err := w.WriteFileHeader(r.Snaplen()+8, layers.LinkTypeEthernet); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<16)
	for {
		data, ci, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		tags := tagsFor(serverPort(data))
		buf = append(buf[:0], data[:min(12, len(data))]...)
		for _, t := range tags {
			buf = binary.BigEndian.AppendUint16(buf, t.tpid)
			buf = binary.BigEndian.AppendUint16(buf, t.id)
		}
		if len(data) > 12 {
			buf = append(buf, data[12:]...)
		}
		ci.CaptureLength = len(buf)
		ci.Length += 4 * len(tags)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Timestamp, CaptureLength: ci.CaptureLength, Length: ci.Length}, buf); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return o.Close()
}

// serverPort returns the lower TCP port of an untagged Ethernet frame with IPv4 or
// IPv6 (no extension headers), or 0.
func serverPort(data []byte) uint16 {
	if len(data) < 14 {
		return 0
	}
	off := 14
	switch binary.BigEndian.Uint16(data[12:]) {
	case 0x0800:
		if len(data) < off+20 || data[off+9] != 6 {
			return 0
		}
		off += int(data[off]&0x0f) * 4
	case 0x86dd:
		if len(data) < off+40 || data[off+6] != 6 {
			return 0
		}
		off += 40
	default:
		return 0
	}
	if len(data) < off+4 {
		return 0
	}
	return min(binary.BigEndian.Uint16(data[off:]), binary.BigEndian.Uint16(data[off+2:]))
}
