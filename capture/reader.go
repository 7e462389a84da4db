package capture

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/klauspost/compress/gzip"

	"github.com/gopacket/gopacket/layers"
)

// Errors the Reader returns, wrapped with context; test them with errors.Is.
var (
	// ErrNotCapture: the input does not start with a pcap or pcapng magic number.
	ErrNotCapture = errors.New("not a pcap or pcapng file")
	// ErrEmpty: the input has no bytes at all.
	ErrEmpty = errors.New("empty file (0 bytes)")
	// ErrDamaged: a file header or record could not be read (an impossible
	// length, lengths that disagree, a reference to an interface that does not
	// exist, a bad compressed stream). Damaged records are skipped: Next
	// returns a *DamageError wrapping ErrDamaged after the last good record.
	ErrDamaged = errors.New("damaged capture file")
	// ErrTruncated: the input ends inside its file header (cut short, or
	// still being written). A file that ends inside a record is read up to it
	// instead (Stats.Truncated).
	ErrTruncated = errors.New("capture file cut short")
)

// Capture file formats, as Stats.Format names them.
const (
	FormatPcap   = "pcap"
	FormatPcapng = "pcapng"
)

// Stats describes what a Reader has read so far. For a Reader of several
// files (OpenFiles) the counts are sums, the time span and Snaplen cover all
// of them, and Files says what each one held.
type Stats struct {
	// Format is FormatPcap or FormatPcapng; for several files, the formats
	// they are in joined by "+" (e.g. "pcap+pcapng").
	Format    string
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
	// Damaged says where the file was damaged and what was skipped to read on
	// (Damaged.Places is 0 when nothing was).
	Damaged Damage

	// FirstNs and LastNs are the earliest and latest record timestamps, in
	// nanoseconds since the Unix epoch (0 when there were no records).
	FirstNs, LastNs int64

	// Files says what each file of a Reader of several files held, in the
	// order they were given (nil for a Reader of one).
	Files []FileStats
}

// FileStats is what a Reader read from one of its inputs.
type FileStats struct {
	Name  string // the path given to Open or OpenFiles ("" for NewReader)
	Stats        // what was read from this input alone (its Files is nil)
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

// record is one record as a file format's reader hands it over. Its data
// stays valid until the next record of the same input is read.
type record struct {
	data        []byte
	timestampNs int64
	wireBytes   int // the packet's length on the wire
	linkType    layers.LinkType
	iface       int // pcapng interface index (0 for pcap)
}

// recordReader reads the records of one file format (pcapReader,
// pcapngReader). next returns io.EOF after the last record,
// io.ErrUnexpectedEOF when the input ends inside a record, and another error
// when the input cannot be read further (a bad compressed stream). Damaged
// places it skips are counted in the Damage it was given.
type recordReader interface {
	next(rec *record) error
}

// Reader reads TCP segments from a pcap or pcapng stream, or from several
// capture files merged in time order (OpenFiles). It is not safe for
// concurrent use.
type Reader struct {
	inputs  []*input
	merging bool     // several inputs: records are handed out in time order
	heap    []*input // merging: the inputs with a record at hand, earliest on top
	top     *input   // merging: the input whose record was handed out last
	dec     *decoder
	err     error // sticky: once set, Next returns it
}

// input is one capture file of a Reader.
type input struct {
	name    string
	index   int        // its place among the Reader's inputs (Packet.File)
	file    io.Closer  // the file Open or OpenFiles opened; nil for NewReader
	ahead   *readAhead // a gzip stream decompressed ahead, or nil
	stream  *byteStream
	records recordReader
	rec     record // the record at hand
	stats   Stats
	seenLTs []layers.LinkType // link types named in stats.LinkTypes
	skipLTs []string          // for each of seenLTs, its name in Stats.Skipped ("" if decoded)
	lastLT  layers.LinkType   // the link type of the last record (noted)
	sawLT   bool              // lastLT is set
	done    bool              // its records are over
	err     error             // the read error that ended it, if any
}

// Open opens a capture file. Close it when done.
func Open(path string, opts ...Option) (*Reader, error) {
	return OpenFiles([]string{path}, opts...)
}

// OpenFiles opens capture files to read as one capture: Next hands out their
// records in time order, as mergecap merges them (each file's records in
// their order, the earliest of the files' next records first, the first
// file's on a tie). Each file may be pcap or pcapng, gzip-compressed or not,
// of any link type; Packet.File says which one a packet came from. One record
// per file is held at a time. Close it when done.
func OpenFiles(paths []string, opts ...Option) (*Reader, error) {
	if len(paths) == 0 {
		return nil, errors.New("capture: no capture file given")
	}
	r := newEmptyReader(opts)
	for _, path := range paths {
		f, err := os.Open(path)
		if err == nil {
			if info, statErr := f.Stat(); statErr == nil && info.IsDir() {
				f.Close()
				err = &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
			}
		}
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("capture: opening the capture file: %w (give a file written by tcpdump -w, dumpcap or Wireshark)", err)
		}
		in, err := r.addInput(path, f)
		if err != nil {
			f.Close()
			r.Close()
			return nil, fmt.Errorf("capture: %s: %w", path, err)
		}
		in.file = f
	}
	r.startMerge()
	return r, nil
}

