package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pcapRecordStarts returns where each record of a little-endian pcap file
// starts, and len(file) last.
func pcapRecordStarts(t testing.TB, file []byte) []int {
	t.Helper()
	if !bytes.HasPrefix(file, magicPcapMicroLE) && !bytes.HasPrefix(file, magicPcapNanoLE) {
		t.Fatalf("not a little-endian pcap file: % x", file[:4])
	}
	var starts []int
	at := pcapFileHeaderBytes
	for at+pcapRecordHeaderBytes <= len(file) {
		starts = append(starts, at)
		at += pcapRecordHeaderBytes + int(binary.LittleEndian.Uint32(file[at+8:]))
	}
	if at != len(file) {
		t.Fatalf("the records end at byte %d of %d", at, len(file))
	}
	return append(starts, len(file))
}

// pcapngBlock is one block of a little-endian pcapng file.
type pcapngBlock struct {
	start, length int
	blockType     uint32
}

func pcapngBlocks(t testing.TB, file []byte) []pcapngBlock {
	t.Helper()
	var blocks []pcapngBlock
	for at := 0; at < len(file); {
		b := pcapngBlock{start: at, blockType: binary.LittleEndian.Uint32(file[at:]), length: int(binary.LittleEndian.Uint32(file[at+4:]))}
		blocks = append(blocks, b)
		at += b.length
	}
	return blocks
}

// without returns file without the byte ranges [cuts[i][0], cuts[i][1]).
func without(file []byte, cuts ...[2]int) []byte {
	var out []byte
	at := 0
	for _, cut := range cuts {
		out = append(out, file[at:cut[0]]...)
		at = cut[1]
	}
	return append(out, file[at:]...)
}

// setLE32 returns a copy of file with a 32-bit little-endian value at offset.
func setLE32(file []byte, offset int, v uint32) []byte {
	out := bytes.Clone(file)
	binary.LittleEndian.PutUint32(out[offset:], v)
	return out
}

// damageCase is a capture damaged on purpose and what reading it must give:
// the packets of the undamaged file less the damaged records (intact), read
// from a well-formed file, and the damage.
type damageCase struct {
	name    string
	damaged []byte
	intact  []byte
	want    Damage
}

// checkDamage reads a damaged capture and compares its packets, records and
// damage with the intact file's.
func checkDamage(t *testing.T, tc damageCase) {
	t.Helper()
	want, wantStats, err := readAll(t, tc.intact)
	if err != nil {
		t.Fatalf("the intact file: %v", err)
	}
	got, stats, err := readAll(t, tc.damaged)
	var damageErr *DamageError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &damageErr) {
		t.Fatalf("after %d packets: %v; want a DamageError", len(got), err)
	}
	if damageErr.Damage != tc.want || stats.Damaged != tc.want {
		t.Errorf("damage %+v, in Stats %+v; want %+v", damageErr.Damage, stats.Damaged, tc.want)
	}
	if msg := fmt.Sprintf("record %d (byte %d) is damaged", tc.want.Record, tc.want.Offset); !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not say %q", err, msg)
	}
	if stats.Records != wantStats.Records || stats.TCP != wantStats.TCP {
		t.Errorf("%d records, %d TCP; the intact file has %d and %d", stats.Records, stats.TCP, wantStats.Records, wantStats.TCP)
	}
	if len(got) != len(want) {
		t.Fatalf("%d packets, the intact file has %d", len(got), len(want))
	}
	for i := range want {
		if d := diffPacket(got[i], want[i]); d != "" {
			t.Fatalf("packet %d:%s", i+1, d)
		}
	}
}

