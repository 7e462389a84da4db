package capture

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// rawRecord is one record of a capture file, as a reader hands it over.
type rawRecord struct {
	timestampNs int64
	wireBytes   int
	linkType    layers.LinkType
	iface       int
	data        []byte
}

// readWithPcapgo reads a file's records with gopacket's pcapgo readers (an
// independent reading of both formats); err is what ended them.
func readWithPcapgo(file []byte) (recs []rawRecord, err error) {
	var next func() ([]byte, gopacket.CaptureInfo, error)
	var linkType layers.LinkType
	if bytes.HasPrefix(file, magicPcapng) {
		r, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, err
		}
		next = r.ReadPacketData
	} else {
		r, err := pcapgo.NewReader(bytes.NewReader(file))
		if err != nil {
			return nil, err
		}
		next, linkType = r.ReadPacketData, r.LinkType()
	}
	for {
		data, ci, err := next()
		if err != nil {
			return recs, err
		}
		lt := linkType
		if len(ci.AncillaryData) > 0 {
			lt = ci.AncillaryData[0].(layers.LinkType)
		}
		recs = append(recs, rawRecord{ci.Timestamp.UnixNano(), ci.Length, lt, ci.InterfaceIndex, data})
	}
}

// readRawRecords reads a file's records with this package's readers, and
// returns what Next would return at their end.
func readRawRecords(t testing.TB, file []byte) ([]rawRecord, Stats, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, Stats{}, err
	}
	var recs []rawRecord
	for {
		in := r.nextRecord()
		if in == nil {
			return recs, r.Stats(), r.endError()
		}
		in.stats.Records++
		recs = append(recs, rawRecord{in.rec.timestampNs, in.rec.wireBytes, in.rec.linkType, in.rec.iface, bytes.Clone(in.rec.data)})
	}
}

// TestRecordsMatchPcapgo reads every capture of the test directories (and of
// the directory $CAPTURE_CORPUS, when set) with this package's record readers
// and with pcapgo's, and compares the records: timestamps, lengths, link
// types, interfaces, bytes, and how the file ends. Files pcapgo cannot open
// (pcap versions before 2.4) are skipped. Known differences in other corpora:
// pcapgo multiplies a microsecond field in 32 bits, so a field above 4294967
// (invalid: above a second) wraps there and not here.
func TestRecordsMatchPcapgo(t *testing.T) {
	var paths []string
	for _, dir := range []string{encapCapturesDir, realCapturesDir, os.Getenv("CAPTURE_CORPUS")} {
		if dir == "" {
			continue
		}
		found, _ := filepath.Glob(filepath.Join(dir, "*.pcap*"))
		paths = append(paths, found...)
	}
	if len(paths) < 40 {
		t.Fatalf("only %d captures found", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := readWithPcapgo(file)
			if len(want) == 0 && wantErr != io.EOF {
				t.Skipf("pcapgo reads no record: %v", wantErr)
			}
			got, stats, err := readRawRecords(t, file)
			if len(got) != len(want) {
				t.Errorf("%d records (then %v), pcapgo reads %d (then %v)", len(got), err, len(want), wantErr)
			}
			for i := range min(len(got), len(want)) {
				g, w := got[i], want[i]
				if g.timestampNs != w.timestampNs || g.wireBytes != w.wireBytes || g.linkType != w.linkType || g.iface != w.iface || !bytes.Equal(g.data, w.data) {
					t.Fatalf("record %d: time %d, %d bytes on the wire, link type %d, interface %d, %d bytes; pcapgo: %d, %d, %d, %d, %d bytes",
						i+1, g.timestampNs, g.wireBytes, g.linkType, g.iface, len(g.data), w.timestampNs, w.wireBytes, w.linkType, w.iface, len(w.data))
				}
			}
			switch {
			case wantErr == io.EOF && (err != io.EOF || stats.Truncated):
				t.Errorf("the records end with %v (truncated: %v), pcapgo's with io.EOF", err, stats.Truncated)
			case errors.Is(wantErr, io.ErrUnexpectedEOF) && (err != io.EOF || !stats.Truncated):
				t.Errorf("the records end with %v (truncated: %v), pcapgo's inside a record", err, stats.Truncated)
			}
		})
	}
}