// A gzip stream is decompressed up to gzipChunksAhead chunks of
// gzipChunkBytes ahead of the records being decoded (readAhead).
const (
	gzipChunkBytes  = 256 << 10
	gzipChunksAhead = 4
)

// pcap and pcapng magic numbers as the first four bytes of a file.
var (
	magicPcapMicroLE = []byte{0xd4, 0xc3, 0xb2, 0xa1}
	magicPcapMicroBE = []byte{0xa1, 0xb2, 0xc3, 0xd4}
	magicPcapNanoLE  = []byte{0x4d, 0x3c, 0xb2, 0xa1}
	magicPcapNanoBE  = []byte{0xa1, 0xb2, 0x3c, 0x4d}
	magicPcapng      = []byte{0x0a, 0x0d, 0x0d, 0x0a}
	magicGzip        = []byte{0x1f, 0x8b}
)

// readBufferBytes is the size of the buffer records are read from in place:
// libpcap's largest snaplen and a pcapng block's framing fit in it.
const readBufferBytes = 256<<10 + 4<<10

// MaxRecordBytes is the longest record (captured bytes of one packet) a Reader
// reads, whatever the file's snaplen declares: longer than any link carries
// (a TSO, GRO or BIG TCP frame is a few hundred kilobytes at most) and four
// times what libpcap, tcpdump and Wireshark write (262144). A record header or
// pcapng packet block that claims more is damage, skipped at once without
// reading its bytes (see Damaged files), so that a length field cannot make
// a Reader allocate or read more than this for one record.
const MaxRecordBytes = 1 << 20

// NewReader reads a capture from in, which it does not close. It reads the file
// header at once and tells pcap from pcapng (gzip-compressed or not). It only
// reads in (never seeks), so in may be a pipe or os.Stdin.
func NewReader(in io.Reader, opts ...Option) (*Reader, error) {
	r := newEmptyReader(opts)
	if _, err := r.addInput("", in); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	r.startMerge()
	return r, nil
}

// isPipe reports whether in is a pipe, a FIFO or a socket: a capture written
// as it is read.
func isPipe(in io.Reader) bool {
	f, ok := in.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0
}

func newEmptyReader(opts []Option) *Reader {
	r := &Reader{dec: newDecoder()}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// addInput reads the header of one more input; its errors do not name the
// package.
func (r *Reader) addInput(name string, in io.Reader) (_ *input, err error) {
	br := bufio.NewReaderSize(in, readBufferBytes)
	var ahead *readAhead // a gzip stream's decompression
	defer func() {
		if err != nil && ahead != nil {
			ahead.Close() // no input took it
		}
	}()
	head, err := br.Peek(4)
	if len(head) == 0 && err == io.EOF {
		return nil, fmt.Errorf("%w: nothing was written into it", ErrEmpty)
	}
	if len(head) >= 2 && bytes.Equal(head[:2], magicGzip) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: the gzip stream is unreadable: %w", ErrDamaged, err)
		}
		ahead = newReadAhead(zr, gzipChunkBytes, gzipChunksAhead)
		br = bufio.NewReaderSize(ahead, readBufferBytes)
		head, err = br.Peek(4)
		if len(head) == 0 && err == io.EOF {
			return nil, fmt.Errorf("%w: the gzip stream holds nothing", ErrEmpty)
		}
	}
	if len(head) < 4 {
		return nil, fmt.Errorf("%w: only %d bytes; give a file written by tcpdump -w, dumpcap or Wireshark", ErrNotCapture, len(head))
	}

	i := &input{name: name, index: len(r.inputs), stream: &byteStream{br: br, pipe: isPipe(in)}, ahead: ahead}
	switch {
	case bytes.Equal(head, magicPcapMicroLE), bytes.Equal(head, magicPcapMicroBE),
		bytes.Equal(head, magicPcapNanoLE), bytes.Equal(head, magicPcapNanoBE):
		pr, err := newPcapReader(i.stream, &i.stats.Damaged)
		if err != nil {
			return nil, fmt.Errorf("reading the pcap file header: %w", headerError(err))
		}
		i.records = pr
		i.stats.Format = FormatPcap
		i.stats.Snaplen = int(min(pr.snaplen, 1<<31-1))
		i.noteLinkType(pr.linkType, r.dec)
	case bytes.Equal(head, magicPcapng):
		nr, err := newPcapngReader(i.stream, &i.stats.Damaged, func(linkType layers.LinkType, snaplen uint32) {
			i.noteLinkType(linkType, r.dec)
			i.stats.Snaplen = max(i.stats.Snaplen, int(min(snaplen, 1<<31-1)))
		})
		if err != nil {
			return nil, fmt.Errorf("reading the pcapng section header: %w", headerError(err))
		}
		i.records = nr
		i.stats.Format = FormatPcapng
	default:
		return nil, fmt.Errorf("%w (it starts with % x); give a file written by tcpdump -w, dumpcap or Wireshark", ErrNotCapture, head)
	}
	r.inputs = append(r.inputs, i)
	return i, nil
}

