package capture

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// TestDirectPathMatchesTheParser decodes every record of the test captures (and
// of ../testdata/realworld, ../../shared/realworld and $CAPTURE_CORPUS when
// present) twice: as decode does, through the direct path (Ethernet with or
// without VLAN tags, or raw IP; IPv4 or IPv6; TCP) when it applies, and through
// the gopacket parser alone. Both must give the same outcome and Packet.
func TestDirectPathMatchesTheParser(t *testing.T) {
	var paths []string
	for _, dir := range []string{encapCapturesDir, realCapturesDir, "../testdata/realworld", "../../shared/realworld", os.Getenv("CAPTURE_CORPUS")} {
		if dir == "" {
			continue
		}
		for _, pattern := range []string{"*.pcap", "*.pcapng", "*.pcap.gz"} {
			found, _ := filepath.Glob(filepath.Join(dir, pattern))
			paths = append(paths, found...)
		}
	}
	direct, viaParser := newDecoder(), newDecoder()
	kinds := map[string]int{}
	direct.udp, viaParser.udp = true, true
	fast, records := 0, 0
	for _, path := range paths {
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, _, _ := readRawRecords(t, file)
		for i, rec := range recs {
			records++
			var got, want, scratch Packet
			gotResult := direct.decode(rec.data, rec.wireBytes, rec.linkType, &got)
			wantResult := viaParser.decodeWithParser(rec.data, rec.wireBytes, rec.linkType, &want)
			if _, ok := direct.direct(rec.data, rec.wireBytes, rec.linkType, &scratch); ok {
				fast++
				kinds[directKind(rec.linkType, rec.data)]++
			}
			if gotResult != wantResult || got.Src != want.Src || got.Dst != want.Dst || got.SrcPort != want.SrcPort ||
				got.DstPort != want.DstPort || got.Seq != want.Seq || got.Ack != want.Ack || got.Flags != want.Flags ||
				got.Window != want.Window || got.Options != want.Options || got.IPID != want.IPID || got.Tunnel != want.Tunnel ||
				got.HeaderLen != want.HeaderLen || got.PayloadLen != want.PayloadLen || len(got.Payload) != len(want.Payload) ||
				got.Protocol != want.Protocol {
				t.Errorf("%s record %d: direct %v %+v, parser %v %+v", filepath.Base(path), i+1, gotResult, got, wantResult, want)
			}
		}
	}
	// The test means nothing unless the direct path was taken, for every kind
	// of record it reads, and not for everything.
	if fast < 20 || fast == records {
		t.Errorf("the direct path took %d of %d records", fast, records)
	}
	for _, kind := range []string{"Ethernet IPv4", "Ethernet IPv6", "VLAN IPv4", "VLAN IPv6", "raw IPv4", "raw IPv6"} {
		if kinds[kind] == 0 {
			t.Errorf("no record of the corpora went through the direct path as %s", kind)
		}
	}
	t.Logf("%d records, %d through the direct path: %v", records, fast, kinds)
}

// directKind names the kind of a record the direct path read, for the test's count.
func directKind(linkType layers.LinkType, data []byte) string {
	kind, ipOffset := "raw", 0
	if linkType == layers.LinkTypeEthernet {
		kind, ipOffset = "Ethernet", 14
		if data[12] != 0x08 && data[12] != 0x86 {
			kind = "VLAN"
			for data[ipOffset-2] != 0x08 && data[ipOffset-2] != 0x86 {
				ipOffset += 4
			}
		}
	}
	if data[ipOffset]>>4 == 6 {
		return kind + " IPv6"
	}
	return kind + " IPv4"
}
