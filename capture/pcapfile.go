package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"
)

// The pcap format: a 24-byte file header (magic number, version, snaplen,
// link type), then records, each a 16-byte header (seconds, microseconds or
// nanoseconds, captured length, original length) and the captured bytes.
const (
	pcapFileHeaderBytes   = 24
	pcapRecordHeaderBytes = 16
	// maxSnaplen is libpcap's MAXIMUM_SNAPLEN: a record up to this long is
	// read whatever snaplen the file declares (some writers exceed theirs),
	// longer ones only when the declared snaplen allows them, and never one
	// longer than MaxRecordBytes.
	maxSnaplen = 262144
	// plausibleWireBytes bounds the original length of a record header
	// accepted when looking for a place to read again after damage (TSO and
	// BIG TCP frames are a few hundred kilobytes at most).
	plausibleWireBytes = 1 << 20
	// plausibleGapSeconds bounds the time between the last record read and
	// the one where reading resumes after damage, and between the two
	// records that must follow each other there.
	plausibleGapSeconds = 24 * 60 * 60
)

// lengthOrder says whether a pcap file's record headers have the captured
// and original lengths swapped, as files of versions before 2.4 may have.
type lengthOrder uint8

const (
	lengthsInOrder       lengthOrder = iota
	lengthsSwapped                   // versions 2.0 to 2.2: always swapped
	lengthsSwappedIfLong             // version 2.3: swapped when the captured length is the larger
)

// pcapRecordHeader is a record header's fields, lengths in order.
type pcapRecordHeader struct {
	seconds, fraction, capturedBytes, wireBytes uint32
}

// pcapReader reads the records of a pcap file. Each record is read in place
// from the stream's buffer. Before it hands one over it looks at the header
// after it: when that is not a plausible header, the record's own length may
// be wrong, and a run of records starting inside it says so (the record is
// then skipped). A header that cannot be read (see readable) is a damaged
// place: the reader scans forward for two plausible headers in a row and
// reads on from there (see resync).
type pcapReader struct {
	s              *byteStream
	bigEndian      bool
	fractionPerSec uint32 // 1e6 (microsecond timestamps) or 1e9 (nanosecond)
	nsPerFraction  int64
	lengths        lengthOrder
	linkType       layers.LinkType
	snaplen        uint32
	maxCaptured    uint32 // the longest record readable: max(snaplen, maxSnaplen), at most MaxRecordBytes
	longest        uint32 // the longest record read so far
	pending        int    // bytes of the record handed out last, to consume before the next
	// view is the stream's buffered bytes from the first record handed out
	// through it: while the records that follow are whole in it, each with a
	// readable header after it, next hands them out from there (viewUsed:
	// the bytes handed out), with no call into the stream; the stream
	// consumes them at once when that ends.
	view     []byte
	viewUsed int
	// ahead is the header of the record at viewUsed, read and found
	// readable when the record before it was handed out (aheadSet): each
	// header is read once.
	ahead       pcapRecordHeader
	aheadSet    bool
	records     int64 // records handed out
	lastSeconds int64 // timestamp seconds of the last record handed out
	damage      *Damage
}

