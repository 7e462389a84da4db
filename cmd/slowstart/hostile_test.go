package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The hostile-input set: inputs made to cost time or memory (a record header
// claiming gigabytes, zeros without end, a SYN flood, JSON nested thousands
// deep, a HAR placing tens of thousands of requests, a key log of random
// bytes), each given to the built binary as a user would, under an address
// space limit (so that a regression fails instead of swapping the machine),
// and held to bounds of CPU time and peak resident memory (docs/security.md
// states them as the contract). The bounds are generous (several times what
// the binary takes today, on a busy machine) and far below what each input
// cost before its limit existed, which the comments give.

// hostileAddressSpaceBytes limits the child's address space: the Go runtime
// reserves some 1.8 GiB of it for a heap of a few megabytes (measured: 1.9 GiB
// of address space for 170 MiB resident), so this leaves about 2 GiB of memory
// to a run, past which it fails with "out of memory" rather than swapping.
// The bounds of each case are far tighter; this is the net under them.
const hostileAddressSpaceBytes = 4 << 30

// bounds are what a run may cost.
type bounds struct {
	cpu     time.Duration // user + system CPU time
	rssMiB  int64         // peak resident set
	exit    int           // the exit code expected
	stderr  string        // a phrase standard error holds ("" for none)
	timeout time.Duration // wall clock before the run is killed (default 2 minutes)
}

// runCost is what a run of the binary cost.
type runCost struct {
	exit           int
	stdout, stderr string
	cpu            time.Duration
	rssMiB         int64
}

// runBounded runs the built binary with args (stdin when not nil) under the
// address space limit and returns what it cost; it fails the test when the
// run is past its bounds. GNU time measures it: a process forked from the
// test would count the test's own memory as its peak (Linux keeps the high
// water mark of the image it replaced), one forked from time does not.
func runBounded(t *testing.T, b bounds, stdin io.Reader, args ...string) runCost {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit is not installed (Debian package util-linux): it runs the binary under a memory limit")
	}
	timeCmd := "/usr/bin/time"
	if _, err := os.Stat(timeCmd); err != nil {
		t.Skip("GNU time is not installed (Debian package time): it measures the binary's CPU time and peak memory")
	}
	if b.timeout == 0 {
		b.timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	measured := filepath.Join(t.TempDir(), "time")
	cmd := exec.CommandContext(ctx, timeCmd, append([]string{"-f", "%U %S %M", "-o", measured,
		prlimit, fmt.Sprintf("--as=%d", hostileAddressSpaceBytes), "--", builtBinary(t)}, args...)...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		t.Fatalf("%v: %v", args, runErr)
	}
	c := runCost{exit: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	name := strings.Join(args, " ")
	if len(name) > 120 {
		name = name[:120] + "..."
	}
	if ctx.Err() != nil {
		t.Errorf("%s: still running after %v (killed)", name, b.timeout)
		return c
	}
	// time's last line: "USER SYSTEM MAXRSS" (seconds, seconds, KiB); a line
	// before it says when the command exited with a non-zero status.
	data, err := os.ReadFile(measured)
	if err != nil {
		t.Fatalf("%s: reading time's measurement: %v", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var user, system float64
	if _, err := fmt.Sscanf(lines[len(lines)-1], "%f %f %d", &user, &system, &c.rssMiB); err != nil {
		t.Fatalf("%s: time's measurement %q: %v", name, data, err)
	}
	c.cpu = time.Duration((user + system) * float64(time.Second))
	c.rssMiB >>= 10
	t.Logf("%s: exit %d, %.2f s of CPU, %d MiB at most", name, c.exit, c.cpu.Seconds(), c.rssMiB)
	switch {
	case c.exit != b.exit:
		t.Errorf("%s: exit %d, want %d; stderr %q", name, c.exit, b.exit, tail(c.stderr))
	case b.stderr != "" && !strings.Contains(c.stderr, b.stderr):
		t.Errorf("%s: stderr %q lacks %q", name, tail(c.stderr), b.stderr)
	}
	if c.cpu > b.cpu {
		t.Errorf("%s: %.1f s of CPU, more than %v", name, c.cpu.Seconds(), b.cpu)
	}
	if c.rssMiB > b.rssMiB {
		t.Errorf("%s: %d MiB resident at most, more than %d MiB", name, c.rssMiB, b.rssMiB)
	}
	return c
}

// tail shortens a long standard error to its start and end.
func tail(s string) string {
	if len(s) > 800 {
		return s[:400] + " ... " + s[len(s)-400:]
	}
	return s
}

// pcapHeader is a pcap file header (microseconds, little-endian) with a
// snaplen and a link type.
func pcapHeader(snaplen uint32, linkType uint32) []byte {
	h := binary.LittleEndian.AppendUint32(nil, 0xa1b2c3d4)
	h = binary.LittleEndian.AppendUint16(h, 2)
	h = binary.LittleEndian.AppendUint16(h, 4)
	h = binary.LittleEndian.AppendUint64(h, 0)
	h = binary.LittleEndian.AppendUint32(h, snaplen)
	return binary.LittleEndian.AppendUint32(h, linkType)
}

// pcapRecord appends a record of data at Unix time ns.
func pcapRecord(out []byte, ns int64, data []byte) []byte {
	out = binary.LittleEndian.AppendUint32(out, uint32(ns/1e9))
	out = binary.LittleEndian.AppendUint32(out, uint32(ns%1e9/1e3))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(data)))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(data)))
	return append(out, data...)
}

