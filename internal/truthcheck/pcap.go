package truthcheck

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Packet is one TCP packet of a capture of a single connection, as the editing
// helpers see it.
type Packet struct {
	Index      int  // 0-based, among all the capture's records
	FromServer bool // sent by the side that sent the SYN/ACK
	SYN, ACK   bool
	Seq, Ack   uint32
	Payload    int // bytes of TCP payload, from the IP header's lengths
	// DataIndex numbers the server's segments that carry new payload, 1 for the
	// first (0 for every other packet): the IW-th is the last of round 1 in a
	// transfer written at once and cut by the window.
	DataIndex int
}

// Packets lists the TCP packets of the one connection of a capture (pcap, link type
// RAW or Ethernet) on which the server sent data; the server is the side that sent the
// SYN/ACK. Other connections (a server's readiness check) are left out; a capture
// with data on several connections is an error.
func Packets(path string) ([]Packet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	type conn struct {
		packets     []Packet
		server      gopacket.Endpoint
		serverKnown bool
		nextSeq     uint32
		nextSet     bool
		data        int
	}
	conns := map[[2]layers.TCPPort]*conn{}
	var order []*conn
	for i := 0; ; i++ {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		pkt := gopacket.NewPacket(data, r.LinkType(), gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		net := pkt.NetworkLayer()
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if net == nil || tcp == nil {
			continue
		}
		key := [2]layers.TCPPort{min(tcp.SrcPort, tcp.DstPort), max(tcp.SrcPort, tcp.DstPort)}
		c := conns[key]
		if c == nil {
			c = &conn{}
			conns[key] = c
			order = append(order, c)
		}
		p := Packet{Index: i, SYN: tcp.SYN, ACK: tcp.ACK, Seq: tcp.Seq, Ack: tcp.Ack}
		// The payload's length from the IP header: a snaplen may have cut the bytes.
		switch ip := net.(type) {
		case *layers.IPv4:
			p.Payload = int(ip.Length) - int(ip.IHL)*4 - int(tcp.DataOffset)*4
		case *layers.IPv6:
			p.Payload = int(ip.Length) - int(tcp.DataOffset)*4
		}
		src := net.NetworkFlow().Src()
		if p.SYN && p.ACK && !c.serverKnown {
			c.server, c.serverKnown = src, true
		}
		p.FromServer = c.serverKnown && src == c.server
		if p.FromServer && p.Payload > 0 && (!c.nextSet || int32(p.Seq+uint32(p.Payload)-c.nextSeq) > 0) {
			c.nextSeq, c.nextSet = p.Seq+uint32(p.Payload), true
			c.data++
			p.DataIndex = c.data
		}
		c.packets = append(c.packets, p)
	}
	var found *conn
	for _, c := range order {
		if c.data == 0 {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%s: the server sent data on more than one connection", path)
		}
		found = c
	}
	if found == nil || !found.serverKnown {
		return nil, fmt.Errorf("%s: no connection with a SYN/ACK and server data", path)
	}
	return found.packets, nil
}

// Remove copies the capture at in to out without the records whose indexes are
// listed, keeping the file's link type, snaplen and timestamps.
func Remove(in, out string, indexes ...int) error {
	drop := map[int]bool{}
	for _, i := range indexes {
		drop[i] = true
	}
	return CopyEdited(in, out, func(i int, data []byte, ci gopacket.CaptureInfo, write WriteFunc) error {
		if data == nil || drop[i] {
			return nil
		}
		return write(ci, data)
	})
}

// WriteFunc writes one record to an edited copy of a capture.
type WriteFunc func(ci gopacket.CaptureInfo, data []byte) error

// CopyEdited writes to out a copy of the capture at in (pcap, the same link type
// and snaplen, nanosecond times) as edit makes it: edit is handed each record in
// order (its 0-based index among the records, its bytes and capture info) and
// writes with write what the copy holds in its place: nothing, the record, or
// something else (several records merged). After the last record edit is called
// once more with nil data, to write what it held back.
func CopyEdited(in, out string, edit func(i int, data []byte, ci gopacket.CaptureInfo, write WriteFunc) error) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	w := pcapgo.NewWriterNanos(o)
	if err := w.WriteFileHeader(r.Snaplen(), r.LinkType()); err != nil {
		o.Close()
		return err
	}
	for i := 0; ; i++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			if err := edit(i, nil, gopacket.CaptureInfo{}, w.WritePacket); err != nil {
				o.Close()
				return err
			}
			return o.Close()
		}
		if err != nil {
			o.Close()
			return fmt.Errorf("%s: record %d: %w", in, i, err)
		}
		if err := edit(i, data, ci, w.WritePacket); err != nil {
			o.Close()
			return err
		}
	}
}

// DataSegment returns the server's k-th new-data segment (1-based), or false.
func DataSegment(ps []Packet, k int) (Packet, bool) {
	for _, p := range ps {
		if p.DataIndex == k {
			return p, true
		}
	}
	return Packet{}, false
}

// FirstDataAck returns the client's first packet without payload that acknowledges
// server data (beyond the SYN/ACK), or false.
func FirstDataAck(ps []Packet) (Packet, bool) {
	var isn uint32
	for _, p := range ps {
		if p.FromServer && p.SYN {
			isn = p.Seq
		}
		if !p.FromServer && !p.SYN && p.Payload == 0 && p.ACK && int32(p.Ack-(isn+1)) > 0 {
			return p, true
		}
	}
	return Packet{}, false
}

// ClientSYNs counts the client's SYNs (without ACK).
func ClientSYNs(ps []Packet) int {
	n := 0
	for _, p := range ps {
		if p.SYN && !p.ACK {
			n++
		}
	}
	return n
}
