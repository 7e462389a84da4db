package capture

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapWriteBufferBytes is the buffer between a PcapWriter and its file.
const pcapWriteBufferBytes = 256 << 10

// PcapWriter writes packets that start at the IP header as a pcap file (link
// type RAW, nanosecond timestamps), the way tcpdump -w on a TUN device would; the
// format itself is gopacket's pcapgo. It buffers: call Flush before reading what
// it wrote. It is safe for use by several goroutines. It is the one pcap writer
// of the tool: the probe's, the live view's and the lab's captures all use it.
type PcapWriter struct {
	mu      sync.Mutex
	out     *bufio.Writer
	w       *pcapgo.Writer
	snaplen int
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
	out := bufio.NewWriterSize(w, pcapWriteBufferBytes)
	pw := &PcapWriter{out: out, w: pcapgo.NewWriterNanos(out), snaplen: snaplen}
	if err := pw.w.WriteFileHeader(uint32(snaplen), layers.LinkTypeRaw); err != nil {
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
	origLen = min(max(origLen, len(data)), math.MaxUint32)
	if len(data) > w.snaplen {
		data = data[:w.snaplen]
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, unixNs), CaptureLength: len(data), Length: origLen}
	if err := w.w.WritePacket(ci, data); err != nil {
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
