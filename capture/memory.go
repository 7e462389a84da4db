package capture

import (
	"io"
	"sync"

	"github.com/gopacket/gopacket/layers"
)

// memoryBlockBytes is the size of the blocks a Memory keeps packets in: a
// packet is copied into the current block, so that holding a transfer's
// packets takes a few allocations, not one a packet.
const memoryBlockBytes = 1 << 20

// Memory holds packets in memory as a program that sees them itself hands them
// over (the lab's link emulator, which reads and writes them on TUN devices),
// and reads them back decoded, as a Reader reads a capture file of those
// packets: the same Packets, in the order they were added. Packets start at the
// IP header (link type RAW, as on a TUN device).
//
// It stands where a capture file would be written only to be read back. Add may
// be called from several goroutines (each packet is copied); Next from one, once
// adding is over. The options are a Reader's (WithUDP).
type Memory struct {
	mu      sync.Mutex
	blocks  [][]byte // packets end to end; the last one is being filled
	records []memoryRecord
	next    int // the record Next reads next
	dec     *decoder
}

// memoryRecord is one packet: its bytes in a block, and when it was seen.
type memoryRecord struct {
	block, offset, length int
	timestampNs           int64
}

// NewMemory makes an empty Memory.
func NewMemory(opts ...Option) *Memory {
	r := &Reader{dec: newDecoder()}
	for _, o := range opts {
		o(r)
	}
	return &Memory{dec: r.dec}
}

// Add keeps a copy of one packet (from the IP header on) seen at unixNs.
func (m *Memory) Add(data []byte, unixNs int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := len(m.blocks) - 1
	if last < 0 || len(m.blocks[last])+len(data) > cap(m.blocks[last]) {
		m.blocks = append(m.blocks, make([]byte, 0, max(memoryBlockBytes, len(data))))
		last++
	}
	rec := memoryRecord{block: last, offset: len(m.blocks[last]), length: len(data), timestampNs: unixNs}
	m.blocks[last] = append(m.blocks[last], data...)
	m.records = append(m.records, rec)
}

// Next decodes the next TCP segment (or UDP datagram, with WithUDP) into p, as
// Reader.Next does, skipping what is neither; io.EOF after the last one.
// p.Payload points into the Memory, valid as long as it is.
func (m *Memory) Next(p *Packet) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.next < len(m.records) {
		rec := m.records[m.next]
		m.next++
		data := m.blocks[rec.block][rec.offset : rec.offset+rec.length]
		switch m.dec.decode(data, len(data), layers.LinkTypeRaw, p) {
		case decodedTCP, decodedUDP:
			p.TimestampNs, p.Interface, p.File = rec.timestampNs, 0, 0
			return nil
		}
	}
	return io.EOF
}