// TestDamagedPcapReadsOn damages a real capture's records on purpose and
// checks that every other record is read, as from the file without them.
func TestDamagedPcapReadsOn(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	starts := pcapRecordStarts(t, file)
	n := len(starts) - 1
	k := n / 2 // the record damaged, from 0
	size := func(i int) int { return starts[i+1] - starts[i] }
	captured := func(i int) uint32 { return binary.LittleEndian.Uint32(file[starts[i]+8:]) }
	cut := func(i int) [2]int { return [2]int{starts[i], starts[i+1]} }

	// A record whose captured length is 20 bytes short reads as a record cut
	// 20 bytes short, and the 20 bytes after it are skipped.
	short := setLE32(file, starts[k]+8, captured(k)-20)
	shortIntact := without(short, [2]int{starts[k+1] - 20, starts[k+1]})

	garbage := bytes.Clone(file)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := starts[k] + 4; i < starts[k+3]; i++ {
		garbage[i] = byte(rng.Uint32())
	}

	cases := []damageCase{
		{"captured length impossible", setLE32(file, starts[k]+8, 0xffffffff), without(file, cut(k)),
			Damage{Record: int64(k + 1), Offset: int64(starts[k]), Places: 1, Bytes: int64(size(k))}},
		{"captured length 40 bytes long", setLE32(file, starts[k]+8, captured(k)+40), without(file, cut(k)),
			Damage{Record: int64(k + 1), Offset: int64(starts[k]), Places: 1, Bytes: int64(size(k))}},
		{"captured length 20 bytes short", short, shortIntact,
			Damage{Record: int64(k + 2), Offset: int64(starts[k+1] - 20), Places: 1, Bytes: 20}},
		{"three records overwritten", garbage, without(file, [2]int{starts[k], starts[k+3]}),
			Damage{Record: int64(k + 1), Offset: int64(starts[k]), Places: 1, Bytes: int64(starts[k+3] - starts[k])}},
		{"two places", setLE32(setLE32(file, starts[k]+8, 0xffffffff), starts[k+10]+12, 1), without(file, cut(k), cut(k+10)),
			Damage{Record: int64(k + 1), Offset: int64(starts[k]), Places: 2, Bytes: int64(size(k) + size(k+10))}},
		{"the first record", setLE32(file, starts[0]+8, 0xffffffff), without(file, cut(0)),
			Damage{Record: 1, Offset: pcapFileHeaderBytes, Places: 1, Bytes: int64(size(0))}},
		{"a length past the end of the file", setLE32(setLE32(file, starts[n-2]+8, 10000), starts[n-2]+12, 10000), without(file, cut(n-2)),
			Damage{Record: int64(n - 1), Offset: int64(starts[n-2]), Places: 1, Bytes: int64(size(n - 2))}},
		{"the last record", setLE32(file, starts[n-1]+8, 0x7fffffff), without(file, cut(n-1)),
			Damage{Record: int64(n), Offset: int64(starts[n-1]), Places: 1, Bytes: int64(size(n - 1)), ToEnd: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkDamage(t, tc) })
	}
	t.Run("gzip", func(t *testing.T) {
		tc := cases[0]
		tc.damaged = gzipBytes(t, tc.damaged)
		checkDamage(t, tc) // the offset is in the decompressed stream
	})
}

// TestDamagedRecordInEveryCapture makes the middle record's captured length
// impossible in each capture of every link type, and checks that the others
// are all read.
func TestDamagedRecordInEveryCapture(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(encapCapturesDir, "*.pcap"))
	tested := 0
	for _, path := range paths {
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(file, magicPcapMicroLE) || binary.LittleEndian.Uint16(file[6:]) != 4 {
			continue // the walk below reads little-endian microsecond pcap 2.4
		}
		starts := pcapRecordStarts(t, file)
		k := (len(starts) - 1) / 2
		if len(starts) < 4 {
			continue
		}
		tested++
		t.Run(filepath.Base(path), func(t *testing.T) {
			checkDamage(t, damageCase{damaged: setLE32(file, starts[k]+8, 0xfffffff0), intact: without(file, [2]int{starts[k], starts[k+1]}),
				want: Damage{Record: int64(k + 1), Offset: int64(starts[k]), Places: 1, Bytes: int64(starts[k+1] - starts[k])}})
		})
	}
	if tested < 20 {
		t.Errorf("only %d captures tested", tested)
	}
}

