//go:build linux

package capture

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The packet ring (PACKET_RX_RING, TPACKET_V3), what libpcap reads through:
// the kernel copies each packet that passes the filter into a block of a ring
// it shares with the process, and hands a block over when it is full or when
// ringRetireMs passed since its first packet. Reading a packet is then a few
// loads from that memory: no system call and no copy per packet, which is
// what keeps whole packets of 1 Gbit/s from being dropped on a busy machine
// (bench/live.sh). The socket's own receive queue is not used.
//
// A ring hands a block over on a timer: after Stop, the block the kernel was
// filling comes within ringRetireMs, and Next waits for it (ringDrainWait at
// most) so that no packet captured before Stop is lost.

const (
	// ringBlockBytes is a block of the ring: room for the largest packet
	// (a 64 KB GRO or TSO frame whole) four times over. Small, so that the
	// ring has many: a block is handed over after ringRetireMs however full,
	// so a ring of N blocks holds at least N×ringRetireMs of traffic (1 s for
	// 64 MB; 256 ms with blocks of 1 MB, less than a stall the live view had
	// at 1 Gbit/s).
	ringBlockBytes = 1 << 18
	// ringMinBlocks bounds the ring from below whatever BufferBytes says.
	ringMinBlocks = 4
	// ringRetireMs is how long the kernel fills a block before handing it
	// over however full it is: the most a packet waits at a low rate.
	ringRetireMs = 4
	// ringDrainWait bounds the wait for the last block after Stop: its timer
	// runs on the kernel's clock ticks (4 ms at 250 Hz) after ringRetireMs.
	ringDrainWait = 200 * time.Millisecond
	// ringFrameBytes is the frame size a TPACKET_V3 ring asks for (blocks
	// hold packets of any size; the kernel only checks it divides a block).
	ringFrameBytes = 2048
	// ringPacketHeaderBytes is where a packet's link-layer address follows
	// its tpacket3_hdr: TPACKET_ALIGN(sizeof(struct tpacket3_hdr)).
	ringPacketHeaderBytes = (unix.SizeofTpacket3Hdr + unix.TPACKET_ALIGNMENT - 1) &^ (unix.TPACKET_ALIGNMENT - 1)
)

// ring is a TPACKET_V3 receive ring mapped into the process. Only the
// goroutine that calls Live.Next reads it, and unmaps it (unmap) once the
// capture is closed; a ring whose Live is dropped without that is unmapped
// when the Live is collected. (The mapping holds the socket open: closing the
// file leaves the ring's memory in place.)
type ring struct {
	mapping    *ringMapping
	mem        []byte
	blockBytes int
	blocks     int
	// block is the block being read, or to be read next; held: it is the
	// process's (TP_STATUS_USER) and its packets are being handed out,
	// next (the offset of the next packet) and left (how many remain).
	block int
	held  bool
	next  int
	left  int
}

// setupRing asks the kernel for a TPACKET_V3 ring of about bufferBytes on the
// socket (before bind) and maps it. An error leaves the socket as it was.
func setupRing(fd, bufferBytes int) (*ring, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fmt.Errorf("choosing TPACKET_V3: %w", err)
	}
	blocks := max(bufferBytes/ringBlockBytes, ringMinBlocks)
	req := unix.TpacketReq3{
		Block_size:     ringBlockBytes,
		Block_nr:       uint32(blocks),
		Frame_size:     ringFrameBytes,
		Frame_nr:       uint32(blocks * (ringBlockBytes / ringFrameBytes)),
		Retire_blk_tov: ringRetireMs,
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("asking for a ring of %d MB: %w", blocks*ringBlockBytes>>20, err)
	}
	mem, err := unix.Mmap(fd, 0, blocks*ringBlockBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		var none unix.TpacketReq3
		_ = unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &none)
		return nil, fmt.Errorf("mapping the ring: %w", err)
	}
	return &ring{mapping: &ringMapping{mem: mem}, mem: mem, blockBytes: ringBlockBytes, blocks: blocks}, nil
}

// ringMapping is a ring's memory, unmapped once.
type ringMapping struct {
	once sync.Once
	mem  []byte
}

func (m *ringMapping) unmap() { m.once.Do(func() { _ = unix.Munmap(m.mem) }) }

// blockHeader is the header of block i (struct tpacket_hdr_v1 inside a
// tpacket_block_desc).
func (r *ring) blockHeader(i int) *unix.TpacketHdrV1 {
	desc := (*unix.TpacketBlockDesc)(unsafe.Pointer(&r.mem[i*r.blockBytes]))
	return (*unix.TpacketHdrV1)(unsafe.Pointer(&desc.Hdr[0]))
}

// ready reports whether the block to read next is the process's.
func (r *ring) ready() bool {
	return atomic.LoadUint32(&r.blockHeader(r.block).Block_status)&unix.TP_STATUS_USER != 0
}

// pending reports whether the block the kernel is filling holds packets (it
// will be handed over when its timer fires).
func (r *ring) pending() bool {
	return atomic.LoadUint32(&r.blockHeader(r.block).Num_pkts) > 0
}

// take makes the ready block the one being read.
func (r *ring) take() {
	h := r.blockHeader(r.block)
	r.held = true
	r.next = int(h.Offset_to_first_pkt)
	r.left = int(atomic.LoadUint32(&h.Num_pkts))
}

// release gives the block being read back to the kernel and moves to the
// next one.
func (r *ring) release() {
	atomic.StoreUint32(&r.blockHeader(r.block).Block_status, unix.TP_STATUS_KERNEL)
	r.held = false
	r.block = (r.block + 1) % r.blocks
}

// packet returns the next packet of the block being read: its captured bytes
// (from the network header on: the socket is SOCK_DGRAM), original length,
// kernel timestamp and packet type (unix.PACKET_OUTGOING...).
func (r *ring) packet() (data []byte, wireBytes int, timestampNs int64, pktType uint8) {
	base := r.block*r.blockBytes + r.next
	h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&r.mem[base]))
	start := base + int(h.Mac)
	data = r.mem[start : start+int(h.Snaplen) : start+int(h.Snaplen)]
	ll := (*unix.RawSockaddrLinklayer)(unsafe.Pointer(&r.mem[base+ringPacketHeaderBytes]))
	r.next += int(h.Next_offset)
	r.left--
	return data, int(h.Len), int64(h.Sec)*1e9 + int64(h.Nsec), ll.Pkttype
}
