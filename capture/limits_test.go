package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// zeros is an endless stream of zero bytes, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// allocatedWhile returns the bytes allocated on the heap while f ran.
func allocatedWhile(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// readStream reads every packet of in and returns how many, the Stats and the
// error that ended them (nil for io.EOF).
func readStream(t *testing.T, in io.Reader) (int, Stats, error) {
	t.Helper()
	r, err := NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	n := 0
	for {
		err := r.Next(&p)
		if err == io.EOF {
			return n, r.Stats(), nil
		}
		if err != nil {
			return n, r.Stats(), err
		}
		n++
	}
}

// TestRecordLongerThanAnyLink: a pcap header may declare any snaplen, and a
// record header any length; a record longer than MaxRecordBytes is damage,
// skipped without reading its bytes into memory, and the records after it are
// read. (Before the limit, a 24-byte header declaring a 4 GiB snaplen and a
// record of 2 GiB made the reader buffer the rest of the input, growing its
// buffer a megabyte at a time with a copy each step.)
func TestRecordLongerThanAnyLink(t *testing.T) {
	good := testRecord{data: buildIP(t, synSegment(client4, server4)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}
	goodFile := writePcapByHand(t, binary.LittleEndian, false, 1<<32-1, []testRecord{good, good, good, good})
	header, records := goodFile[:pcapFileHeaderBytes], goodFile[pcapFileHeaderBytes:]
	for _, tc := range []struct {
		name     string
		captured uint32
	}{
		{"2 GiB", 1<<31 - 1},
		{"one byte more than the limit", MaxRecordBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := binary.LittleEndian.AppendUint32(nil, uint32(recordTime(0)/1e9))
			claim = binary.LittleEndian.AppendUint32(claim, 0)
			claim = binary.LittleEndian.AppendUint32(claim, tc.captured)
			claim = binary.LittleEndian.AppendUint32(claim, tc.captured)
			const zeroBytes = 64 << 20 // what a sparse file holds after the claim
			in := io.MultiReader(bytes.NewReader(header), bytes.NewReader(claim),
				io.LimitReader(zeros{}, zeroBytes), bytes.NewReader(records))
			var n int
			var stats Stats
			var err error
			allocated := allocatedWhile(func() { n, stats, err = readStream(t, in) })
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("error %v; want ErrDamaged", err)
			}
			if n != 4 || stats.Damaged.Record != 1 || stats.Damaged.Bytes != pcapRecordHeaderBytes+zeroBytes {
				t.Errorf("%d packets, damage %+v; want the 4 records after the claim read, and the claim's header and the zeros skipped", n, stats.Damaged)
			}
			if allocated > 8<<20 {
				t.Errorf("reading allocated %d MiB; a record's claimed length must not make the reader buffer it", allocated>>20)
			}
		})
	}
	t.Run("at the limit is read", func(t *testing.T) {
		big := good
		big.data = append(bytes.Clone(good.data), make([]byte, MaxRecordBytes-len(good.data))...)
		_, stats, err := readAll(t, writePcapByHand(t, binary.LittleEndian, false, MaxRecordBytes, []testRecord{big, good}))
		if err != nil || stats.Records != 2 || stats.Damaged.Places != 0 {
			t.Errorf("stats %+v, error %v; want 2 records and no damage", stats, err)
		}
	})
}

// TestHeaderThenZeros: a pcap header, a record claiming 2 GiB and then zeros
// (the header followed by /dev/zero on standard input) are read in bounded
// memory, skipping the zeros as damage.
func TestHeaderThenZeros(t *testing.T) {
	good := testRecord{data: buildIP(t, synSegment(client4, server4)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}
	file := writePcapByHand(t, binary.LittleEndian, false, 1<<32-1, []testRecord{good})
	file = setLE32(file, pcapFileHeaderBytes+8, 1<<31-1)
	file = setLE32(file, pcapFileHeaderBytes+12, 1<<31-1)
	const zeroBytes = 256 << 20
	var stats Stats
	var err error
	allocated := allocatedWhile(func() {
		_, stats, err = readStream(t, io.MultiReader(bytes.NewReader(file[:pcapFileHeaderBytes+pcapRecordHeaderBytes]), io.LimitReader(zeros{}, zeroBytes)))
	})
	if !errors.Is(err, ErrDamaged) || !stats.Damaged.ToEnd || stats.Damaged.Bytes != pcapRecordHeaderBytes+zeroBytes {
		t.Errorf("error %v, damage %+v; want every byte after the file header skipped as damage", err, stats.Damaged)
	}
	if allocated > 8<<20 {
		t.Errorf("reading allocated %d MiB", allocated>>20)
	}
}

// TestPcapngPacketLongerThanAnyLink: an enhanced packet block may be up to
// ngMaxBlockBytes long, but its packet no longer than MaxRecordBytes; a longer
// one is damage, and the blocks after it are read.
func TestPcapngPacketLongerThanAnyLink(t *testing.T) {
	good := testRecord{data: buildIP(t, synSegment(client4, server4)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}
	file := writePcapng(t, 0, []testRecord{good, good})
	blocks := pcapngBlocks(t, file)
	last := blocks[len(blocks)-1]
	captured := MaxRecordBytes + 4
	epb := binary.LittleEndian.AppendUint32(nil, ngBlockEnhancedPacket)
	epb = binary.LittleEndian.AppendUint32(epb, uint32(32+captured))
	epb = binary.LittleEndian.AppendUint32(epb, 0) // interface 0
	epb = binary.LittleEndian.AppendUint64(epb, 0) // timestamp
	epb = binary.LittleEndian.AppendUint32(epb, uint32(captured))
	epb = binary.LittleEndian.AppendUint32(epb, uint32(captured))
	epb = append(epb, make([]byte, captured)...)
	epb = binary.LittleEndian.AppendUint32(epb, uint32(32+captured))
	damaged := append(append(bytes.Clone(file[:last.start]), epb...), file[last.start:]...)
	packets, stats, err := readAll(t, damaged)
	if !errors.Is(err, ErrDamaged) || len(packets) != 2 || stats.Damaged.Places != 1 {
		t.Errorf("%d packets, damage %+v, error %v; want the 2 packets around a damaged block", len(packets), stats.Damaged, err)
	}
}

// TestLongBlockCopiesLittle: a block longer than the read buffer (a custom
// block of 16 MiB, the most pcapng allows) is read into a buffer that grows
// by doubling: a few times its size allocated, not the square of it in
// megabytes (1+2+...+16 MiB when it grew a megabyte at a time).
func TestLongBlockCopiesLittle(t *testing.T) {
	good := testRecord{data: buildIP(t, synSegment(client4, server4)), linkType: layers.LinkTypeRaw, timestampNs: recordTime(0)}
	file := writePcapng(t, 0, []testRecord{good})
	const length = ngMaxBlockBytes
	custom := binary.LittleEndian.AppendUint32(nil, ngBlockCustom)
	custom = binary.LittleEndian.AppendUint32(custom, length)
	custom = binary.LittleEndian.AppendUint32(custom, 32473) // a private enterprise number
	custom = append(custom, make([]byte, length-16)...)
	custom = binary.LittleEndian.AppendUint32(custom, length)
	in := append(bytes.Clone(file), custom...)
	var packets []Packet
	var err error
	allocated := allocatedWhile(func() { packets, _, err = readAll(t, in) })
	if err != nil || len(packets) != 1 {
		t.Fatalf("%d packets, error %v; want 1 and no error", len(packets), err)
	}
	if allocated > 3*length {
		t.Errorf("reading a %d MiB block allocated %d MiB", length>>20, allocated>>20)
	}
}
