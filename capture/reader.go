package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Errors the Reader returns, wrapped with context; test them with errors.Is.
var (
	// ErrNotCapture: the input does not start with a pcap or pcapng magic number.
	ErrNotCapture = errors.New("not a pcap or pcapng file")
	// ErrEmpty: the input has no bytes at all.
	ErrEmpty = errors.New("empty file (0 bytes)")
	// ErrDamaged: a record could not be read (an impossible length, a reference
	// to an interface that does not exist, a bad compressed stream).
	ErrDamaged = errors.New("damaged capture file")
)

// Capture file formats, as Stats.Format names them.
const (
	FormatPcap   = "pcap"
	FormatPcapng = "pcapng"
)

// Stats describes what a Reader has read so far.
type Stats struct {
	Format    string   // FormatPcap or FormatPcapng
	LinkTypes []string // link types seen, in order of first appearance (e.g. "Ethernet", "Raw")
	// Snaplen is the largest snapshot length the file declares (pcapng: over its
	// interfaces; 0 there means unlimited).
	Snaplen int

	Records     int64 // records read: TCP + UDP + NonTCP + Undecodable
	TCP         int64 // TCP segments returned as Packets
	UDP         int64 // UDP datagrams returned as Packets (only with WithUDP)
	NonTCP      int64 // records not returned: other protocols, fragments, skipped encapsulations and link types
	Fragments   int64 // IP fragments (counted in NonTCP as well)
	Undecodable int64 // records whose link, tunnel, IP or TCP header was cut or malformed
	// Skipped counts the records of NonTCP that were in a link type or an
	// encapsulation this package does not decode although it may carry TCP
	// (an unknown link type, IPsec ESP, encrypted 802.11, MACsec...), by its
	// name, in order of first appearance.
	Skipped []SkippedRecords
	// Tunnels is every encapsulation the returned packets came through.
	Tunnels Encapsulation
	// Truncated is set when the file ended inside a record (or a pcapng block):
	// the records before it were read, the partial one was dropped.
	Truncated bool

	// FirstNs and LastNs are the earliest and latest record timestamps, in
	// nanoseconds since the Unix epoch (0 when there were no records).
	FirstNs, LastNs int64
}

// SkippedRecords counts the records of one link type or encapsulation that
// were skipped because this package does not decode it.
type SkippedRecords struct {
	Name    string // e.g. "IPsec ESP", "encrypted 802.11", "link type 147"
	Records int64
}

// Option changes what a Reader returns.
type Option func(*Reader)

// WithUDP makes the Reader return UDP datagrams as well as TCP segments
// (Packet.Protocol tells them apart), through the same link types and
// encapsulations. Without it a Reader returns TCP only.
func WithUDP() Option { return func(r *Reader) { r.dec.udp = true } }

// recordSource is what pcapgo.Reader and pcapgo.NgReader have in common.
type recordSource interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Reader reads TCP segments from a pcap or pcapng stream. It is not safe for
// concurrent use.
type Reader struct {
	file    io.Closer // the file Open opened; nil for NewReader
	source  recordSource
	ng      *pcapgo.NgReader // non-nil for pcapng
	pcapLT  layers.LinkType  // the link type of a pcap file
	dec     *decoder
	stats   Stats
	seenLTs []layers.LinkType // link types named in stats.LinkTypes
	skipLTs []string          // for each of seenLTs, its name in Stats.Skipped ("" if decoded)
	seenIfs int               // pcapng interfaces already looked at
	err     error             // sticky: once set, Next returns it
}

// Open opens a capture file. Close it when done.
func Open(path string, opts ...Option) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("capture: opening the capture file: %w", err)
	}
	r, err := newReader(f, opts...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("capture: %s: %w", path, err)
	}
	r.file = f
	return r, nil
}

// pcap and pcapng magic numbers as the first four bytes of a file.
var (
	magicPcapMicroLE = []byte{0xd4, 0xc3, 0xb2, 0xa1}
	magicPcapMicroBE = []byte{0xa1, 0xb2, 0xc3, 0xd4}
	magicPcapNanoLE  = []byte{0x4d, 0x3c, 0xb2, 0xa1}
	magicPcapNanoBE  = []byte{0xa1, 0xb2, 0x3c, 0x4d}
	magicPcapng      = []byte{0x0a, 0x0d, 0x0d, 0x0a}
	magicGzip        = []byte{0x1f, 0x8b}
)

// readBufferBytes is the size of the buffer between the input and the decoder.
const readBufferBytes = 256 << 10

// NewReader reads a capture from in, which it does not close. It reads the file
// header at once and tells pcap from pcapng (gzip-compressed or not).
func NewReader(in io.Reader, opts ...Option) (*Reader, error) {
	r, err := newReader(in, opts...)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	return r, nil
}

