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
	// Every tunnel and link type of encapFramings, a SYN and a datagram each,
	// in one pcapng with an interface per link type.
	var tunnels []testRecord
	for i, framing := range encapFramings {
		client, server := client4, server4
		if framing.ipv6 {
			client, server = client6, server6
		}
		tunnels = append(tunnels,
			testRecord{data: framing.frame(t, buildIP(t, synSegment(client, server)), framing.ipv6), linkType: framing.linkType, timestampNs: recordTime(2 * i)},
			testRecord{data: framing.frame(t, buildUDP(t, client, server), framing.ipv6), linkType: framing.linkType, timestampNs: recordTime(2*i + 1)})
	}
	radiotap := []testRecord{
		record(0, layers.LinkTypeIEEE80211Radio, frameRadiotap, dataSegment(server4, client4, 30)),
		record(1, layers.LinkTypeIEEE80211Radio, frameRadiotap, finSegment(server6, client6)),
	}
	nflog := []testRecord{record(0, linkTypeNFLOG, frameNFLOG, synSegment(client4, server4))}
	vxlan := []testRecord{record(0, layers.LinkTypeEthernet, frameVXLAN(portVXLAN), sackSegment(client4, server4))}
	three := []testRecord{
		record(0, layers.LinkTypeEthernet, frameEthernet, synSegment(client4, server4)),
		record(1, layers.LinkTypeEthernet, frameVLAN, dataSegment(server4, client4, 40)),
		record(2, layers.LinkTypeEthernet, frameEthernet, finSegment(server4, client4)),
	}
	threePcap := writePcapByHand(t, binary.LittleEndian, false, 65535, three)
	second := pcapFileHeaderBytes + pcapRecordHeaderBytes + len(three[0].data)
	damagedPcap := setLE32(threePcap, second+8, 0xfffffff0)
	threePcapng := writePcapng(t, 65535, three)
	blocks := pcapngBlocks(t, threePcapng)
	cutPcapng := without(threePcapng, [2]int{blocks[len(blocks)-2].start + 36, blocks[len(blocks)-2].start + 44})
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
		"pcapng-every-tunnel":          writePcapng(t, 65535, tunnels),
		"pcap-radiotap-fcs":            writePcapByHand(t, binary.LittleEndian, false, 65535, radiotap),
		"pcap-nflog":                   writePcapByHand(t, binary.LittleEndian, false, 65535, nflog),
		"pcap-vxlan-snaplen80":         writePcapByHand(t, binary.LittleEndian, false, 80, cutTo(vxlan, 80)),
		"pcap-damaged-length":          damagedPcap,
		"pcap-version-2.1":             patch(threePcap, 6, 1),
		"pcapng-block-cut-short":       cutPcapng,
	}
}

// cutTo cuts records to a snaplen, keeping their wire length.
func cutTo(recs []testRecord, snaplen int) []testRecord {
	out := make([]testRecord, len(recs))
	for i, rec := range recs {
		out[i] = rec
		if len(rec.data) > snaplen {
			out[i].wireBytes, out[i].data = len(rec.data), rec.data[:snaplen]
		}
	}
	return out
}

// showPanics makes the reader's parsers let panics through: gopacket's parser
// turns a panic in a layer into an error (an undecodable record), which would
// hide a decoder's bug from the fuzzer.
func showPanics(r *Reader) {
	for _, p := range r.dec.parsers() {
		p.IgnorePanic = true
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
		withUDP := len(data)%2 == 1 // half the inputs return UDP too
		var opts []Option
		if withUDP {
			opts = append(opts, WithUDP())
		}
		r, err := NewReader(bytes.NewReader(data), opts...)
		if err != nil {
			if r != nil {
				t.Fatal("a reader and an error")
			}
			if !errors.Is(err, ErrNotCapture) && !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrDamaged) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("NewReader error %q is none of the documented kinds", err)
			}
			return
		}
		showPanics(r)
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
			if p.Protocol == ProtocolUDP && !withUDP {
				t.Fatal("a UDP datagram without WithUDP")
			}
		}
		if err != io.EOF && !errors.Is(err, ErrDamaged) {
			t.Fatalf("Next error %q is neither io.EOF nor ErrDamaged", err)
		}
		if again := r.Next(&p); again == nil || again.Error() != err.Error() {
			t.Fatalf("Next after %q returned %v", err, again)
		}
		s := r.Stats()
		var skipped int64
		for _, k := range s.Skipped {
			skipped += k.Records
		}
		if s.Records != s.TCP+s.UDP+s.NonTCP+s.Undecodable || s.Fragments+skipped > s.NonTCP || s.FirstNs > s.LastNs {
			t.Fatalf("inconsistent stats %+v", s)
		}
		var damageErr *DamageError
		damaged := errors.As(err, &damageErr)
		if damaged != (s.Damaged.Places > 0) || damaged && damageErr.Damage != s.Damaged {
			t.Fatalf("error %v with damage %+v", err, s.Damaged)
		}
		if s.Damaged.Places > 0 && (s.Damaged.Record < 1 || s.Damaged.Record > s.Records+1 || s.Damaged.Bytes < 0 || s.Damaged.Offset < 0) {
			t.Fatalf("damage %+v after %d records", s.Damaged, s.Records)
		}
		if !bytes.HasPrefix(data, magicGzip) && (s.Damaged.Bytes > int64(len(data)) || s.Damaged.Offset > int64(len(data))) {
			t.Fatalf("damage %+v in a %d-byte file", s.Damaged, len(data))
		}
	})
}

