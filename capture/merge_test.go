package capture

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readFiles reads every packet of several capture files through OpenFiles,
// copying payloads, and returns the error that ended them.
func readFiles(t testing.TB, paths []string, opts ...Option) ([]Packet, Stats, error) {
	t.Helper()
	r, err := OpenFiles(paths, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var packets []Packet
	for {
		var p Packet
		if err := r.Next(&p); err != nil {
			if again := r.Next(&p); again != err {
				t.Errorf("Next after %v: %v", err, again)
			}
			return packets, r.Stats(), err
		}
		p.Payload = bytes.Clone(p.Payload)
		packets = append(packets, p)
	}
}

// toTestRecords turns a capture's records back into records to write.
func toTestRecords(t testing.TB, file []byte) []testRecord {
	t.Helper()
	recs, _, err := readRawRecords(t, file)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	out := make([]testRecord, len(recs))
	for i, rec := range recs {
		out[i] = testRecord{data: rec.data, wireBytes: rec.wireBytes, linkType: rec.linkType, timestampNs: rec.timestampNs}
	}
	return out
}

// writeFile writes a file into dir and returns its path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// splitCapture writes a real capture's records into three files, record i
// into file part(i): a pcap, a pcapng and a gzip-compressed pcap.
func splitCapture(t *testing.T, recs []testRecord, part func(i int) int) []string {
	t.Helper()
	var parts [3][]testRecord
	for i, rec := range recs {
		parts[part(i)] = append(parts[part(i)], rec)
	}
	dir := t.TempDir()
	return []string{
		writeFile(t, dir, "a.pcap", writePcapByHand(t, binary.LittleEndian, false, 200, parts[0])),
		writeFile(t, dir, "b.pcapng", writePcapng(t, 200, parts[1])),
		writeFile(t, dir, "c.pcap.gz", gzipBytes(t, writePcapByHand(t, binary.LittleEndian, false, 200, parts[2]))),
	}
}

// comparePackets compares packets with the ones wanted, ignoring the file
// and interface they came from.
func comparePackets(t *testing.T, got, want []Packet) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d packets, want %d", len(got), len(want))
	}
	for i := range want {
		g := got[i]
		g.File, g.Interface = want[i].File, want[i].Interface
		if d := diffPacket(g, want[i]); d != "" {
			t.Fatalf("packet %d:%s", i+1, d)
		}
	}
}

// TestOpenFilesMerges reads a real capture split into three files of
// different formats, records dealt round-robin (as from three capture points)
// or in three consecutive pieces (as tcpdump -W rotates them), and given in
// any order: the merge gives back the capture's packets in its order.
func TestOpenFilesMerges(t *testing.T) {
	original := filepath.Join(realCapturesDir, "rtt150-iw10-tls13h2-200000.client.pcap")
	file, err := os.ReadFile(original)
	if err != nil {
		t.Fatal(err)
	}
	recs := toTestRecords(t, file)
	for i := 1; i < len(recs); i++ {
		if recs[i].timestampNs <= recs[i-1].timestampNs {
			t.Fatalf("records %d and %d are not in strict time order: the merge's order would depend on its tie rule", i, i+1)
		}
	}
	want, wantStats, err := readAll(t, file)
	if err != nil {
		t.Fatal(err)
	}
	n := len(recs)
	splits := map[string]func(i int) int{
		"round-robin": func(i int) int { return i % 3 },
		"rotated":     func(i int) int { return i * 3 / n },
	}
	for name, part := range splits {
		t.Run(name, func(t *testing.T) {
			paths := splitCapture(t, recs, part)
			slices.Reverse(paths) // the order given does not matter
			got, stats, err := readFiles(t, paths)
			if err != io.EOF {
				t.Fatal(err)
			}
			comparePackets(t, got, want)
			for i, p := range got {
				if wantFile := 2 - part(slices.IndexFunc(recs, func(r testRecord) bool { return r.timestampNs == p.TimestampNs })); p.File != wantFile {
					t.Fatalf("packet %d from file %d, want %d", i+1, p.File, wantFile)
				}
			}
			if stats.Records != wantStats.Records || stats.TCP != wantStats.TCP || stats.FirstNs != wantStats.FirstNs || stats.LastNs != wantStats.LastNs ||
				stats.Format != "pcap+pcapng" || !slices.Equal(stats.LinkTypes, []string{"Raw"}) || len(stats.Files) != 3 {
				t.Errorf("stats %+v; the capture's: %+v", stats, wantStats)
			}
			for i, f := range stats.Files {
				alone, err := os.ReadFile(paths[i])
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(paths[i], ".gz") {
					alone = gunzip(t, alone)
				}
				_, aloneStats, err := readAll(t, alone)
				if err != nil {
					t.Fatal(err)
				}
				if f.Name != paths[i] || f.Records != aloneStats.Records || f.TCP != aloneStats.TCP || f.Format != aloneStats.Format ||
					f.FirstNs != aloneStats.FirstNs || f.LastNs != aloneStats.LastNs || f.Files != nil {
					t.Errorf("file %d: %+v; read alone: %+v", i, f, aloneStats)
				}
			}
		})
	}
}

