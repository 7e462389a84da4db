package capture

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// TestEthernetIPv4TCPMatchesTheParser decodes every Ethernet record of the
// test captures (and of ../../shared/realworld when present) twice: as decode
// does, through the direct Ethernet-IPv4-TCP path when it applies, and through
// the gopacket parser alone. Both must give the same outcome and Packet.
func TestEthernetIPv4TCPMatchesTheParser(t *testing.T) {
	var paths []string
	for _, dir := range []string{encapCapturesDir, realCapturesDir, "../../shared/realworld", os.Getenv("CAPTURE_CORPUS")} {
		if dir == "" {
			continue
		}
		for _, pattern := range []string{"*.pcap", "*.pcapng", "*.pcap.gz"} {
			found, _ := filepath.Glob(filepath.Join(dir, pattern))
			paths = append(paths, found...)
		}
	}
	direct, viaParser := newDecoder(), newDecoder()
	direct.udp, viaParser.udp = true, true
	fast, records := 0, 0
	for _, path := range paths {
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, _, _ := readRawRecords(t, file)
		for i, rec := range recs {
			if rec.linkType != layers.LinkTypeEthernet {
				continue
			}
			records++
			var got, want Packet
			gotResult := direct.decode(rec.data, rec.wireBytes, rec.linkType, &got)
			wantResult := viaParser.decodeWithParser(rec.data, rec.wireBytes, rec.linkType, &want)
			if direct.ethernetIPv4TCP(rec.data) {
				fast++
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
	// The test means nothing unless the direct path was taken, and not for
	// everything (the committed corpora alone hold a few dozen such records).
	if fast < 20 || fast == records {
		t.Errorf("the direct path took %d of %d Ethernet records", fast, records)
	}
	t.Logf("%d Ethernet records, %d through the direct path", records, fast)
}
