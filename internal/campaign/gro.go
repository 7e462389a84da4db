package campaign

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/slowstart/slowstart/internal/truthcheck"
)

// groWindowNs is how close in time two segments must arrive for the copy to merge
// them, as a receiver's GRO (generic receive offload) does within one interrupt.
const groWindowNs = 200_000

// groMaxBytes bounds a merged frame's payload, as GRO does (64 KiB).
const groMaxBytes = 65535 - 60

// mergeGRO writes to out a copy of the capture in (link type raw IPv4/IPv6, as the
// lab writes them) in which back-to-back TCP data segments of one direction are
// merged into one frame, as a capture taken above a receiver's GRO (or a sender's
// TSO) shows them: contiguous sequence numbers, the same acknowledgement, window
// and flags but PSH, arriving within 200 µs, up to 64 KiB, all of the first one's
// size but the last, which may be shorter and ends the frame (Linux's GRO merges
// segments of one size). The analysis must count such a frame as the segments it
// holds.
func mergeGRO(in, out string) error {
	var pending *groFrame
	return truthcheck.CopyEdited(in, out, func(_ int, data []byte, ci gopacket.CaptureInfo, write truthcheck.WriteFunc) error {
		g := parseGRO(data, ci)
		if g != nil && pending != nil && pending.merges(g) {
			pending.add(g)
			return nil
		}
		if pending != nil {
			if err := pending.write(write); err != nil {
				return err
			}
			pending = nil
		}
		switch {
		case data == nil: // the end of the capture
			return nil
		case g == nil:
			return write(ci, data)
		}
		pending = g
		return nil
	})
}

// groFrame is a TCP data segment (or several merged) waiting to be written.
type groFrame struct {
	ci      gopacket.CaptureInfo
	ip4     *layers.IPv4
	ip6     *layers.IPv6
	tcp     *layers.TCP
	payload []byte
	lastNs  int64
	// lastCI is the last merged segment's: GRO hands the frame up when it arrives.
	lastCI gopacket.CaptureInfo
	// size is the first segment's payload, which every merged one but the last
	// has; closed: a shorter one ended the frame.
	size   int
	closed bool
}

func parseGRO(data []byte, ci gopacket.CaptureInfo) *groFrame {
	if len(data) == 0 || ci.CaptureLength != ci.Length {
		return nil // a snaplen-cut frame cannot be merged
	}
	g := &groFrame{ci: ci, lastCI: ci, lastNs: ci.Timestamp.UnixNano()}
	var p gopacket.Packet
	switch data[0] >> 4 {
	case 4:
		p = gopacket.NewPacket(data, layers.LayerTypeIPv4, gopacket.DecodeOptions{NoCopy: false})
		g.ip4, _ = p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	case 6:
		p = gopacket.NewPacket(data, layers.LayerTypeIPv6, gopacket.DecodeOptions{NoCopy: false})
		g.ip6, _ = p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	default:
		return nil
	}
	tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok || len(tcp.Payload) == 0 || tcp.SYN || tcp.FIN || tcp.RST || (g.ip4 == nil && g.ip6 == nil) {
		return nil
	}
	if g.ip6 != nil && g.ip6.NextHeader != layers.IPProtocolTCP {
		return nil // extension headers: leave it as it is
	}
	g.tcp = tcp
	g.payload = append([]byte(nil), tcp.Payload...)
	g.size = len(g.payload)
	return g
}

// merges reports whether g continues f as GRO would merge it.
func (f *groFrame) merges(g *groFrame) bool {
	same := f.tcp.SrcPort == g.tcp.SrcPort && f.tcp.DstPort == g.tcp.DstPort &&
		f.tcp.Ack == g.tcp.Ack && f.tcp.Window == g.tcp.Window && f.tcp.URG == g.tcp.URG &&
		f.tcp.Seq+uint32(len(f.payload)) == g.tcp.Seq && len(f.payload)+len(g.payload) <= groMaxBytes &&
		g.lastNs-f.lastNs <= groWindowNs && !f.tcp.PSH && !f.closed && len(g.payload) <= f.size
	switch {
	case !same:
		return false
	case f.ip4 != nil && g.ip4 != nil:
		return f.ip4.SrcIP.Equal(g.ip4.SrcIP) && f.ip4.DstIP.Equal(g.ip4.DstIP)
	case f.ip6 != nil && g.ip6 != nil:
		return f.ip6.SrcIP.Equal(g.ip6.SrcIP) && f.ip6.DstIP.Equal(g.ip6.DstIP)
	}
	return false
}

func (f *groFrame) add(g *groFrame) {
	f.closed = len(g.payload) < f.size
	f.payload = append(f.payload, g.payload...)
	f.tcp.PSH = g.tcp.PSH
	f.lastNs, f.lastCI = g.lastNs, g.lastCI
	if len(g.tcp.Options) > 0 {
		f.tcp.Options = g.tcp.Options // the latest timestamps
	}
}

func (f *groFrame) write(write truthcheck.WriteFunc) error {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	var err error
	f.tcp.Padding = nil
	if f.ip4 != nil {
		if err = f.tcp.SetNetworkLayerForChecksum(f.ip4); err == nil {
			err = gopacket.SerializeLayers(buf, opts, f.ip4, f.tcp, gopacket.Payload(f.payload))
		}
	} else {
		if err = f.tcp.SetNetworkLayerForChecksum(f.ip6); err == nil {
			err = gopacket.SerializeLayers(buf, opts, f.ip6, f.tcp, gopacket.Payload(f.payload))
		}
	}
	if err != nil {
		return err
	}
	data := buf.Bytes()
	ci := f.lastCI
	ci.CaptureLength, ci.Length = len(data), len(data)
	return write(ci, data)
}