// tcpPacket is an IPv4 packet (link type RAW) carrying a TCP segment.
func tcpPacket(src, dst [4]byte, sport, dport uint16, seq, ack uint32, flags byte, payload []byte) []byte {
	p := make([]byte, 40, 40+len(payload))
	p[0], p[8], p[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(p[2:], uint16(40+len(payload)))
	copy(p[12:16], src[:])
	copy(p[16:20], dst[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	t := p[20:]
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12], t[13] = 5<<4, flags
	binary.BigEndian.PutUint16(t[14:], 65535)
	return append(p, payload...)
}

const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagPSH = 0x08
	flagACK = 0x10
)

// hostileBaseNs is the hostile captures' first packet time.
const hostileBaseNs = int64(1_700_000_000) * 1e9

// TestHostileCaptures: captures made to cost memory and time, to analyze and
// view.
func TestHostileCaptures(t *testing.T) {
	dir := t.TempDir()
	// A header that declares a 4 GiB snaplen and a first record of 2 GiB,
	// then 512 MiB of zeros (a sparse file: no disk used). Before the record
	// limit, the reader grew a buffer to the file's end a megabyte at a time
	// with a copy each step (632 MB and no output after 20 s on 2 GiB).
	claim := pcapHeader(1<<32-1, 101)
	claim = binary.LittleEndian.AppendUint32(claim, 1000)
	claim = binary.LittleEndian.AppendUint32(claim, 0)
	claim = binary.LittleEndian.AppendUint32(claim, 1<<31-1)
	claim = binary.LittleEndian.AppendUint32(claim, 1<<31-1)
	sparse := filepath.Join(dir, "claims-2GiB.pcap")
	if err := os.WriteFile(sparse, claim, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, int64(len(claim))+512<<20); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 10 * time.Second, rssMiB: 100, exit: exitFile, stderr: "damaged"}, nil, "analyze", sparse)

	// The same header, then zeros on standard input (as from /dev/zero):
	// read at the speed of the pipe in the memory of the read buffer
	// (before: 571 MB after 20 s).
	runBounded(t, bounds{cpu: 10 * time.Second, rssMiB: 100, exit: exitFile, stderr: "damaged"},
		io.MultiReader(bytes.NewReader(claim), io.LimitReader(zeroReader{}, 512<<20)), "analyze", "-")

	// The same, gzip-compressed: 512 MiB of zeros in half a megabyte (before:
	// 786 MB after 60 s on a 4 GiB bomb).
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestSpeed)
	zw.Write(claim)
	io.Copy(zw, io.LimitReader(zeroReader{}, 512<<20))
	zw.Close()
	bombPath := filepath.Join(dir, "bomb.pcap.gz")
	if err := os.WriteFile(bombPath, bomb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 15 * time.Second, rssMiB: 100, exit: exitFile, stderr: "damaged"}, nil, "analyze", bombPath)

	// A pcapng enhanced packet block of 8 MiB: longer than any record
	// (capture.MaxRecordBytes), damage skipped at once.
	ng := pcapngOf(t, 8<<20)
	ngPath := filepath.Join(dir, "big-block.pcapng")
	if err := os.WriteFile(ngPath, ng, 0o644); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 5 * time.Second, rssMiB: 100, exit: exitFile, stderr: "damaged"}, nil, "analyze", ngPath)

	// A SYN flood: 2^16 unanswered SYNs 50 µs apart, all open at once (a SYN
	// is given up after 130 s of capture time). analyze keeps them compact;
	// the page of view and analyze --html did not (a full connection and
	// packet list each: 1.1 GB for 2^19 where analyze took 160 MB).
	flood := pcapHeader(65535, 101)
	for i := range 1 << 16 {
		src := [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
		flood = pcapRecord(flood, hostileBaseNs+int64(i)*50e3, tcpPacket(src, [4]byte{192, 0, 2, 1}, uint16(10000+i%50000), 443, uint32(i)*7, 0, flagSYN, nil))
	}
	floodPath := filepath.Join(dir, "syn-flood.pcap")
	if err := os.WriteFile(floodPath, flood, 0o644); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 60 * time.Second, rssMiB: 250, exit: exitOK}, nil, "analyze", floodPath)
	runBounded(t, bounds{cpu: 60 * time.Second, rssMiB: 250, exit: exitOK}, nil, "view", "--html", filepath.Join(dir, "flood.html"), floodPath)
	runBounded(t, bounds{cpu: 60 * time.Second, rssMiB: 250, exit: exitOK}, nil, "analyze", "--html", filepath.Join(dir, "flood2.html"), floodPath)
}

