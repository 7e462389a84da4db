package capture

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"
)

// pcap file constants (the libpcap format, little-endian, nanosecond timestamps).
const (
	pcapMagicNanos        = 0xa1b23c4d
	pcapVersionMajor      = 2
	pcapVersionMinor      = 4
	pcapFileHeaderBytes   = 24
	pcapRecordHeaderBytes = 16
	pcapLinkTypeRaw       = 101 // LINKTYPE_RAW: the record starts at the IP header
	pcapWriteBufferBytes  = 256 << 10
)

// PcapWriter writes packets that start at the IP header as a pcap file (link
// type RAW, nanosecond timestamps), the way tcpdump -w on a TUN device would.
// It buffers: call Flush before reading what it wrote. It is safe for use by
// several goroutines.
type PcapWriter struct {
	mu      sync.Mutex
	out     *bufio.Writer
	snaplen int
	header  [pcapRecordHeaderBytes]byte
	err     error // sticky: the first write error
}

// NewPcapWriter writes the pcap file header to w and returns a writer for the
// records. snaplen is the largest number of bytes kept per packet (0 means
// DefaultSnaplen); longer packets are cut to it.
func NewPcapWriter(w io.Writer, snaplen int) (*PcapWriter, error) {
	if snaplen == 0 {
		snaplen = DefaultSnaplen
	}
	if snaplen < 0 || snaplen > math.MaxInt32 {
		return nil, fmt.Errorf("capture: pcap snap length %d out of range (1 to 2^31-1 bytes)", snaplen)
	}
	pw := &PcapWriter{out: bufio.NewWriterSize(w, pcapWriteBufferBytes), snaplen: snaplen}
	var header [pcapFileHeaderBytes]byte
	binary.LittleEndian.PutUint32(header[0:], pcapMagicNanos)
	binary.LittleEndian.PutUint16(header[4:], pcapVersionMajor)
	binary.LittleEndian.PutUint16(header[6:], pcapVersionMinor)
	// Bytes 8 to 15 (time zone offset and timestamp accuracy) stay 0.
	binary.LittleEndian.PutUint32(header[16:], uint32(snaplen))
	binary.LittleEndian.PutUint32(header[20:], pcapLinkTypeRaw)
	if _, err := pw.out.Write(header[:]); err != nil {
		return nil, fmt.Errorf("capture: writing the pcap file header: %w", err)
	}
	return pw, nil
}

// WritePacket writes one record: data from the IP header on, captured at
// unixNs (nanoseconds since the Unix epoch), origLen bytes long on the wire
// (less than len(data) counts as len(data)). Data longer than the snap length
// is cut to it. After a write error every call returns that error.
func (w *PcapWriter) WritePacket(data []byte, unixNs int64, origLen int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if unixNs < 0 {
		return fmt.Errorf("capture: pcap record time %d ns is before 1970", unixNs)
	}
	origLen = max(origLen, len(data))
	if len(data) > w.snaplen {
		data = data[:w.snaplen]
	}
	binary.LittleEndian.PutUint32(w.header[0:], uint32(unixNs/1e9))
	binary.LittleEndian.PutUint32(w.header[4:], uint32(unixNs%1e9))
	binary.LittleEndian.PutUint32(w.header[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(w.header[12:], uint32(min(uint64(origLen), math.MaxUint32)))
	if _, err := w.out.Write(w.header[:]); err != nil {
		w.err = fmt.Errorf("capture: writing a pcap record: %w", err)
		return w.err
	}
	if _, err := w.out.Write(data); err != nil {
		w.err = fmt.Errorf("capture: writing a pcap record: %w", err)
		return w.err
	}
	return nil
}

// Flush writes what is buffered to the underlying writer.
func (w *PcapWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if err := w.out.Flush(); err != nil {
		w.err = fmt.Errorf("capture: flushing the pcap file: %w", err)
		return w.err
	}
	return nil
}