// headerError explains a failure to read a file header.
func headerError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the file ends inside its header (%w, or still being written): %w", ErrTruncated, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%w: %w", ErrDamaged, err)
}

// Close closes the files Open or OpenFiles opened. For a Reader from
// NewReader it does nothing: the caller owns the io.Reader.
func (r *Reader) Close() error {
	var first error
	for _, in := range r.inputs {
		if in.ahead != nil {
			in.ahead.Close()
		}
		if in.file == nil {
			continue
		}
		if err := in.file.Close(); err != nil && first == nil {
			first = fmt.Errorf("capture: closing the capture file %s: %w", in.name, err)
		}
		in.file = nil
	}
	return first
}

// Next fills p with the next TCP segment (or UDP datagram, with WithUDP) and
// returns nil, or returns io.EOF after the last one. Other records are skipped
// and counted (see Stats). Payload points into the Reader's buffer and is
// valid until the next call.
//
// Damaged records are skipped where the format allows reading on (see
// Damage): then after the last packet Next returns a *DamageError (wrapping
// ErrDamaged) in place of io.EOF. A read error that ends an input (a bad
// gzip stream) ends it the same way, after the packets of the other inputs.
// Next keeps returning its last error.
func (r *Reader) Next(p *Packet) error {
	if r.err != nil {
		return r.err
	}
	for {
		in := r.nextRecord()
		if in == nil {
			r.err = r.endError()
			return r.err
		}
		rec := &in.rec
		st := &in.stats
		st.Records++
		if st.Records == 1 || rec.timestampNs < st.FirstNs {
			st.FirstNs = rec.timestampNs
		}
		if st.Records == 1 || rec.timestampNs > st.LastNs {
			st.LastNs = rec.timestampNs
		}
		if !in.sawLT || rec.linkType != in.lastLT {
			in.noteLinkType(rec.linkType, r.dec)
			in.lastLT, in.sawLT = rec.linkType, true
		}

		switch r.dec.decode(rec.data, rec.wireBytes, rec.linkType, p) {
		case decodedTCP:
			st.TCP++
			st.Tunnels |= p.Tunnel
			p.TimestampNs = rec.timestampNs
			p.Interface = rec.iface
			p.File = in.index
			return nil
		case decodedUDP:
			st.UDP++
			st.Tunnels |= p.Tunnel
			p.TimestampNs = rec.timestampNs
			p.Interface = rec.iface
			p.File = in.index
			return nil
		case decodedFragment:
			st.Fragments++
			st.NonTCP++
		case decodedOther:
			st.NonTCP++
		case decodedSkipped:
			st.NonTCP++
			name := r.dec.skipped
			if i := slices.Index(in.seenLTs, rec.linkType); i >= 0 && in.skipLTs[i] != "" {
				name = in.skipLTs[i]
			}
			in.countSkipped(name)
		default:
			st.Undecodable++
		}
	}
}

// nextRecord reads the next record, in time order over the inputs when
// merging, and returns its input (nil after the last record).
func (r *Reader) nextRecord() *input {
	if !r.merging {
		in := r.inputs[0]
		if in.done {
			return nil
		}
		if err := in.records.next(&in.rec); err != nil {
			in.end(err)
			return nil
		}
		return in
	}
	if r.top != nil { // the record handed out last is used: read that input's next
		if err := r.top.records.next(&r.top.rec); err != nil {
			r.top.end(err)
			r.popTop()
		} else {
			r.siftDown(0)
		}
		r.top = nil
	}
	if len(r.heap) == 0 {
		return nil
	}
	r.top = r.heap[0]
	return r.top
}

// startMerge readies a Reader of several inputs: each one's first record is
// read, and the inputs that have one are ordered by it.
func (r *Reader) startMerge() {
	if len(r.inputs) < 2 {
		return
	}
	r.merging = true
	for _, in := range r.inputs {
		if err := in.records.next(&in.rec); err != nil {
			in.end(err)
			continue
		}
		r.heap = append(r.heap, in)
	}
	for i := len(r.heap)/2 - 1; i >= 0; i-- {
		r.siftDown(i)
	}
}

