package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
)

// TestInputExitCodes: what the README's table promises for inputs that can't
// be read whole, and for values that don't fit the input: a file cut inside
// its header or a record, a directory, a symbolic link loop exit 3 (the cut
// record after its report and a warning); a --connection or --server that
// matches nothing, an address view can't serve on and an exact MSS out of
// range exit 2, before anything is printed.
func TestInputExitCodes(t *testing.T) {
	dir := t.TempDir()
	whole, err := os.ReadFile(iw3Capture)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cutHeader := write("cut-header.pcap", whole[:10])
	starts := []int{24}
	for at := 24; at+16 <= len(whole); {
		at += 16 + int(uint32(whole[at+8])|uint32(whole[at+9])<<8|uint32(whole[at+10])<<16|uint32(whole[at+11])<<24)
		starts = append(starts, at)
	}
	cutRecord := write("cut-record.pcap", whole[:starts[len(starts)/2]+20])
	cutRecordHeader := write("cut-record-header.pcap", whole[:starts[len(starts)/2]+5])
	aDir := filepath.Join(dir, "captures")
	if err := os.Mkdir(aDir, 0o755); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(dir, "loop1")
	if err := os.Symlink(filepath.Join(dir, "loop2"), loop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loop, filepath.Join(dir, "loop2")); err != nil {
		t.Fatal(err)
	}
	// An address of no interface of this machine: TEST-NET-1 (RFC 5737).
	notHere := "192.0.2.99"
	if ifaceAddrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaceAddrs {
			if strings.HasPrefix(a.String(), notHere+"/") {
				t.Fatalf("%s is an address of this machine", notHere)
			}
		}
	}
	cases := []struct {
		name       string
		args       []string
		code       int
		says       string
		printsSome bool // the report of what was readable comes first
	}{
		{"cut inside its header", []string{"analyze", cutHeader}, exitFile, "ends inside its header", false},
		{"cut inside a record", []string{"analyze", cutRecord}, exitFile, "ends inside a record", true},
		{"cut inside a record header", []string{"analyze", cutRecordHeader}, exitFile, "ends inside a record", true},
		{"cut inside a record, JSON", []string{"analyze", "--json", cutRecord}, exitFile, "ends inside a record", true},
		{"a directory", []string{"analyze", aDir}, exitFile, "is a directory", false},
		{"a directory to view", []string{"view", "--html", filepath.Join(dir, "v.html"), aDir}, exitFile, "is a directory", false},
		{"a symbolic link loop", []string{"analyze", loop}, exitFile, "too many levels of symbolic links", false},
		{"--connection matching none", []string{"analyze", "--connection", "99", iw3Capture}, exitUsage, "--connection 99", false},
		{"--connection matching none, JSON", []string{"analyze", "--json", "--connection", "99", iw3Capture}, exitUsage, "--connection 99", false},
		{"--server matching none", []string{"analyze", "--server", "198.51.100.9:99", iw3Capture}, exitUsage, "no connection of the capture has that server", false},
		{"--server matching none, CSV", []string{"analyze", "--csv", "--server", "198.51.100.9:99", iw3Capture}, exitUsage, "no connection of the capture has that server", false},
		{"--listen on no address of this machine", []string{"view", "--listen", notHere, iw3Capture}, exitUsage, "not an address of this machine", false},
		{"--exact --mss 10", []string{"probe", "--exact", "--mss", "10", "http://192.0.2.1/"}, exitUsage, "MSS 10", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(errOut, c.says) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, c.code, c.says)
			}
			if printed := out != ""; printed != c.printsSome {
				t.Errorf("printed %q; want a report: %v", out, c.printsSome)
			}
			if strings.Contains(errOut, "Measuring") {
				t.Errorf("said it measures before refusing: %q", errOut)
			}
		})
	}
}

// TestExactWithoutReadingFails: an exact measurement that gets no reading (a
// server that accepts and never answers) prints what each run saw and exits
// 1, not 0.
func TestExactWithoutReadingFails(t *testing.T) {
	testroot.Require(t, "nftables and a live capture")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // accepted, never answered
		}
	}()
	start := time.Now()
	code, out, errOut := runCLI(t, "probe", "--exact", "--exact-runs", "1", "--timeout", "3s", "http://"+ln.Addr().String()+"/")
	if code != exitFailure || !strings.Contains(out, "unknown (none)") || !strings.Contains(errOut, "no initial window") {
		t.Errorf("exit %d after %v, stdout %q, stderr %q; want 1, the runs shown, and why", code, time.Since(start), out, errOut)
	}
}
