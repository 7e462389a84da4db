package capture

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// TestPipeHandsOverEachRecord: a capture written into a pipe as packets are
// captured (tcpdump -U -w - |) hands over each packet as soon as its record is
// in, without waiting for the next record (which, on a live capture, is a
// packet not yet captured), in both formats; a file still has its records
// checked against the next header (TestDamagedRecord).
func TestPipeHandsOverEachRecord(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "testdata", "captures", "rtt40-iw3-h1-100000.client.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readWithPcapgo(file)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	type writer interface {
		WritePacket(ci gopacket.CaptureInfo, data []byte) error
	}
	for _, format := range []string{"pcap", "pcapng"} {
		t.Run(format, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			defer pw.Close()
			var w writer
			var flush func() error
			switch format {
			case "pcap":
				pw := pcapgo.NewWriter(pw)
				if err := pw.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
					t.Fatal(err)
				}
				w, flush = pw, func() error { return nil }
			case "pcapng":
				nw, err := pcapgo.NewNgWriter(pw, layers.LinkTypeRaw)
				if err != nil {
					t.Fatal(err)
				}
				w, flush = nw, nw.Flush
			}
			if err := flush(); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			var r *Reader
			go func() {
				var err error
				r, err = NewReader(pr)
				if err == nil {
					var p Packet
					err = r.Next(&p)
				}
				got <- err
			}()
			// The first packet (a SYN) only: nothing follows it yet.
			rec := recs[0]
			ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, rec.timestampNs), CaptureLength: len(rec.data), Length: rec.wireBytes}
			if err := w.WritePacket(ci, rec.data); err != nil {
				t.Fatal(err)
			}
			if err := flush(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("the first packet: %v", err)
				}
			case <-time.After(10 * time.Second):
				pw.Close() // lets the reader go
				<-got
				t.Fatal("the record written into the pipe was not handed over before the next one came")
			}
			// Then three records in one write: each is handed over, the last
			// too, though no header follows it yet (the records read from
			// the bytes at hand stop before it and leave it to the general
			// path, which does not wait on a pipe).
			var burst bytes.Buffer
			var bw writer
			switch format {
			case "pcap":
				bw = pcapgo.NewWriter(&burst)
			case "pcapng":
				nw, err := pcapgo.NewNgWriterInterface(&burst, pcapgo.NgInterface{LinkType: layers.LinkTypeRaw, SnapLength: 65535}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{}})
				if err != nil {
					t.Fatal(err)
				}
				burst.Reset() // the section header and interface were written already
				bw, flush = nw, nw.Flush
			}
			for _, rec := range recs[1:4] {
				ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, rec.timestampNs), CaptureLength: len(rec.data), Length: rec.wireBytes}
				if err := bw.WritePacket(ci, rec.data); err != nil {
					t.Fatal(err)
				}
			}
			if err := flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := pw.Write(burst.Bytes()); err != nil {
				t.Fatal(err)
			}
			go func() {
				var p Packet
				for range 3 {
					if err := r.Next(&p); err != nil {
						got <- err
						return
					}
				}
				got <- nil
			}()
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("the three records written at once: %v", err)
				}
			case <-time.After(10 * time.Second):
				pw.Close()
				<-got
				t.Fatal("the last of three records written at once was not handed over before the next one came")
			}
			pw.Close()
			var p Packet
			if err := r.Next(&p); !errors.Is(err, io.EOF) {
				t.Errorf("after the writer closed: %v, want io.EOF", err)
			}
		})
	}
}