// earlier orders the inputs' records at hand: by time, then by input.
func earlier(a, b *input) bool {
	return a.rec.timestampNs < b.rec.timestampNs || a.rec.timestampNs == b.rec.timestampNs && a.index < b.index
}

// siftDown moves the heap's element i down to its place.
func (r *Reader) siftDown(i int) {
	h := r.heap
	for {
		least := i
		if left := 2*i + 1; left < len(h) && earlier(h[left], h[least]) {
			least = left
		}
		if right := 2*i + 2; right < len(h) && earlier(h[right], h[least]) {
			least = right
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// popTop removes the heap's top.
func (r *Reader) popTop() {
	last := len(r.heap) - 1
	r.heap[0] = r.heap[last]
	r.heap[last] = nil
	r.heap = r.heap[:last]
	r.siftDown(0)
}

// end records why an input's records are over.
func (in *input) end(err error) {
	in.done = true
	switch {
	case err == io.EOF:
	case errors.Is(err, io.ErrUnexpectedEOF):
		in.stats.Truncated = true
	default:
		in.stats.Damaged.place(in.stats.Records+1, in.stream.offset)
		in.stats.Damaged.ToEnd = true
		in.err = err
	}
}

// endError is what Next returns after the last record: io.EOF, or what was
// damaged in each input.
func (r *Reader) endError() error {
	var errs []error
	for _, in := range r.inputs {
		if in.stats.Damaged.Places == 0 && in.err == nil {
			continue
		}
		d := in.stats.Damaged
		d.Input = in.name
		errs = append(errs, &DamageError{Damage: d, Cause: in.err})
	}
	switch len(errs) {
	case 0:
		return io.EOF
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// noteLinkType adds a link type to Stats.LinkTypes the first time it is seen.
func (in *input) noteLinkType(linkType layers.LinkType, dec *decoder) {
	if slices.Contains(in.seenLTs, linkType) {
		return
	}
	in.seenLTs = append(in.seenLTs, linkType)
	in.stats.LinkTypes = append(in.stats.LinkTypes, linkTypeName(linkType))
	skipName := ""
	if parser, known := dec.parserFor(linkType, nil); parser == nil && !known {
		skipName = unsupportedLinkTypeName(linkType)
	}
	in.skipLTs = append(in.skipLTs, skipName)
}

// countSkipped counts one skipped record under name.
func (in *input) countSkipped(name string) {
	in.stats.Skipped = addSkipped(in.stats.Skipped, SkippedRecords{Name: name, Records: 1})
}

// addSkipped adds counted records to the list, under their name.
func addSkipped(list []SkippedRecords, add SkippedRecords) []SkippedRecords {
	for i := range list {
		if list[i].Name == add.Name {
			list[i].Records += add.Records
			return list
		}
	}
	return append(list, add)
}

// snapshot is a copy of the input's Stats that shares nothing with it.
func (in *input) snapshot() Stats {
	s := in.stats
	s.LinkTypes = slices.Clone(in.stats.LinkTypes)
	s.Skipped = slices.Clone(in.stats.Skipped)
	if s.Damaged.Places > 0 {
		s.Damaged.Input = in.name
	}
	return s
}

// Stats returns what the Reader has read so far.
func (r *Reader) Stats() Stats {
	if len(r.inputs) == 1 {
		return r.inputs[0].snapshot()
	}
	var s Stats
	var formats []string
	for _, in := range r.inputs {
		f := in.snapshot()
		s.Files = append(s.Files, FileStats{Name: in.name, Stats: f})
		if !slices.Contains(formats, f.Format) {
			formats = append(formats, f.Format)
		}
		for _, name := range f.LinkTypes {
			if !slices.Contains(s.LinkTypes, name) {
				s.LinkTypes = append(s.LinkTypes, name)
			}
		}
		s.Snaplen = max(s.Snaplen, f.Snaplen)
		if f.Records > 0 {
			if s.Records == 0 || f.FirstNs < s.FirstNs {
				s.FirstNs = f.FirstNs
			}
			if s.Records == 0 || f.LastNs > s.LastNs {
				s.LastNs = f.LastNs
			}
		}
		s.Records += f.Records
		s.TCP += f.TCP
		s.UDP += f.UDP
		s.NonTCP += f.NonTCP
		s.Fragments += f.Fragments
		s.Undecodable += f.Undecodable
		for _, k := range f.Skipped {
			s.Skipped = addSkipped(s.Skipped, k)
		}
		s.Tunnels |= f.Tunnels
		s.Truncated = s.Truncated || f.Truncated
		s.Damaged.add(f.Damaged)
	}
	s.Format = strings.Join(formats, "+")
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
