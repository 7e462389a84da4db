// Command repeat writes a capture N times as long as its input: the input, then
// N-1 copies of it later in time, each copy's TCP sequence and acknowledgement
// numbers moved by a constant of its own, so that each copy's connections are new
// ones (new initial sequence numbers on the same four-tuples, as a client reusing
// its ports would make) and not the old ones going on. For the analyze benchmark
// (memory at N times the length); it reads Ethernet or raw IPv4/IPv6 pcap files
// such as make-capture.sh's. It is a benchmarking aid, not part of the slowstart
// binary.
//
//	go run ./bench/repeat -n 4 /tmp/slowstart-bench.pcap /tmp/slowstart-bench-4x.pcap
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func main() {
	n := flag.Int("n", 4, "how many times as long")
	gap := flag.Duration("gap", time.Minute, "pause between copies")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-n N] [-gap D] IN.pcap OUT.pcap\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 || *n < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := repeat(flag.Arg(0), flag.Arg(1), *n, *gap); err != nil {
		fmt.Fprintln(os.Stderr, "repeat:", err)
		os.Exit(1)
	}
}

func repeat(in, out string, n int, gap time.Duration) error {
	first, last, link, snaplen, err := span(in)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(snaplen, link); err != nil {
		return err
	}
	shift := last.Sub(first) + gap
	for k := 0; k < n; k++ {
		if err := copyOnce(in, w, link, time.Duration(k)*shift, uint32(k)*0x3b9aca07); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func span(path string) (first, last time.Time, link layers.LinkType, snaplen uint32, err error) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	r, err := pcapgo.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return
	}
	link, snaplen = r.LinkType(), r.Snaplen()
	for {
		_, ci, e := r.ZeroCopyReadPacketData()
		if errors.Is(e, io.EOF) {
			return
		}
		if e != nil {
			err = e
			return
		}
		if first.IsZero() {
			first = ci.Timestamp
		}
		last = ci.Timestamp
	}
}

func copyOnce(path string, w *pcapgo.Writer, link layers.LinkType, shift time.Duration, delta uint32) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return err
	}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if delta != 0 {
			moveSequence(data, link, delta)
		}
		ci.Timestamp = ci.Timestamp.Add(shift)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Timestamp, CaptureLength: len(data), Length: ci.Length}, data); err != nil {
			return err
		}
	}
}

// moveSequence adds delta to a TCP segment's sequence number, to its
// acknowledgement number when the ACK flag is set, and to its SACK blocks (checksums are left as they
// are: the analysis does not check them).
func moveSequence(data []byte, link layers.LinkType, delta uint32) {
	off := 0
	if link == layers.LinkTypeEthernet {
		if len(data) < 14 {
			return
		}
		etherType := binary.BigEndian.Uint16(data[12:])
		off = 14
		for etherType == 0x8100 && len(data) >= off+4 {
			etherType = binary.BigEndian.Uint16(data[off+2:])
			off += 4
		}
		if etherType != 0x0800 && etherType != 0x86dd {
			return
		}
	}
	if len(data) < off+1 {
		return
	}
	switch data[off] >> 4 {
	case 4:
		if len(data) < off+20 || data[off+9] != 6 || binary.BigEndian.Uint16(data[off+6:])&0x3fff != 0 {
			return
		}
		off += int(data[off]&0x0f) * 4
	case 6:
		if len(data) < off+40 || data[off+6] != 6 {
			return
		}
		off += 40
	default:
		return
	}
	if len(data) < off+14 {
		return
	}
	binary.BigEndian.PutUint32(data[off+4:], binary.BigEndian.Uint32(data[off+4:])+delta)
	if data[off+13]&0x10 != 0 {
		binary.BigEndian.PutUint32(data[off+8:], binary.BigEndian.Uint32(data[off+8:])+delta)
	}
	// SACK blocks are sequence numbers too (those the capture kept).
	end := min(len(data), off+int(data[off+12]>>4)*4)
	for i := off + 20; i < end; {
		kind := data[i]
		if kind == 0 {
			return
		}
		if kind == 1 || i+1 >= end {
			i++
			continue
		}
		length := int(data[i+1])
		if length < 2 {
			return
		}
		if kind == 5 {
			for b := i + 2; b+4 <= min(i+length, end); b += 4 {
				binary.BigEndian.PutUint32(data[b:], binary.BigEndian.Uint32(data[b:])+delta)
			}
		}
		i += length
	}
}