// newReader is NewReader with errors that do not name the package.
func newReader(in io.Reader, opts ...Option) (*Reader, error) {
	br := bufio.NewReaderSize(in, readBufferBytes)
	head, err := br.Peek(4)
	if len(head) == 0 && err == io.EOF {
		return nil, fmt.Errorf("%w: nothing was written into it", ErrEmpty)
	}
	if len(head) >= 2 && bytes.Equal(head[:2], magicGzip) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: the gzip stream is unreadable: %w", ErrDamaged, err)
		}
		br = bufio.NewReaderSize(zr, readBufferBytes)
		head, err = br.Peek(4)
		if len(head) == 0 && err == io.EOF {
			return nil, fmt.Errorf("%w: the gzip stream holds nothing", ErrEmpty)
		}
	}
	if len(head) < 4 {
		return nil, fmt.Errorf("%w: only %d bytes; give a file written by tcpdump -w, dumpcap or Wireshark", ErrNotCapture, len(head))
	}

	r := &Reader{dec: newDecoder()}
	for _, opt := range opts {
		opt(r)
	}
	switch {
	case bytes.Equal(head, magicPcapMicroLE), bytes.Equal(head, magicPcapMicroBE),
		bytes.Equal(head, magicPcapNanoLE), bytes.Equal(head, magicPcapNanoBE):
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading the pcap file header: %w", headerError(err))
		}
		r.source = pr
		r.pcapLT = pr.LinkType()
		r.stats.Format = FormatPcap
		r.stats.Snaplen = int(pr.Snaplen())
		r.noteLinkType(r.pcapLT)
	case bytes.Equal(head, magicPcapng):
		nr, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("reading the pcapng section header: %w", headerError(err))
		}
		r.source = nr
		r.ng = nr
		r.stats.Format = FormatPcapng
	default:
		return nil, fmt.Errorf("%w (it starts with % x); give a file written by tcpdump -w, dumpcap or Wireshark", ErrNotCapture, head)
	}
	return r, nil
}

// headerError explains a failure to read a file header.
func headerError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the file ends inside its header (cut short, or still being written): %w", io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%w: %w", ErrDamaged, err)
}

// Close closes the file Open opened. For a Reader from NewReader it does
// nothing: the caller owns the io.Reader.
func (r *Reader) Close() error {
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	if err != nil {
		return fmt.Errorf("capture: closing the capture file: %w", err)
	}
	return nil
}

// Next fills p with the next TCP segment (or UDP datagram, with WithUDP) and
// returns nil, or returns io.EOF after the last one. Other records are skipped
// and counted (see Stats). Payload points into the Reader's buffer and is valid until the next
// call. After an error other than io.EOF the file is damaged; Next keeps
// returning that error.
func (r *Reader) Next(p *Packet) error {
	if r.err != nil {
		return r.err
	}
	for {
		data, ci, err := r.source.ZeroCopyReadPacketData()
		if err != nil {
			r.err = r.endOfRecords(err)
			return r.err
		}
		r.stats.Records++
		timestampNs := ci.Timestamp.UnixNano()
		if r.stats.Records == 1 || timestampNs < r.stats.FirstNs {
			r.stats.FirstNs = timestampNs
		}
		if r.stats.Records == 1 || timestampNs > r.stats.LastNs {
			r.stats.LastNs = timestampNs
		}
		linkType := r.pcapLT
		if r.ng != nil {
			r.noteInterfaces()
			if len(ci.AncillaryData) > 0 {
				linkType, _ = ci.AncillaryData[0].(layers.LinkType)
			}
			r.noteLinkType(linkType)
		}

		switch r.dec.decode(data, ci.Length, linkType, p) {
		case decodedTCP:
			r.stats.TCP++
			r.stats.Tunnels |= p.Tunnel
			p.TimestampNs = timestampNs
			p.Interface = ci.InterfaceIndex
			return nil
		case decodedUDP:
			r.stats.UDP++
			r.stats.Tunnels |= p.Tunnel
			p.TimestampNs = timestampNs
			p.Interface = ci.InterfaceIndex
			return nil
		case decodedFragment:
			r.stats.Fragments++
			r.stats.NonTCP++
		case decodedOther:
			r.stats.NonTCP++
		case decodedSkipped:
			r.stats.NonTCP++
			name := r.dec.skipped
			if i := slices.Index(r.seenLTs, linkType); i >= 0 && r.skipLTs[i] != "" {
				name = r.skipLTs[i]
			}
			r.countSkipped(name)
		default:
			r.stats.Undecodable++
		}
	}
}

// endOfRecords turns the error that ended the records into what Next returns.
func (r *Reader) endOfRecords(err error) error {
	if r.ng != nil {
		r.noteInterfaces()
	}
	switch {
	case err == io.EOF:
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		r.stats.Truncated = true
		return io.EOF
	default:
		return fmt.Errorf("capture: reading record %d: %w: %w (the %d records before it were read)",
			r.stats.Records+1, ErrDamaged, err, r.stats.Records)
	}
}

