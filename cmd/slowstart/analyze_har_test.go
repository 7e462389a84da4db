package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/pageload"
)

const browserCapture = "../../testdata/browser/tiny-h2-second-host"

// accessEntry is a line of the capture's nginx access log (testdata/browser).
type accessEntry struct {
	client netip.AddrPort
	path   string
	status int
	bytes  int64
}

var accessLineFormat = regexp.MustCompile(`^\S+ \d+ (\S+) (\d+) "\S+ (\S+) \S+" (\d+) (\d+) \d+$`)

func readAccessEntries(t *testing.T, path string) map[string]accessEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]accessEntry{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		m := accessLineFormat.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("access log line %q", line)
		}
		port, _ := strconv.Atoi(m[2])
		e := accessEntry{client: netip.AddrPortFrom(netip.MustParseAddr(m[1]), uint16(port)), path: m[3]}
		e.status, _ = strconv.Atoi(m[4])
		e.bytes, _ = strconv.ParseInt(m[5], 10, 64)
		out[e.path] = e
	}
	return out
}

// TestAnalyzeHAR: analyze --har places each of the HAR's requests on the
// connection nginx logged it on, with the key log (by the decrypted requests) and
// without it (by address, port and time); with the key log, the bytes are
// nginx's $bytes_sent.
func TestAnalyzeHAR(t *testing.T) {
	t.Setenv("SSLKEYLOGFILE", "")
	logged := readAccessEntries(t, browserCapture+".access.log")
	// As a browser writes it: connection ids of its own, not client ports, and
	// none of slowstart's extensions.
	foreign := foreignHAR(t, browserCapture+".har")
	for _, keyed := range []bool{true, false} {
		args := []string{"analyze", "--json", "--har", foreign, browserCapture + ".pcap"}
		if keyed {
			args = []string{"analyze", "--json", "--har", browserCapture + ".har", "--keylog", browserCapture + ".keys", browserCapture + ".pcap"}
		}
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		checkSchema(t, "pageload", "analyze --har --json", out)
		var p pageload.Page
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		clients := map[int]string{}
		for _, c := range p.Report.Connections {
			clients[c.Index] = c.Client
		}
		if len(p.Requests) != len(logged) {
			t.Errorf("keylog %t: %d requests, nginx logged %d", keyed, len(p.Requests), len(logged))
		}
		for _, r := range p.Requests {
			e, ok := logged[r.Path]
			if !ok {
				t.Errorf("keylog %t: %s is not in nginx's log", keyed, r.Path)
				continue
			}
			if clients[r.Connection] != e.client.String() {
				t.Errorf("keylog %t: %s on connection %d (%s), nginx logged it from %s", keyed, r.Path, r.Connection, clients[r.Connection], e.client)
			}
			if keyed && (r.Bytes != e.bytes || r.Status != e.status || len(r.Rounds) == 0) {
				t.Errorf("%s: status %d, %d bytes, rounds %v; nginx: %d, $bytes_sent %d", r.Path, r.Status, r.Bytes, r.Rounds, e.status, e.bytes)
			}
		}
		if p.CriticalPath.RoundTrips == 0 || len(p.CriticalPath.Steps) == 0 {
			t.Errorf("keylog %t: no critical path", keyed)
		}
	}
	code, _, _ := runCLI(t, "analyze", "--har", "../../testdata/tls/README.md", browserCapture+".pcap")
	if code != exitFile {
		t.Errorf("analyze --har of a file that is not a HAR: exit %d, want %d", code, exitFile)
	}
	code, _, _ = runCLI(t, "analyze", "--har", browserCapture+".har", "--connection", "1", browserCapture+".pcap")
	if code != exitUsage {
		t.Errorf("analyze --har --connection: exit %d, want %d", code, exitUsage)
	}
}

// foreignHAR rewrites a HAR slowstart wrote as a browser would have written it:
// each entry's connection an opaque id, no _connection, _rounds or _capture.
func foreignHAR(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	for _, e := range h["log"].(map[string]any)["entries"].([]any) {
		entry := e.(map[string]any)
		if c, ok := entry["connection"].(string); ok {
			entry["connection"] = "browser-" + c
		}
		for _, k := range []string{"_connection", "_rounds", "_capture", "_critical", "_blocking"} {
			delete(entry, k)
		}
	}
	out, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	name := t.TempDir() + "/foreign.har"
	if err := os.WriteFile(name, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}