func checkPacketInvariants(t *testing.T, p *Packet) {
	t.Helper()
	switch {
	case p.Protocol == ProtocolUDP && (p.HeaderLen != 8 || p.Flags != 0 || p.Options != TCPOptions{WindowScale: -1}):
		t.Fatalf("UDP datagram %+v", p)
	case p.Protocol == ProtocolTCP && (p.HeaderLen < 20 || p.HeaderLen > 60 || p.HeaderLen%4 != 0):
		t.Fatalf("header length %d", p.HeaderLen)
	case p.Protocol != ProtocolTCP && p.Protocol != ProtocolUDP:
		t.Fatalf("protocol %d", p.Protocol)
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

// FuzzDecodeRecord feeds one record of any link type to the decoder, with
// panics let through and UDP on: every outcome must hold together.
func FuzzDecodeRecord(f *testing.F) {
	for _, framing := range linkFramings {
		client, server := client4, server4
		if framing.ipv6 {
			client, server = client6, server6
		}
		f.Add(uint16(framing.linkType), framing.frame(f, buildIP(f, dataSegment(server, client, 40)), framing.ipv6))
		f.Add(uint16(framing.linkType), framing.frame(f, buildUDP(f, client, server), framing.ipv6))
	}
	d := newDecoder()
	d.udp = true
	for _, p := range d.parsers() {
		p.IgnorePanic = true
	}
	f.Fuzz(func(t *testing.T, linkType uint16, data []byte) {
		var p Packet
		switch d.decode(data, len(data), layers.LinkType(linkType), &p) {
		case decodedTCP, decodedUDP:
			checkPacketInvariants(t, &p)
			if p.Tunnel >= 1<<len(encapsulationNames) {
				t.Fatalf("tunnel bits %b", p.Tunnel)
			}
		case decodedSkipped:
			if _, known := d.parserFor(layers.LinkType(linkType), data); known && d.skipped == "" {
				t.Fatal("skipped without a name")
			}
		}
	})
}

// FuzzRadiotapAndDot11 compares the radiotap and 802.11 header readers with
// gopacket's decoders where those decode: the radiotap length and FCS flag,
// and the 802.11 data-frame header length.
func FuzzRadiotapAndDot11(f *testing.F) {
	for _, ipv6 := range []bool{false, true} {
		f.Add(frameRadiotap(f, buildIP(f, finSegment(server4, client4)), ipv6))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ours radiotapLayer
		ours.dot11 = &dot11Layer{}
		var theirs layers.RadioTap
		oursErr := ours.DecodeFromBytes(data, gopacket.NilDecodeFeedback)
		// gopacket's decoder rewrites the frame in place to drop data padding: give it a copy.
		if theirs.DecodeFromBytes(bytes.Clone(data), gopacket.NilDecodeFeedback) != nil || oursErr != nil || len(theirs.RadioTapValues) == 0 {
			return // the readers refuse different broken headers; both must just not panic
		}
		flags := theirs.RadioTapValues[0].Flags
		// gopacket reads fields past the declared header length; this reader
		// does not: compare only headers whose flags field lies inside.
		flagsAt := 8 + 4*(len(theirs.Present)-1)
		if theirs.Present[0].TSFT() {
			flagsAt = (flagsAt+7)&^7 + 8
		}
		if theirs.Present[0].Flags() && flagsAt >= int(theirs.Length) {
			return
		}
		if len(ours.Contents) != int(theirs.Length) {
			t.Fatalf("radiotap length %d, gopacket %d", len(ours.Contents), theirs.Length)
		}
		fcs := flags.FCS() && len(data)-int(theirs.Length) >= 4
		if got := len(ours.Contents)+len(ours.Payload) == len(data)-4; got != fcs {
			t.Fatalf("FCS stripped %v, gopacket's flags say FCS %v", got, flags.FCS())
		}
		if ours.dot11.padded != flags.Datapad() {
			t.Fatalf("data padding %v, gopacket %v", ours.dot11.padded, flags.Datapad())
		}

		frame := data[len(ours.Contents):]
		var dot11 dot11Layer
		var their11 layers.Dot11
		if dot11.DecodeFromBytes(frame, gopacket.NilDecodeFeedback) != nil || their11.DecodeFromBytes(frame, gopacket.NilDecodeFeedback) != nil {
			return
		}
		if !dot11.data || their11.Type.MainType() != layers.Dot11TypeData {
			return
		}
		qos := their11.Type.QOS()
		amsdu := qos && frame[len(their11.Contents)-2-boolInt(their11.HTControl != nil)*4]&dot11QoSAMSDU != 0
		if amsdu {
			return // gopacket does not read A-MSDU subframes
		}
		if len(dot11.Contents) != len(their11.Contents) {
			t.Fatalf("802.11 header %d bytes, gopacket %d", len(dot11.Contents), len(their11.Contents))
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
