package h3client

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// WritePcap writes the datagrams the client's socket recorded as a pcap file (link type
// RAW: IPv4 or IPv6 headers first, nanosecond times), with IP and UDP headers made up
// from the datagrams' addresses: what the socket saw, not a packet capture (no
// retransmissions by the kernel, no other traffic; TTL, IP IDs and checksums are
// synthesized). Wireshark and slowstart analyze read it with the key log.
func (r *Result) WritePcap(w io.Writer) error {
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		return err
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	for i, d := range r.Datagrams {
		udp := &layers.UDP{SrcPort: layers.UDPPort(d.Src.Port()), DstPort: layers.UDPPort(d.Dst.Port())}
		var ip gopacket.SerializableLayer
		if d.Src.Addr().Is4() {
			v4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4DontFragment,
				SrcIP: net.IP(d.Src.Addr().AsSlice()), DstIP: net.IP(d.Dst.Addr().AsSlice())}
			udp.SetNetworkLayerForChecksum(v4)
			ip = v4
		} else {
			v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
				SrcIP: net.IP(d.Src.Addr().AsSlice()), DstIP: net.IP(d.Dst.Addr().AsSlice())}
			udp.SetNetworkLayerForChecksum(v6)
			ip = v6
		}
		if err := gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(d.Payload)); err != nil {
			return fmt.Errorf("datagram %d: %w", i, err)
		}
		data := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, d.TimeNs), CaptureLength: len(data), Length: len(data)}
		if err := pw.WritePacket(ci, data); err != nil {
			return err
		}
	}
	return nil
}
