package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestAnalyzeSummaryTable: analyze ends with a table of the capture's
// connections, one line each (as tshark -z conv,tcp lists them). Read
// independently, tshark's TCP payload bytes of each direction (retransmissions
// left out) are the table's bytes to the server and to the client.
func TestAnalyzeSummaryTable(t *testing.T) {
	const capture = "../../testdata/realworld/cs__http_espn.pcapng"
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (Debian package tshark)")
	}
	code, out, errOut := runCLI(t, "analyze", capture)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, table, ok := strings.Cut(out, "Summary of the 25 connections:\n")
	if !ok {
		t.Fatalf("no summary table of the 25 connections:\n%s", out)
	}
	lines := strings.Split(table, "\n")
	if h := strings.Fields(lines[0]); len(h) < 2 || h[0] != "#" || h[1] != "transport" {
		t.Fatalf("header %q", lines[0])
	}
	type row struct{ toServer, toClient int64 }
	rows := map[string]row{} // by client
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 {
			break
		}
		toServer, err1 := strconv.ParseInt(f[4], 10, 64)
		toClient, err2 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %q", l)
		}
		rows[f[2]] = row{toServer, toClient}
	}
	if len(rows) != 25 {
		t.Fatalf("%d rows, want 25:\n%s", len(rows), table)
	}
	// tshark: payload bytes per connection and direction, and which
	// connections had retransmissions (their sums would count bytes twice).
	fields, err := exec.Command(tshark, "-r", capture, "-Y", "tcp", "-T", "fields", "-E", "separator=,",
		"-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport", "-e", "tcp.len", "-e", "tcp.analysis.retransmission").Output()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]*row{}
	retransmitted := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(fields)), "\n") {
		f := strings.Split(l, ",")
		src, dst := f[0]+":"+f[1], f[2]+":"+f[3]
		n, _ := strconv.ParseInt(f[4], 10, 64)
		client, toServer := src, true
		if _, ok := rows[dst]; ok {
			client, toServer = dst, false
		}
		if sums[client] == nil {
			sums[client] = &row{}
		}
		if f[5] != "" {
			retransmitted[client] = true
		}
		if toServer {
			sums[client].toServer += n
		} else {
			sums[client].toClient += n
		}
	}
	compared := 0
	for client, r := range rows {
		s := sums[client]
		if s == nil {
			t.Errorf("%s: not a connection for tshark", client)
			continue
		}
		if retransmitted[client] {
			continue
		}
		compared++
		if *s != r {
			t.Errorf("%s: %d bytes to the server, %d to the client; tshark's payloads: %d and %d", client, r.toServer, r.toClient, s.toServer, s.toClient)
		}
	}
	if compared < 20 {
		t.Errorf("only %d connections without retransmissions compared", compared)
	}
	// A single connection has no table: its own report sums it up.
	if _, out, _ := runCLI(t, "analyze", iw3Capture); strings.Contains(out, "Summary of the") {
		t.Errorf("a table for one connection:\n%s", out)
	}
}
