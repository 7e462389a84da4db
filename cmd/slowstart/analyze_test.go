package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// severalCapture is a real capture with hundreds of connections, some of them
// open across any split point.
const severalCapture = "../../testdata/realworld/pp__tls2.pcap"

// splitCapture writes the records of src into two pcap files: the first half
// and the rest, as a capture rotated mid-way would be.
func splitCapture(t *testing.T, src string) (string, string, int) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	type record struct {
		data []byte
		ci   gopacket.CaptureInfo
	}
	var all []record
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		all = append(all, record{data, ci})
	}
	if len(all) < 100 {
		t.Fatalf("%s: only %d records", src, len(all))
	}
	dir := t.TempDir()
	half := len(all) / 2
	var names []string
	for i, part := range [][]record{all[:half], all[half:]} {
		name := filepath.Join(dir, []string{"a.pcap", "b.pcap"}[i])
		out, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w := pcapgo.NewWriterNanos(out)
		if err := w.WriteFileHeader(r.Snaplen(), r.LinkType()); err != nil {
			t.Fatal(err)
		}
		for _, p := range part {
			if err := w.WritePacket(p.ci, p.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names[0], names[1], len(all)
}

func connectionsOf(t *testing.T, args []string, out string) []any {
	t.Helper()
	var doc struct {
		Connections []any `json:"connections"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return doc.Connections
}

// TestAnalyzeSeveralFilesAndStdin: a capture cut in two and given as two files
// reads exactly as the whole file (every connection, byte for byte in JSON, the
// ones open across the cut included), and so does the file piped to standard
// input.
func TestAnalyzeSeveralFilesAndStdin(t *testing.T) {
	a, b, records := splitCapture(t, severalCapture)
	whole := []string{"analyze", "--json", severalCapture}
	code, out, errOut := runCLI(t, whole...)
	if code != exitOK {
		t.Fatalf("%v: exit %d: %s", whole, code, errOut)
	}
	want := connectionsOf(t, whole, out)
	if len(want) < 100 {
		t.Fatalf("the whole capture reads %d connections; the test wants many", len(want))
	}
	// Given in either order: the files are merged by time, not by argument order.
	for _, args := range [][]string{{"analyze", "--json", a, b}, {"analyze", "--json", b, a}} {
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		got := connectionsOf(t, args, out)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v (%d records cut at %d): %d connections differ from the whole file's %d", args, records, records/2, len(got), len(want))
		}
		var doc struct {
			Source struct {
				Paths   []string `json:"paths"`
				Packets int      `json:"packets"`
			} `json:"source"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Source.Paths) != 2 || doc.Source.Packets != records {
			t.Errorf("%v: source paths %v, %d packets; want both files and %d", args, doc.Source.Paths, doc.Source.Packets, records)
		}
	}

	in, err := os.Open(severalCapture)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	oldIn := os.Stdin
	os.Stdin = in
	code, out, errOut = runCLI(t, "analyze", "--json", "-")
	os.Stdin = oldIn
	if code != exitOK {
		t.Fatalf("analyze -: exit %d: %s", code, errOut)
	}
	if got := connectionsOf(t, nil, out); !reflect.DeepEqual(got, want) {
		t.Errorf("standard input: %d connections differ from the file's %d", len(got), len(want))
	}

	if code, _, errOut := runCLI(t, "analyze", "-", a); code != exitUsage {
		t.Errorf("analyze - FILE: exit %d (%s), want %d", code, errOut, exitUsage)
	}
}