// noteInterfaces records the link types and snaplens of pcapng interfaces that
// appeared since the last call. A new section starts its interfaces afresh.
func (r *Reader) noteInterfaces() {
	n := r.ng.NInterfaces()
	if n == r.seenIfs {
		return
	}
	if n < r.seenIfs {
		r.seenIfs = 0
	}
	for i := r.seenIfs; i < n; i++ {
		iface, err := r.ng.Interface(i)
		if err != nil {
			continue
		}
		r.noteLinkType(iface.LinkType)
		r.stats.Snaplen = max(r.stats.Snaplen, int(min(iface.SnapLength, 1<<31-1)))
	}
	r.seenIfs = n
}

// noteLinkType adds a link type to Stats.LinkTypes the first time it is seen.
func (r *Reader) noteLinkType(linkType layers.LinkType) {
	if slices.Contains(r.seenLTs, linkType) {
		return
	}
	r.seenLTs = append(r.seenLTs, linkType)
	r.stats.LinkTypes = append(r.stats.LinkTypes, linkTypeName(linkType))
	skipName := ""
	if parser, known := r.dec.parserFor(linkType, nil); parser == nil && !known {
		skipName = unsupportedLinkTypeName(linkType)
	}
	r.skipLTs = append(r.skipLTs, skipName)
}

// countSkipped counts one skipped record under name.
func (r *Reader) countSkipped(name string) {
	for i := range r.stats.Skipped {
		if r.stats.Skipped[i].Name == name {
			r.stats.Skipped[i].Records++
			return
		}
	}
	r.stats.Skipped = append(r.stats.Skipped, SkippedRecords{Name: name, Records: 1})
}

// Stats returns what the Reader has read so far.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.LinkTypes = slices.Clone(r.stats.LinkTypes)
	s.Skipped = slices.Clone(r.stats.Skipped)
	return s
}

// linkTypeName names a link type the way the report shows it.
func linkTypeName(linkType layers.LinkType) string {
	switch linkType {
	case layers.LinkTypeEthernet:
		return "Ethernet"
	case layers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14:
		return "Raw"
	case layers.LinkTypeIPv4:
		return "IPv4"
	case layers.LinkTypeIPv6:
		return "IPv6"
	case layers.LinkTypeLinuxSLL:
		return "Linux SLL"
	case layers.LinkTypeLinuxSLL2:
		return "Linux SLL2"
	case layers.LinkTypeNull:
		return "Null"
	case layers.LinkTypeLoop:
		return "Loop"
	case layers.LinkTypePPP:
		return "PPP"
	case layers.LinkTypePPP_HDLC:
		return "PPP in HDLC framing"
	case linkTypePPPEther:
		return "PPPoE"
	case layers.LinkTypeC_HDLC:
		return "Cisco HDLC"
	case layers.LinkTypeFDDI:
		return "FDDI"
	case layers.LinkTypeIEEE802_11:
		return "802.11"
	case layers.LinkTypeIEEE80211Radio:
		return "802.11 radiotap"
	case linkTypeNFLOG:
		return "NFLOG"
	case layers.LinkTypePFLog:
		return "PFLOG"
	case linkTypeIPoIB:
		return "IP over InfiniBand"
	case linkTypePKTAP, linkTypeUser2:
		return "PKTAP"
	default:
		return "unsupported " + unsupportedLinkTypeName(linkType)
	}
}

// unsupportedLinkTypes names link types this package does not decode (from
// the LINKTYPE_ list of tcpdump.org), where gopacket has no name for them.
var unsupportedLinkTypes = map[layers.LinkType]string{
	3: "AX.25", 6: "Token Ring", 7: "ARCNET", 8: "SLIP", 107: "Frame Relay", 119: "802.11 Prism",
	123: "SunATM", 129: "ARCNET", 143: "DOCSIS", 163: "802.11 AVS", 178: "Juniper Ethernet",
	187: "Bluetooth HCI", 192: "802.11 PPI", 195: "IEEE 802.15.4", 201: "Bluetooth HCI",
	226: "Solaris IPNET", 227: "SocketCAN", 281: "Broadcom tag", 282: "Broadcom tag", 284: "DSA tag", 285: "EDSA tag",
}

// unsupportedLinkTypeName names a link type this package does not decode:
// "link type N", after its name when it has a well-known one.
func unsupportedLinkTypeName(linkType layers.LinkType) string {
	name := fmt.Sprintf("link type %d", uint16(linkType))
	if known, ok := unsupportedLinkTypes[linkType]; ok {
		return known + " (" + name + ")"
	}
	if known := linkType.String(); !strings.HasPrefix(known, "Unknown") && known != "" {
		return known + " (" + name + ")"
	}
	return name
}