// TestDamagedPcapngReadsOn damages blocks of a real pcapng capture.
func TestDamagedPcapngReadsOn(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(encapCapturesDir, "nd__capwap_data.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	var packets []pcapngBlock
	for _, b := range pcapngBlocks(t, file) {
		if b.blockType == ngBlockEnhancedPacket {
			packets = append(packets, b)
		}
	}
	if len(packets) != 14 {
		t.Fatalf("%d packet blocks, want 14 (capinfos -c)", len(packets))
	}
	k := 6
	b := packets[k]
	whole := [2]int{b.start, b.start + b.length}
	damage := Damage{Record: int64(k + 1), Offset: int64(b.start), Places: 1, Bytes: int64(b.length)}

	cutShort := without(file, [2]int{b.start + 40, b.start + 48}) // 8 bytes of its packet data gone
	cutDamage := damage
	cutDamage.Bytes = int64(b.length - 8)

	cases := []damageCase{
		{"a block cut short", cutShort, without(file, whole), cutDamage},
		{"block length impossible", setLE32(file, b.start+4, 0x7fffff01), without(file, whole), damage},
		{"length fields disagree", setLE32(file, b.start+b.length-4, uint32(b.length+4)), without(file, whole), damage},
		{"an interface that does not exist", setLE32(file, b.start+8, 5), without(file, whole), damage},
		{"a length past the end of the file", setLE32(file, packets[12].start+4, 4000), without(file, [2]int{packets[12].start, packets[12].start + packets[12].length}),
			Damage{Record: 13, Offset: int64(packets[12].start), Places: 1, Bytes: int64(packets[12].length)}},
		{"two places", setLE32(setLE32(file, b.start+4, 3), packets[k+3].start+8, 1), without(file, whole, [2]int{packets[k+3].start, packets[k+3].start + packets[k+3].length}),
			Damage{Record: int64(k + 1), Offset: int64(b.start), Places: 2, Bytes: int64(b.length + packets[k+3].length)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkDamage(t, tc) })
	}
}

// TestDamageErrorMessages checks what the errors say.
func TestDamageErrorMessages(t *testing.T) {
	cases := []struct {
		err  *DamageError
		want string
	}{
		{&DamageError{Damage: Damage{Input: "a.pcap", Record: 1234, Offset: 567890, Places: 1, Bytes: 312}},
			"capture: a.pcap: record 1234 (byte 567890) is damaged: 312 bytes skipped; the records around it were read"},
		{&DamageError{Damage: Damage{Record: 7, Offset: 900, Places: 3, Bytes: 4096, ToEnd: true}},
			"capture: record 7 (byte 900) is damaged, and 2 more places after it: 4096 bytes skipped, to the end of the file: no readable record follows"},
		{&DamageError{Damage: Damage{Input: "b.pcap.gz", Record: 12, Offset: 4500, Places: 1, ToEnd: true}, Cause: errors.New("flate: corrupt input")},
			"capture: b.pcap.gz: reading record 12 (byte 4500): damaged capture file: flate: corrupt input (the records before it were read)"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
		if !errors.Is(tc.err, ErrDamaged) {
			t.Errorf("%q is not ErrDamaged", tc.err)
		}
	}
}

// TestDamagedGzipStream: a compressed stream that breaks ends the input with
// the packets before the break and an error naming the record.
func TestDamagedGzipStream(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	compressed := gzipBytes(t, file) // stored blocks: the bytes appear as they are
	// Break the CRC in the gzip trailer: every record is read, then the check fails.
	broken := bytes.Clone(compressed)
	broken[len(broken)-8] ^= 0xff
	want, _, err := readAll(t, file)
	if err != nil {
		t.Fatal(err)
	}
	got, stats, err := readAll(t, broken)
	var damageErr *DamageError
	if !errors.As(err, &damageErr) || !errors.Is(err, ErrDamaged) || damageErr.Cause == nil || !damageErr.ToEnd {
		t.Fatalf("got %v, want a DamageError with a cause", err)
	}
	if len(got) != len(want) || !slices.EqualFunc(got, want, func(a, b Packet) bool { return diffPacket(a, b) == "" }) {
		t.Errorf("%d packets, want the %d of the file", len(got), len(want))
	}
	if stats.Damaged.Record != stats.Records+1 || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("damage %+v after %d records, error %q", stats.Damaged, stats.Records, err)
	}
}
