package analysis

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/keylog"
)

// accessLine is one line of nginx's access log in the format the captures in
// testdata/tls were made with: $server_port $remote_port "$request" $status
// $bytes_sent $body_bytes_sent.
type accessLine struct {
	clientPort       int
	method, path     string
	status           int
	bytes, bodyBytes int64
}

func readAccessLog(t *testing.T, path string) []accessLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []accessLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		q1, q2 := strings.Index(line, `"`), strings.LastIndex(line, `"`)
		if q1 < 0 || q2 <= q1 {
			t.Fatalf("%s: bad line %q", path, line)
		}
		head, request, tail := strings.Fields(line[:q1]), strings.Fields(line[q1+1:q2]), strings.Fields(line[q2+1:])
		if len(head) != 2 || len(request) != 3 || len(tail) != 3 {
			t.Fatalf("%s: bad line %q", path, line)
		}
		var a accessLine
		a.clientPort, _ = strconv.Atoi(head[1])
		a.method, a.path = request[0], request[1]
		a.status, _ = strconv.Atoi(tail[0])
		a.bytes, _ = strconv.ParseInt(tail[1], 10, 64)
		a.bodyBytes, _ = strconv.ParseInt(tail[2], 10, 64)
		out = append(out, a)
	}
	return out
}

// TestDecryptedRequestsOnTheirRounds: with the client's key log, every request
// nginx logged is in the report, on the connection from the port nginx logged,
// with its path, status and bytes as nginx counted them, and the rounds its
// response arrived in.
func TestDecryptedRequestsOnTheirRounds(t *testing.T) {
	pcaps, _ := filepath.Glob("../testdata/tls/tiny-*.pcap")
	if len(pcaps) < 4 {
		t.Fatalf("%d key-logged captures in testdata/tls, want the committed ones", len(pcaps))
	}
	for _, pcap := range pcaps {
		base := strings.TrimSuffix(pcap, ".pcap")
		t.Run(filepath.Base(base), func(t *testing.T) {
			keys, err := keylog.ParseFile(base + ".keys")
			if err != nil {
				t.Fatal(err)
			}
			rep, err := File(context.Background(), pcap, Options{KeyLog: keys})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range readAccessLog(t, base+".access.log") {
				found := false
				for _, c := range rep.Connections {
					if !strings.HasSuffix(c.Client, ":"+strconv.Itoa(want.clientPort)) {
						continue
					}
					for _, m := range c.HTTP {
						if m.Path != want.path || m.Method != want.method {
							continue
						}
						found = true
						if m.Status != want.status || m.Bytes != want.bytes || m.BodyBytes != want.bodyBytes {
							t.Errorf("%s %s: status %d, %d bytes (%d body); nginx logged %d, %d (%d)", m.Method, m.Path, m.Status, m.Bytes, m.BodyBytes, want.status, want.bytes, want.bodyBytes)
						}
						if len(m.Rounds) == 0 || m.Rounds[len(m.Rounds)-1] > len(c.Rounds) {
							t.Errorf("%s: rounds %v of %d", m.Path, m.Rounds, len(c.Rounds))
						}
					}
				}
				if !found {
					t.Errorf("%s %s from port %d: not in the report", want.method, want.path, want.clientPort)
				}
			}
			// Without the key log the same capture has no requests to show.
			plain, err := File(context.Background(), pcap, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range plain.Connections {
				if len(c.HTTP) != 0 {
					t.Errorf("without keys: %d HTTP messages", len(c.HTTP))
				}
			}
		})
	}
}