// TestHostileViewJSON: a file that starts as a Report and goes on for 600
// MiB (zeros of a sparse file) is refused before it is read (it was read whole
// into memory).
func TestHostileViewJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge-report.json")
	if err := os.WriteFile(path, []byte(`{"schema":"slowstart.report/v1","connections":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 600<<20); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 10 * time.Second, rssMiB: 100, exit: exitFile, stderr: "too much for one page"}, nil, "view", "--html", path+".html", path)
}

// pcapngOf is a pcapng file with one interface and one enhanced packet block
// whose packet is packetBytes long, then a small good packet.
func pcapngOf(t *testing.T, packetBytes int) []byte {
	t.Helper()
	le := binary.LittleEndian
	block := func(out []byte, blockType uint32, body []byte) []byte {
		n := uint32(12 + len(body))
		out = le.AppendUint32(out, blockType)
		out = le.AppendUint32(out, n)
		out = append(out, body...)
		return le.AppendUint32(out, n)
	}
	shb := le.AppendUint32(nil, 0x1a2b3c4d)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, ^uint64(0))
	out := block(nil, 0x0a0d0d0a, shb)
	idb := le.AppendUint16(nil, 101) // link type RAW
	idb = le.AppendUint16(idb, 0)
	idb = le.AppendUint32(idb, 0)
	out = block(out, 1, idb)
	epb := func(data []byte) []byte {
		b := le.AppendUint32(nil, 0)
		b = le.AppendUint64(b, 0)
		b = le.AppendUint32(b, uint32(len(data)))
		b = le.AppendUint32(b, uint32(len(data)))
		return append(b, data...)
	}
	out = block(out, 6, epb(make([]byte, packetBytes)))
	return block(out, 6, epb(tcpPacket([4]byte{10, 0, 0, 1}, [4]byte{192, 0, 2, 1}, 40000, 80, 1, 0, flagSYN, nil)))
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestHostileCompareInputs: lines of "trials" nested thousands deep, and an
// endless input.
func TestHostileCompareInputs(t *testing.T) {
	dir := t.TempDir()
	// 40 lines of trials nested 4,500 deep (2.3 MB): each level decoded its
	// value again (over 120 s before the nesting limit).
	line := strings.Repeat(`{"trials":[`, 4500) + `{"point":"p","fct_user_ms":1}` + strings.Repeat(`]}`, 4500) + "\n"
	nested := filepath.Join(dir, "nested.jsonl")
	if err := os.WriteFile(nested, []byte(strings.Repeat(line, 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 5 * time.Second, rssMiB: 150, exit: exitFile, stderr: "nested"}, nil, "compare", nested, nested)
	// An endless input: read whole into memory before (5.2 GB after 20 s).
	runBounded(t, bounds{cpu: 10 * time.Second, rssMiB: 400, exit: exitFile, stderr: "too large"}, nil, "compare", "/dev/zero", nested)
}

// TestHostileKeyLogs: a key log of random bytes (read forever before), one
// with a line of 2 MiB (refused whole before), to analyze.
func TestHostileKeyLogs(t *testing.T) {
	dir := t.TempDir()
	runBounded(t, bounds{cpu: 5 * time.Second, rssMiB: 100, exit: exitFile, stderr: "not an NSS key log", timeout: 30 * time.Second},
		nil, "analyze", "--keylog", "/dev/urandom", iw3Capture)
	long := "CLIENT_RANDOM " + strings.Repeat("ab", 32) + " " + strings.Repeat("01", 48) + "\n# " + strings.Repeat("x", 2<<20) + "\n"
	path := filepath.Join(dir, "long-line.keys")
	if err := os.WriteFile(path, []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	runBounded(t, bounds{cpu: 5 * time.Second, rssMiB: 100, exit: exitOK}, nil, "analyze", "--keylog", path, iw3Capture)
}

// TestHostileHAR: HARs that made placing a page quadratic and worse: 2,000
// requests naming 1,000 connections to one server by their start (over 200 s
// before), 20,000 requests of one path on 20,000 decrypted-as-cleartext HTTP
// exchanges to one server, and one more request than a page may have.
func TestHostileHAR(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name        string
		conns, reqs int
		samePath    bool
		b           bounds
	}{
		{"2000 requests on 1000 connections", 1000, 2000, false, bounds{cpu: 20 * time.Second, rssMiB: 300, exit: exitOK}},
		{"20000 requests of one path", 20000, 20000, true, bounds{cpu: 60 * time.Second, rssMiB: 600, exit: exitOK}},
		{"20001 requests", 10, 20001, false, bounds{cpu: 20 * time.Second, rssMiB: 300, exit: exitFile, stderr: "more than 20000 requests"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcap, har := hostilePageLoad(t, dir, tc.conns, tc.reqs, tc.samePath)
			runBounded(t, tc.b, nil, "analyze", "--har", har, pcap)
		})
	}
}

// hostilePageLoad writes a capture of conns HTTP/1.1 connections to one
// server, 10 ms apart, and a HAR of reqs requests to that server, each naming
// its connection by the start of its connect (and by an id that is no client
// port); with samePath every exchange asks the same path.
func hostilePageLoad(t *testing.T, dir string, conns, reqs int, samePath bool) (pcapPath, harPath string) {
	t.Helper()
	client, server := [4]byte{10, 0, 0, 1}, [4]byte{192, 0, 2, 1}
	out := pcapHeader(65535, 101)
	request := []byte("GET /same HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n")
	response := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	for i := range conns {
		at := hostileBaseNs + int64(i)*10e6
		sport := uint16(20000 + i%40000)
		rec := func(offsetUs int64, p []byte) { out = pcapRecord(out, at+offsetUs*1e3, p) }
		rec(0, tcpPacket(client, server, sport, 80, 1000, 0, flagSYN, nil))
		rec(1000, tcpPacket(server, client, 80, sport, 5000, 1001, flagSYN|flagACK, nil))
		rec(2000, tcpPacket(client, server, sport, 80, 1001, 5001, flagACK, nil))
		if samePath {
			rec(2500, tcpPacket(client, server, sport, 80, 1001, 5001, flagPSH|flagACK, request))
			rec(3000, tcpPacket(server, client, 80, sport, 5001, 1001+uint32(len(request)), flagPSH|flagACK, response))
		} else {
			rec(3000, tcpPacket(server, client, 80, sport, 5001, 1001, flagPSH|flagACK, make([]byte, 100)))
		}
		rec(4000, tcpPacket(client, server, sport, 80, 1001, 5200, flagFIN|flagACK, nil))
		rec(5000, tcpPacket(server, client, 80, sport, 5200, 1002, flagFIN|flagACK, nil))
		rec(6000, tcpPacket(client, server, sport, 80, 1002, 5201, flagACK, nil))
	}
	pcapPath = filepath.Join(dir, fmt.Sprintf("page-%d-%d.pcap", conns, reqs))
	if err := os.WriteFile(pcapPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	type obj = map[string]any
	var entries []obj
	for j := range reqs {
		i := j % conns
		path := fmt.Sprintf("/r%d", j)
		if samePath {
			path = "/same"
		}
		mime := "text/css"
		if j == 0 {
			mime = "text/html"
		}
		entries = append(entries, obj{
			"startedDateTime": time.Unix(0, hostileBaseNs+int64(i)*10e6).UTC().Format(time.RFC3339Nano),
			"time":            6,
			"request":         obj{"method": "GET", "url": "http://192.0.2.1" + path, "httpVersion": "HTTP/1.1", "headers": []obj{}, "cookies": []obj{}, "queryString": []obj{}, "headersSize": -1, "bodySize": 0},
			"response":        obj{"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": []obj{}, "cookies": []obj{}, "content": obj{"size": 100, "mimeType": mime}, "redirectURL": "", "headersSize": -1, "bodySize": 100},
			"cache":           obj{},
			"timings":         obj{"blocked": 0, "dns": 0, "connect": 1, "send": 1, "wait": 1, "receive": 1},
			"serverIPAddress": "192.0.2.1",
			"connection":      fmt.Sprintf("c%d", j),
			"_renderBlocking": "blocking",
		})
	}
	data, err := json.Marshal(obj{"log": obj{"version": "1.2", "creator": obj{"name": "hostile", "version": "1"}, "entries": entries}})
	if err != nil {
		t.Fatal(err)
	}
	harPath = filepath.Join(dir, fmt.Sprintf("page-%d-%d.har", conns, reqs))
	if err := os.WriteFile(harPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return pcapPath, harPath
}
