package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var updateFuzzSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzReader from the test generators")

// fuzzSeeds are small captures from the test generators, plus junk, named as
// their files in testdata/fuzz/FuzzReader.
func fuzzSeeds(t testing.TB) map[string][]byte {
	record := func(i int, lt layers.LinkType, frame func(testing.TB, []byte, bool) []byte, s testSegment) testRecord {
		return testRecord{data: frame(t, buildIP(t, s), s.isIPv6()), linkType: lt, timestampNs: recordTime(i)}
	}
	ethernet := []testRecord{
		record(0, layers.LinkTypeEthernet, frameVLAN, synSegment(client4, server4)),
		record(1, layers.LinkTypeEthernet, frameEthernet, dataSegment(server6, client6, 20)),
	}
	mixed := []testRecord{
		record(0, layers.LinkTypeEthernet, frameQinQ, sackSegment(client4, server4)),
		record(1, layers.LinkTypeLinuxSLL2, frameSLL2, finSegment(server6, client6)),
	}
	cut := record(0, layers.LinkTypeEthernet, frameEthernet, dataSegment(server4, client4, 300))
	cut.wireBytes, cut.data = len(cut.data), cut.data[:96]
	ext := record(0, layers.LinkTypeRaw, frameRaw, withIPv6Extensions(dataSegment(server6, client6, 10), ipv6ExtensionHeaders))
	loop := record(0, layers.LinkTypeNull, frameLoopback(binary.BigEndian, 30), synSegment(client6, server6))
	sll := []testRecord{
		record(0, layers.LinkTypeLinuxSLL, frameSLL, synSegment(client4, server4)),
		record(1, layers.LinkTypeLinuxSLL, frameSLL, finSegment(server4, client4)),
	}
	sllFile := writePcapByHand(t, binary.LittleEndian, false, 65535, sll)
	junk := make([]byte, 64)
	for i := range junk {
		junk[i] = byte(i*37 + 11)
	}
	return map[string][]byte{
		"pcap-usec-le-ethernet-vlan":   writePcapByHand(t, binary.LittleEndian, false, 65535, ethernet),
		"pcap-nsec-be-raw-ipv6-ext":    writePcapByHand(t, binary.BigEndian, true, 65535, []testRecord{ext}),
		"pcapng-qinq-and-sll2":         writePcapng(t, 65535, mixed),
		"pcap-snaplen96-cut":           writePcapByHand(t, binary.LittleEndian, true, 96, []testRecord{cut}),
		"pcap-null-big-endian-ipv6":    writePcapByHand(t, binary.BigEndian, false, 65535, []testRecord{loop}),
		"pcap-sll-truncated":           sllFile[:len(sllFile)-7],
		"pcapng-gzip":                  gzipBytes(t, writePcapng(t, 200, ethernet)),
		"junk-text":                    []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
		"junk-after-pcap-magic":        append([]byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0}, junk...),
		"junk-after-pcapng-magic":      append([]byte{0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a}, junk...),
		"pcap-header-and-huge-record":  append(writePcapByHand(t, binary.LittleEndian, false, 65535, sll)[:24], 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f),
		"pcapng-header-and-empty-idbs": writePcapngHeaderOnly(t),
	}
}

// fuzzCorpusFile is the file format of go test's fuzz corpus.
func fuzzCorpusFile(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data)
}

// TestFuzzSeeds keeps testdata/fuzz/FuzzReader in step with the generators;
// run with -update-fuzz-seeds to rewrite it.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	for name, data := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		if *updateFuzzSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fuzzCorpusFile(data), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, fuzzCorpusFile(data)) {
			t.Errorf("%s is missing or stale (%v): run go test -run TestFuzzSeeds -update-fuzz-seeds", path, err)
		}
	}
}

// FuzzReader feeds arbitrary bytes to the reader: no input may panic or hang,
// and what it returns must hold together.
func FuzzReader(f *testing.F) {
	for _, data := range fuzzSeeds(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			if r != nil {
				t.Fatal("a reader and an error")
			}
			if !errors.Is(err, ErrNotCapture) && !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrDamaged) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("NewReader error %q is none of the documented kinds", err)
			}
			return
		}
		var p Packet
		for calls := 0; ; calls++ {
			if calls > 1<<22 {
				t.Fatal("Next does not advance")
			}
			err = r.Next(&p)
			if err != nil {
				break
			}
			checkPacketInvariants(t, &p)
		}
		if err != io.EOF && !errors.Is(err, ErrDamaged) {
			t.Fatalf("Next error %q is neither io.EOF nor ErrDamaged", err)
		}
		if again := r.Next(&p); again == nil || again.Error() != err.Error() {
			t.Fatalf("Next after %q returned %v", err, again)
		}
		s := r.Stats()
		if s.Records != s.TCP+s.NonTCP+s.Undecodable || s.Fragments > s.NonTCP || s.FirstNs > s.LastNs {
			t.Fatalf("inconsistent stats %+v", s)
		}
	})
}

func checkPacketInvariants(t *testing.T, p *Packet) {
	t.Helper()
	switch {
	case p.HeaderLen < 20 || p.HeaderLen > 60 || p.HeaderLen%4 != 0:
		t.Fatalf("header length %d", p.HeaderLen)
	case p.PayloadLen < 0 || len(p.Payload) > p.PayloadLen:
		t.Fatalf("payload %d captured bytes of %d", len(p.Payload), p.PayloadLen)
	case !p.Src.IsValid() || p.Src.Is4() != p.Dst.Is4():
		t.Fatalf("addresses %v -> %v", p.Src, p.Dst)
	case p.Options.NumSACK < 0 || p.Options.NumSACK > 4 || p.Options.WindowScale < -1 || p.Options.WindowScale > 14:
		t.Fatalf("options %+v", p.Options)
	}
}

// FuzzDecodeTCP compares the TCP header decoder with gopacket's where gopacket
// decodes the header.
func FuzzDecodeTCP(f *testing.F) {
	for _, s := range []testSegment{synSegment(client4, server4), dataSegment(server4, client4, 5), sackSegment(client6, server6), finSegment(server4, client4)} {
		f.Add(buildIP(f, s)[20:])
	}
	f.Fuzz(func(t *testing.T, segment []byte) {
		var p Packet
		headerBytes, ok := decodeTCP(segment, &p)
		var tcp layers.TCP
		err := tcp.DecodeFromBytes(segment, gopacket.NilDecodeFeedback)
		if err != nil {
			if ok && headerBytes <= len(segment) {
				t.Fatalf("decoded a header gopacket refuses (%v)", err)
			}
			return
		}
		if !ok {
			t.Fatal("refused a header gopacket decodes")
		}
		if headerBytes != int(tcp.DataOffset)*4 || p.SrcPort != uint16(tcp.SrcPort) || p.DstPort != uint16(tcp.DstPort) ||
			p.Seq != tcp.Seq || p.Ack != tcp.Ack || p.Window != tcp.Window || p.Has(FlagSYN) != tcp.SYN ||
			p.Has(FlagFIN) != tcp.FIN || p.Has(FlagCWR) != tcp.CWR {
			t.Fatalf("fixed fields differ: %+v vs gopacket %+v", p, tcp)
		}
		if bytes.IndexByte(segment[20:headerBytes], byte(layers.TCPOptionKindMultipathTCP)) >= 0 {
			return // gopacket stops at some MPTCP options this decoder steps over
		}
		if want := optionsFromGopacket(tcp.Options); p.Options != want {
			t.Fatalf("options %+v, gopacket %+v", p.Options, want)
		}
	})
}