func gunzip(t testing.TB, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpenFilesLikeMergecap merges real captures of different link types and
// formats, and compares with the capture mergecap (Wireshark) writes of them.
func TestOpenFilesLikeMergecap(t *testing.T) {
	mergecap, err := exec.LookPath("mergecap")
	if err != nil {
		t.Skip("mergecap is not installed (Debian: wireshark-common)")
	}
	dir := t.TempDir()
	file, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	gre, err := os.ReadFile(filepath.Join(encapCapturesDir, "zk__tunnels__gre-sample.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{
		filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.client.pcap"), // Raw
		writeFile(t, dir, "gre.pcap.gz", gzipBytes(t, gre)),                 // Ethernet, gzip
		filepath.Join(encapCapturesDir, "nd__capwap_data.pcapng"),           // pcapng, Ethernet
		filepath.Join(encapCapturesDir, "zk__nflog-http.pcap"),              // NFLOG
		filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"), // Raw, the same time span as the first
		writeFile(t, dir, "empty.pcap", file[:pcapFileHeaderBytes]),         // no records
	}
	merged := filepath.Join(dir, "merged.pcapng")
	if out, err := exec.Command(mergecap, append([]string{"-w", merged}, paths...)...).CombinedOutput(); err != nil {
		t.Fatalf("mergecap: %v\n%s", err, out)
	}
	mergedFile, err := os.ReadFile(merged)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(mergedFile), WithUDP())
	if err != nil {
		t.Fatal(err)
	}
	var want []Packet
	for {
		var p Packet
		if err := r.Next(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.Payload = bytes.Clone(p.Payload)
		want = append(want, p)
	}
	got, stats, err := readFiles(t, paths, WithUDP())
	if err != io.EOF {
		t.Fatal(err)
	}
	comparePackets(t, got, want)
	mergecapStats := r.Stats()
	if stats.Records != mergecapStats.Records || stats.TCP != mergecapStats.TCP || stats.UDP != mergecapStats.UDP ||
		stats.FirstNs != mergecapStats.FirstNs || stats.LastNs != mergecapStats.LastNs {
		t.Errorf("stats %+v; of mergecap's file %+v", stats, mergecapStats)
	}
	if !slices.Equal(stats.LinkTypes, []string{"Raw", "Ethernet", "NFLOG"}) {
		t.Errorf("link types %v", stats.LinkTypes)
	}
	t.Logf("%d packets from %d files, as mergecap merges them", len(got), len(paths))
}

// TestOpenFilesTies: records of the same time in several files come in the
// order the files were given (mergecap 4.0 takes the later file's first;
// this order keeps the files of a rotated capture in order when a record at
// the end of one has the time of the first of the next). The files here: a
// real capture, and the packets of another at its times.
func TestOpenFilesTies(t *testing.T) {
	server, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.client.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	serverRecs, retimed := toTestRecords(t, server), toTestRecords(t, client)
	for i := range retimed {
		retimed[i].timestampNs = serverRecs[i%len(serverRecs)].timestampNs
	}
	retimed = retimed[:min(len(retimed), len(serverRecs))]
	retimedFile := writePcapByHand(t, binary.LittleEndian, true, 200, retimed)
	paths := []string{filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"), writeFile(t, t.TempDir(), "retimed.pcap", retimedFile)}

	first, _, err := readAll(t, server)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := readAll(t, retimedFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range second {
		second[i].File = 1
	}
	want := slices.Concat(first, second)
	slices.SortStableFunc(want, func(a, b Packet) int { return cmp.Compare(a.TimestampNs, b.TimestampNs) })
	got, _, err := readFiles(t, paths)
	if err != io.EOF {
		t.Fatal(err)
	}
	comparePackets(t, got, want)
	for i := range want {
		if got[i].File != want[i].File {
			t.Fatalf("packet %d from file %d, want %d", i+1, got[i].File, want[i].File)
		}
	}
}

// TestOpenFilesDamagedOne: a damaged file among several is read around its
// damage, the others whole, and the error names it.
func TestOpenFilesDamagedOne(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	starts := pcapRecordStarts(t, file)
	dir := t.TempDir()
	client := filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.client.pcap")
	damaged := writeFile(t, dir, "server.pcap", setLE32(file, starts[5]+8, 0xfffffff0))
	intact := writeFile(t, dir, "server-less-6.pcap", without(file, [2]int{starts[5], starts[6]}))

	want, wantStats, err := readFiles(t, []string{client, intact})
	if err != io.EOF {
		t.Fatal(err)
	}
	got, stats, err := readFiles(t, []string{client, damaged})
	var damageErr *DamageError
	if !errors.As(err, &damageErr) || damageErr.Input != damaged || damageErr.Record != 6 {
		t.Fatalf("got %v, want a DamageError naming record 6 of %s", err, damaged)
	}
	if !strings.Contains(err.Error(), damaged+": record 6 (byte") {
		t.Errorf("error %q does not name the file and record", err)
	}
	comparePackets(t, got, want)
	if stats.Damaged != damageErr.Damage || stats.Files[1].Damaged != damageErr.Damage || stats.Files[0].Damaged.Places != 0 || stats.Records != wantStats.Records {
		t.Errorf("stats %+v", stats)
	}
}

// TestOpenFilesErrors: a file that cannot be read is named in the error.
func TestOpenFilesErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap")
	text := writeFile(t, dir, "notes.txt", []byte("not a capture\n"))
	empty := writeFile(t, dir, "empty.pcap", nil)
	missing := filepath.Join(dir, "missing.pcap")
	cases := []struct {
		paths []string
		want  error
		name  string
	}{
		{[]string{good, missing}, fs.ErrNotExist, missing},
		{[]string{good, text}, ErrNotCapture, text},
		{[]string{empty, good}, ErrEmpty, empty},
	}
	for _, tc := range cases {
		r, err := OpenFiles(tc.paths)
		if r != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%v: got %v, want %v naming %s", tc.paths, err, tc.want, tc.name)
		}
	}
	if _, err := OpenFiles(nil); err == nil {
		t.Error("no files: no error")
	}
}

// TestNewReaderFromPipe reads captures from a pipe, which cannot seek (as
// os.Stdin when a capture is piped in): plain, gzip-compressed, pcapng.
func TestNewReaderFromPipe(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(realCapturesDir, "rtt150-iw10-h1-100000.server.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := readAll(t, file)
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{
		"pcap":   file,
		"gzip":   gzipBytes(t, file),
		"pcapng": writePcapng(t, 200, toTestRecords(t, file)),
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			written := make(chan error, 1)
			go func() {
				var err error
				for rest := data; len(rest) > 0 && err == nil; { // in small writes, as a capture arrives
					n := min(len(rest), 1000)
					_, err = pw.Write(rest[:n])
					rest = rest[n:]
				}
				pw.Close()
				written <- err
			}()
			r, err := NewReader(pr)
			if err != nil {
				t.Fatal(err)
			}
			var got []Packet
			for {
				var p Packet
				if err := r.Next(&p); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				p.Payload = bytes.Clone(p.Payload)
				got = append(got, p)
			}
			if err := <-written; err != nil {
				t.Fatal(err)
			}
			comparePackets(t, got, want)
		})
	}
}

// TestMergedNextAllocatesNothing holds the merge's steady state to zero
// allocations.
func TestMergedNextAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, format := range fileFormats {
		recs := toTestRecords(t, allocTestFile(t, format, framingNamed(t, "ethernet-ipv4", "vlan-ipv6"), 2000))
		for j := range recs {
			recs[j].timestampNs += int64(i) * 1000 // interleaved
		}
		paths = append(paths, writeFile(t, dir, format.name, format.write(t, 65535, recs)))
	}
	r, err := OpenFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var p Packet
	for range 50 {
		if err := r.Next(&p); err != nil {
			t.Fatal(err)
		}
	}
	var files [8]bool
	allocs := testing.AllocsPerRun(1000, func() {
		if err := r.Next(&p); err != nil {
			t.Fatal(err)
		}
		files[p.File] = true
	})
	if allocs > 0 {
		t.Errorf("Next allocates %.2f times per packet", allocs)
	}
	if n := len(slices.DeleteFunc(files[:], func(b bool) bool { return !b })); n != len(fileFormats) {
		t.Errorf("packets from %d files, want %d", n, len(fileFormats))
	}
}
