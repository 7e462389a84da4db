//go:build linux

package labserver

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/report"
)

// compareBrowserWithTshark: tshark's decryption of the capture with the key log
// shows the same requests on each connection (by client port) with the same
// statuses, and each response ends in the packet where slowstart says it does.
func compareBrowserWithTshark(t *testing.T, rep *report.Report, pcap, keys string) {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (Debian package tshark)")
	}
	type exchange struct {
		path   string
		status int
	}
	// tshark: HTTP/1.1 requests and responses in order per connection; HTTP/2
	// streams' :path and :status; the time of each response's last packet.
	args := []string{"-r", pcap, "-o", "tls.keylog_file:" + keys, "-o", "tcp.reassemble_out_of_order:TRUE", "-Y", "http || http2",
		"-T", "fields", "-E", "separator=/t", "-e", "frame.time_epoch", "-e", "tcp.srcport", "-e", "tcp.dstport",
		"-e", "http.request.uri", "-e", "http.response.code", "-e", "http2.streamid", "-e", "http2.type", "-e", "http2.headers.path",
		"-e", "http2.headers.status", "-e", "http2.flags.end_stream"}
	cmd := exec.Command("tshark", args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	type conn struct {
		h1Paths, h2Order []string
		h1Status         []int
		h1Ends           []float64
		h2               map[string]*exchange
		h2End            map[string]float64
	}
	conns := map[int]*conn{}
	get := func(port int) *conn {
		if conns[port] == nil {
			conns[port] = &conn{h2: map[string]*exchange{}, h2End: map[string]float64{}}
		}
		return conns[port]
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		for len(f) < 10 {
			f = append(f, "")
		}
		at, _ := strconv.ParseFloat(f[0], 64)
		src, _ := strconv.Atoi(f[1])
		dst, _ := strconv.Atoi(f[2])
		toServer := dst == 443 || dst == SecondPort
		port := src
		if !toServer {
			port = dst
		}
		c := get(port)
		c.h1Paths = append(c.h1Paths, split(f[3])...)
		for _, code := range split(f[4]) {
			n, _ := strconv.Atoi(code)
			c.h1Status = append(c.h1Status, n)
			c.h1Ends = append(c.h1Ends, at)
		}
		ids, types, paths, statuses, ends := split(f[5]), split(f[6]), split(f[7]), split(f[8]), split(f[9])
		hi := 0
		for i := range min(len(ids), len(types)) {
			if ids[i] == "0" {
				continue
			}
			x := c.h2[ids[i]]
			if x == nil {
				x = &exchange{}
				c.h2[ids[i]] = x
				c.h2Order = append(c.h2Order, ids[i])
			}
			if types[i] == "1" {
				if toServer && hi < len(paths) {
					x.path = paths[hi]
				}
				if !toServer && hi < len(statuses) {
					x.status, _ = strconv.Atoi(statuses[hi])
				}
				hi++
			}
			if !toServer && i < len(ends) && ends[i] == "1" {
				c.h2End[ids[i]] = at
			}
		}
	}
	compared := 0
	for _, rc := range rep.Connections {
		a, _ := netip.ParseAddrPort(rc.Client)
		c := get(int(a.Port()))
		var theirs []exchange
		var ends []float64
		for i, p := range c.h1Paths {
			x := exchange{path: p}
			if i < len(c.h1Status) {
				x.status = c.h1Status[i]
				ends = append(ends, c.h1Ends[i])
			}
			theirs = append(theirs, x)
		}
		for _, id := range c.h2Order {
			theirs = append(theirs, *c.h2[id])
			ends = append(ends, c.h2End[id])
		}
		var ours []exchange
		for _, m := range rc.HTTP {
			ours = append(ours, exchange{path: m.Path, status: m.Status})
		}
		if fmt.Sprint(ours) != fmt.Sprint(theirs) {
			t.Errorf("connection %d (%s): slowstart %v, tshark %v", rc.Index, rc.Client, ours, theirs)
			continue
		}
		start := float64(rrStartNs(rep, rc)) / 1e9
		for i, m := range rc.HTTP {
			if m.LastByteMs == nil || i >= len(ends) {
				continue
			}
			compared++
			// tshark shows a response at the packet that completes it; slowstart's
			// last byte is that packet's time.
			if d := math.Abs(start+*m.LastByteMs/1e3-ends[i]) * 1e3; d > 0.01 {
				t.Errorf("connection %d %s: last byte at %.3f ms, tshark's response ends %.3f ms apart", rc.Index, m.Path, *m.LastByteMs, d)
			}
		}
	}
	if compared == 0 {
		t.Error("no response compared with tshark")
	}
}

// rrStartNs is the Unix time of a connection's first packet (its time 0).
func rrStartNs(rep *report.Report, c report.Connection) int64 {
	return rep.Source.StartUnixNs + int64(math.Round(c.StartMs*1e6))
}
