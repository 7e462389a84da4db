package quicanalysis

import (
	"net/netip"

	"github.com/slowstart/slowstart/capture"
)

// FileSource reads the UDP datagrams of a capture file through package capture
// (every link type and tunnel it decodes); IP fragments are not reassembled (QUIC
// datagrams are sent unfragmented).
type FileSource struct {
	r *capture.Reader
	p capture.Packet
	// UDP counts the datagrams read.
	UDP int64
}

// OpenFile opens a capture file.
func OpenFile(path string) (*FileSource, error) {
	r, err := capture.Open(path, capture.WithUDP())
	if err != nil {
		return nil, err
	}
	return &FileSource{r: r}, nil
}

// Close closes the file.
func (s *FileSource) Close() error { return s.r.Close() }

// NextDatagram returns the next UDP datagram; io.EOF at the end. Its payload is
// valid until the next call.
func (s *FileSource) NextDatagram(d *Datagram) error {
	for {
		if err := s.r.Next(&s.p); err != nil {
			return err
		}
		if s.p.Protocol != capture.ProtocolUDP {
			continue
		}
		s.UDP++
		*d = Datagram{TimeNs: s.p.TimestampNs, Src: netip.AddrPortFrom(s.p.Src, s.p.SrcPort),
			Dst: netip.AddrPortFrom(s.p.Dst, s.p.DstPort), Payload: s.p.Payload}
		return nil
	}
}