// newPcapReader reads the file header.
func newPcapReader(s *byteStream, damage *Damage) (*pcapReader, error) {
	head, err := s.peek(pcapFileHeaderBytes)
	if len(head) < pcapFileHeaderBytes {
		return nil, endOfInput(len(head), err)
	}
	r := &pcapReader{s: s, damage: damage, fractionPerSec: 1e6, nsPerFraction: 1000}
	switch magic := head[:4]; {
	case bytes.Equal(magic, magicPcapMicroLE):
	case bytes.Equal(magic, magicPcapMicroBE):
		r.bigEndian = true
	case bytes.Equal(magic, magicPcapNanoLE):
		r.fractionPerSec, r.nsPerFraction = 1e9, 1
	case bytes.Equal(magic, magicPcapNanoBE):
		r.bigEndian = true
		r.fractionPerSec, r.nsPerFraction = 1e9, 1
	default:
		return nil, fmt.Errorf("not a pcap magic number: % x", magic)
	}
	major, minor := r.u16(head[4:6]), r.u16(head[6:8])
	if major != 2 || minor > 4 {
		return nil, fmt.Errorf("unknown pcap version %d.%d (versions 2.0 to 2.4 are read)", major, minor)
	}
	// libpcap and Wireshark read the lengths of versions before 2.3 swapped,
	// and of 2.3 swapped when the captured length is the larger.
	switch {
	case minor < 3:
		r.lengths = lengthsSwapped
	case minor == 3:
		r.lengths = lengthsSwappedIfLong
	}
	r.snaplen = r.u32(head[16:20])
	r.maxCaptured = min(max(r.snaplen, maxSnaplen), MaxRecordBytes)
	// The link type is the low 16 bits; the high ones may say how long a
	// frame check sequence ends each frame.
	r.linkType = layers.LinkType(r.u32(head[20:24]) & 0xffff)
	if err := s.discard(pcapFileHeaderBytes); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *pcapReader) u16(b []byte) uint16 {
	if r.bigEndian {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *pcapReader) u32(b []byte) uint32 {
	if r.bigEndian {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

// header parses a record header.
func (r *pcapReader) header(b []byte) pcapRecordHeader {
	b = b[:pcapRecordHeaderBytes]
	var h pcapRecordHeader
	if r.bigEndian {
		h = pcapRecordHeader{seconds: binary.BigEndian.Uint32(b[0:4]), fraction: binary.BigEndian.Uint32(b[4:8]),
			capturedBytes: binary.BigEndian.Uint32(b[8:12]), wireBytes: binary.BigEndian.Uint32(b[12:16])}
	} else {
		h = pcapRecordHeader{seconds: binary.LittleEndian.Uint32(b[0:4]), fraction: binary.LittleEndian.Uint32(b[4:8]),
			capturedBytes: binary.LittleEndian.Uint32(b[8:12]), wireBytes: binary.LittleEndian.Uint32(b[12:16])}
	}
	if r.lengths != lengthsInOrder && (r.lengths == lengthsSwapped || h.capturedBytes > h.wireBytes) {
		h.capturedBytes, h.wireBytes = h.wireBytes, h.capturedBytes
	}
	return h
}

// readable reports whether a record header can be read at all: its captured
// length within the file's limit and not above the original length. (A
// header of zeros is readable: libpcap and Wireshark read it as an empty
// record.)
func (r *pcapReader) readable(h pcapRecordHeader) bool {
	return h.capturedBytes <= r.maxCaptured && h.capturedBytes <= h.wireBytes
}

// plausible reports whether a record header looks like one where reading may
// resume after damage: readable, its fraction of a second below a second, its
// original length not 0 and within plausibleWireBytes, its captured length
// within the snaplen (or the longest record read), and when prevSeconds is
// known, its time within plausibleGapSeconds of it.
func (r *pcapReader) plausible(h pcapRecordHeader, prevSeconds int64, known bool) bool {
	if !r.readable(h) || h.fraction >= r.fractionPerSec || h.wireBytes == 0 || h.wireBytes > plausibleWireBytes {
		return false
	}
	if r.snaplen != 0 && h.capturedBytes > max(r.snaplen, r.longest) {
		return false
	}
	return !known || abs64(int64(h.seconds)-prevSeconds) <= plausibleGapSeconds
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// next reads the next record.
func (r *pcapReader) next(rec *record) error {
	if r.view != nil {
		if r.nextInView(rec) {
			return nil
		}
		used := r.viewUsed
		r.view, r.viewUsed, r.aheadSet = nil, 0, false
		if err := r.s.discard(used); err != nil {
			return err
		}
	}
	if r.pending > 0 {
		if err := r.s.discard(r.pending); err != nil {
			return err
		}
		r.pending = 0
	}
	for {
		b, err := r.s.peek(pcapRecordHeaderBytes)
		if len(b) < pcapRecordHeaderBytes {
			return endOfInput(len(b), err)
		}
		h := r.header(b)
		if !r.readable(h) {
			r.damage.place(r.records+1, r.s.offset)
			if err := r.resync(1); err != nil {
				return err
			}
			continue
		}
		total := pcapRecordHeaderBytes + int(h.capturedBytes)
		var data []byte
		if total+pcapRecordHeaderBytes <= r.s.window() {
			b, err = r.s.peekAhead(total, pcapRecordHeaderBytes)
			cut := len(b) < total
			if cut && !errors.Is(err, io.EOF) {
				return err
			}
			if cut || len(b) == total+pcapRecordHeaderBytes && !r.readable(r.header(b[total:])) {
				// The input ends inside the record, or the next header cannot
				// be one: this record's length may be wrong, which records
				// starting inside it would show.
				if skip := r.runInside(total); skip > 0 {
					if err := r.s.skipDamage(r.damage, r.records+1, skip); err != nil {
						return err
					}
					continue
				}
				if cut { // the file was cut inside its last record
					return io.ErrUnexpectedEOF
				}
				b, _ = r.s.peek(total) // runInside may have moved the buffer
			}
			data = b[pcapRecordHeaderBytes:total]
			// The records that follow are read from the bytes at hand
			// (nextInView) until one is not whole there. From a pipe too:
			// those are bytes already read, so no record waits for more.
			r.view, _ = r.s.peek(r.s.br.Buffered())
			r.viewUsed, r.pending, r.aheadSet = total, 0, false
		} else {
			if err := r.s.discard(pcapRecordHeaderBytes); err != nil {
				return err
			}
			if data, err = r.s.readLarge(int(h.capturedBytes)); err != nil {
				return err
			}
		}
		r.records++
		r.lastSeconds = int64(h.seconds)
		r.longest = max(r.longest, h.capturedBytes)
		rec.data = data
		rec.timestampNs = int64(h.seconds)*1e9 + int64(h.fraction)*r.nsPerFraction
		rec.wireBytes = int(h.wireBytes)
		rec.linkType = r.linkType
		rec.iface = 0
		return nil
	}
}

// nextInView hands out the record after the last one from the view, when it
// and the header after it are whole there and both headers are readable;
// false leaves the record to next's general path (damage, the end of the
// input, a record longer than the bytes at hand).
func (r *pcapReader) nextInView(rec *record) bool {
	rest := r.view[r.viewUsed:]
	if len(rest) < 2*pcapRecordHeaderBytes {
		return false
	}
	h := r.ahead
	if !r.aheadSet {
		if h = r.header(rest); !r.readable(h) {
			return false
		}
	}
	total := pcapRecordHeaderBytes + int(h.capturedBytes)
	if total+pcapRecordHeaderBytes > len(rest) {
		return false
	}
	if r.ahead = r.header(rest[total:]); !r.readable(r.ahead) {
		r.aheadSet = false
		return false
	}
	r.aheadSet = true
	r.viewUsed += total
	r.records++
	r.lastSeconds = int64(h.seconds)
	r.longest = max(r.longest, h.capturedBytes)
	rec.data = rest[pcapRecordHeaderBytes:total]
	rec.timestampNs = int64(h.seconds)*1e9 + int64(h.fraction)*r.nsPerFraction
	rec.wireBytes = int(h.wireBytes)
	rec.linkType = r.linkType
	rec.iface = 0
	return true
}

// runInside looks for records that start inside the record at the stream's
// position, whose total size is recordBytes, and returns the offset of the
// first (0 when there are none): then the record's own length was wrong.
func (r *pcapReader) runInside(recordBytes int) int {
	buf, err := r.s.peek(r.s.window())
	eof := err != nil
	for at := 1; at < recordBytes && at < len(buf); at++ {
		if r.runAt(buf, at, eof) == runFound {
			return at
		}
	}
	return 0
}

// runResult says whether records can be read again at a place.
type runResult uint8

const (
	runNone    runResult = iota // not a place to read again
	runFound                    // two plausible record headers in a row, or one at the end of the input
	runUnknown                  // the second header lies beyond the bytes at hand
)

// runAt reports whether records can be read again at offset at of buf, the
// bytes at hand (all that remain of the input when eof): a plausible record
// header close in time to the last record read, followed by another one close
// in time to it (or by the end of the input). Before any record was read
// there is no time to be close to: then three plausible headers in a row are
// asked for. The run must fit in half the read buffer (records up to some
// 130 KB).
func (r *pcapReader) runAt(buf []byte, at int, eof bool) runResult {
	prevSeconds, known := r.lastSeconds, r.records > 0
	headers, headersAtEnd := 2, 1
	if !known {
		headers, headersAtEnd = 3, 2
	}
	start := at
	for i := range headers {
		if at+pcapRecordHeaderBytes-start > r.s.window()/2 {
			// Too long a run to check in the buffer with room to spare: a
			// place to read again must be decided by the next refill at the
			// latest, or a scan could refill for every byte.
			return runNone
		}
		if at+pcapRecordHeaderBytes > len(buf) {
			switch {
			case !eof:
				return runUnknown
			case i >= headersAtEnd:
				// The input ends in or right after the last of these records:
				// fewer headers in a row are all there is.
				return runFound
			}
			return runNone
		}
		h := r.header(buf[at:])
		if !r.plausible(h, prevSeconds, known) {
			return runNone
		}
		prevSeconds, known = int64(h.seconds), true
		at += pcapRecordHeaderBytes + int(h.capturedBytes)
	}
	return runFound
}

// pcapLengthField is a record header's original length, never 0 in a
// plausible one.
var pcapLengthField = lengthField{offset: 12, size: 4}

// resync skips a damaged place: it consumes bytes from the stream, from skip
// bytes after its position on, up to the next place where records can be read
// again (see runAt), or to the end of the input. It counts the bytes skipped
// and returns only read errors.
func (r *pcapReader) resync(skip int) error {
	return r.s.resync(skip, r.damage, pcapLengthField, r.runAt)
}
