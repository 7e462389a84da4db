package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/testroot"
)

// TestProbeReadsAsAnalyze: the Report probe makes from its live capture and the
// one analyze makes from the pcap probe wrote of the same packets agree on every
// connection field the capture decides (one streaming analysis serves both).
func TestProbeReadsAsAnalyze(t *testing.T) {
	testroot.Require(t, "a live capture")
	body := strings.Repeat("x", 300_000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		fmt.Fprint(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	pcap := filepath.Join(t.TempDir(), "probe.pcap")
	code, out, errOut := runCLI(t, "probe", "--json", "--pcap", pcap, "http://"+ln.Addr().String()+"/page")
	if code != exitOK {
		t.Fatalf("probe: exit %d: %s", code, errOut)
	}
	fromProbe := connectionFields(t, out)
	code, out, errOut = runCLI(t, "analyze", "--json", pcap)
	if code != exitOK {
		t.Fatalf("analyze: exit %d: %s", code, errOut)
	}
	fromAnalyze := connectionFields(t, out)
	if len(fromProbe) == 0 || len(fromProbe) != len(fromAnalyze) {
		t.Fatalf("probe reported %d connections, analyze of its pcap %d", len(fromProbe), len(fromAnalyze))
	}
	for i := range fromProbe {
		for _, field := range []string{"client", "server", "vantage", "handshake_rtt_ms", "mss", "bytes_to_server", "bytes_to_client",
			"retransmissions", "initial_window", "round_trips", "rounds"} {
			if !reflect.DeepEqual(fromProbe[i][field], fromAnalyze[i][field]) {
				t.Errorf("connection %d %s: probe %v, analyze of its pcap %v", i+1, field, fromProbe[i][field], fromAnalyze[i][field])
			}
		}
	}
	if rounds, _ := fromAnalyze[0]["rounds"].([]any); len(rounds) == 0 {
		t.Errorf("no rounds read: the comparison checks nothing")
	}
	if got := fromAnalyze[0]["bytes_to_client"].(float64); got < float64(len(body)) {
		t.Errorf("bytes to the client %v, less than the body's %d", got, len(body))
	}
}

func connectionFields(t *testing.T, out string) []map[string]any {
	t.Helper()
	var doc struct {
		Connections []map[string]any `json:"connections"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not a Report: %v\n%.300s", err, out)
	}
	return doc.Connections
}
