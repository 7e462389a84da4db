package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slowstart/slowstart/internal/testroot"
)

// pipeServer serves 20 KB on loopback; it returns its address.
func pipeServer(t *testing.T) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 20000)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr)
}

// startTcpdump runs tcpdump on loopback for the server's port, writing a
// packet-buffered pcap into a pipe, and returns the pipe's read end once
// tcpdump said it listens. tcpdump is stopped when the test ends.
func startTcpdump(t *testing.T, port int) *os.File {
	t.Helper()
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Fatalf("tcpdump is needed (make setup installs it): %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// Immediate mode hands packets over at once; its ring holds a few
	// snaplen-sized frames per megabyte, and bursts of 64 KB loopback
	// segments overflowed the default (2 MB, snaplen 256 KB) on a busy host:
	// headers and a little payload are all the analysis needs here.
	cmd := exec.Command(tcpdump, "-U", "--immediate-mode", "-B", "8192", "-s", "512", "-i", "lo", "-w", "-", "tcp port "+strconv.Itoa(port))
	cmd.Stdout = w
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close() // tcpdump has it
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		r.Close()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on") {
				said = true
				close(listening)
			}
			if strings.Contains(sc.Text(), "dropped by kernel") && !strings.HasPrefix(sc.Text(), "0 ") {
				t.Logf("tcpdump: %s", sc.Text())
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("tcpdump did not start listening")
	}
	return r
}

// fetchClosed makes one request on a connection of its own, closed after it.
func fetchClosed(t *testing.T, addr *net.TCPAddr) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
}

// TestAnalyzePipe: tcpdump writes a capture into a pipe that analyze - reads
// (the README's pipeline). Each connection comes out as it finishes while
// tcpdump is still running, in every output format; a SIGINT then reports what
// was read, a connection still open among them, and exits 130 with one line.
func TestAnalyzePipe(t *testing.T) {
	testroot.Require(t, "a live capture on loopback")
	type format struct {
		args []string
		// line is what marks connection n in the output.
		line func(n int) string
	}
	for name, f := range map[string]format{
		"jsonl": {[]string{"--jsonl"}, func(n int) string { return fmt.Sprintf(`{"schema":"slowstart.connection/v1","index":%d,`, n) }},
		"json":  {[]string{"--json"}, func(n int) string { return fmt.Sprintf(`"index": %d,`, n) }},
		"text":  {nil, func(n int) string { return fmt.Sprintf("Connection %d: 127.0.0.1:", n) }},
	} {
		t.Run(name, func(t *testing.T) {
			addr := pipeServer(t)
			pipe := startTcpdump(t, addr.Port)
			p := startBinaryStdin(t, pipe, nil, append([]string{"analyze", "-"}, f.args...)...)
			const closed = 3
			for n := 1; n <= closed; n++ {
				fetchClosed(t, addr)
				// Out while tcpdump still writes: within the linger (2 s
				// of quiet after the close) and a few ticks.
				p.waitLine(t, false, f.line(n), 20*time.Second)
			}
			// A connection left open, then one more closed one: when that
			// one is out, the open one's packets (captured before it) were
			// read too.
			open, err := net.Dial("tcp", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close()
			fmt.Fprintf(open, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(open), nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			fetchClosed(t, addr)
			p.waitLine(t, false, f.line(closed+2), 20*time.Second)

			code, after := p.signalAndWait(t, syscall.SIGINT, 20*time.Second)
			checkInterrupted(t, code, after, "reported what was read until then (5 connections)")
			out := strings.Join(p.out(false), "\n")
			if !strings.Contains(out, f.line(closed+1)) {
				t.Errorf("the connection still open at the signal is not reported:\n%s", out)
			}
			switch name {
			case "jsonl":
				for i, l := range p.out(false) {
					var c struct {
						Index         int   `json:"index"`
						BytesToClient int64 `json:"bytes_to_client"`
					}
					if err := json.Unmarshal([]byte(l), &c); err != nil || c.BytesToClient < 20000 {
						t.Errorf("line %d: %v, %d bytes to the client (want the 20 KB response): %s", i+1, err, c.BytesToClient, l)
					}
				}
			case "json":
				var rep struct {
					Connections []json.RawMessage `json:"connections"`
					Source      struct {
						Path string `json:"path"`
					} `json:"source"`
				}
				if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Connections) != closed+2 || rep.Source.Path != "standard input" {
					t.Errorf("the JSON document after the signal: %v, %d connections (want %d), source %q", err, len(rep.Connections), closed+2, rep.Source.Path)
				}
			}
		})
	}
}
