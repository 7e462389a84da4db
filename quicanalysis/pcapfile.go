package quicanalysis

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// FileSource reads the UDP datagrams of a pcap or pcapng file with gopacket. It is the
// plain adapter for files until package capture hands over UDP datagrams itself;
// IP fragments are not reassembled (QUIC datagrams are sent unfragmented).
type FileSource struct {
	f       *os.File
	next    func() ([]byte, gopacket.CaptureInfo, error)
	decoder gopacket.Decoder
	// Records and UDP count what was read.
	Records, UDP int64
}

// OpenFile opens a capture file.
func OpenFile(path string) (*FileSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	magic, err := br.Peek(4)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a capture file: %w", path, err)
	}
	s := &FileSource{f: f}
	if bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		r, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s.next, s.decoder = r.ReadPacketData, r.LinkType()
	} else {
		r, err := pcapgo.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s.next, s.decoder = r.ReadPacketData, r.LinkType()
	}
	return s, nil
}

// Close closes the file.
func (s *FileSource) Close() error { return s.f.Close() }

// NextDatagram returns the next UDP datagram; io.EOF at the end.
func (s *FileSource) NextDatagram(d *Datagram) error {
	for {
		data, ci, err := s.next()
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return io.EOF
			}
			return err
		}
		s.Records++
		pkt := gopacket.NewPacket(data, s.decoder, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		udp, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if !ok {
			continue
		}
		var src, dst netip.Addr
		switch ip := pkt.NetworkLayer().(type) {
		case *layers.IPv4:
			src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		case *layers.IPv6:
			src, _ = netip.AddrFromSlice(ip.SrcIP)
			dst, _ = netip.AddrFromSlice(ip.DstIP)
		default:
			continue
		}
		s.UDP++
		*d = Datagram{TimeNs: ci.Timestamp.UnixNano(), Src: netip.AddrPortFrom(src, uint16(udp.SrcPort)),
			Dst: netip.AddrPortFrom(dst, uint16(udp.DstPort)), Payload: udp.Payload}
		return nil
	}
}
