package tlshttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/capture"
	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/keylog"
)

// connResult is one TCP connection of a capture and what tlshttp found in it.
type connResult struct {
	client, server netip.AddrPort
	result         Result
	// holes counts the server's segments that began beyond the bytes before
	// them; filled counts the later segments that filled such holes.
	holes, filled int
}

// feeder is the flow.Handler the analysis will be: it hands each data segment
// to a Conn, retransmissions included (bytes seen before are ignored; ones that
// fill a hole are used).
type feeder struct {
	conn          *Conn
	out           *[]connResult
	holes, filled int
	highest       int64
	open          []Span // server stream ranges skipped over, not yet filled
	// newBytesOnly hands over only each segment's new bytes, as tlsrec gets them.
	newBytesOnly bool
}

func (f *feeder) Segment(c *flow.Conn, s *flow.Segment) {
	if s.Len == 0 {
		return
	}
	if s.Dir == flow.ToClient {
		end := s.Offset + int64(s.Len)
		kept := f.open[:0]
		for _, hole := range f.open {
			if s.Offset < hole.End && end > hole.Start {
				f.filled++ // a later segment brought bytes of the hole
				continue
			}
			kept = append(kept, hole)
		}
		f.open = kept
		if s.Offset > f.highest {
			f.holes++
			f.open = append(f.open, Span{f.highest, s.Offset})
		}
		f.highest = max(f.highest, end)
	}
	if f.newBytesOnly {
		if s.NewLen > 0 {
			f.conn.Write(s.Dir, s.NewOffset, s.Payload[min(int(s.NewOffset-s.Offset), len(s.Payload)):], s.NewLen, s.TimeNs)
		}
		return
	}
	f.conn.Write(s.Dir, s.Offset, s.Payload, s.Len, s.TimeNs)
}

func (f *feeder) Close(c *flow.Conn) {
	*f.out = append(*f.out, connResult{client: c.Client, server: c.Server, result: f.conn.Close(), holes: f.holes, filled: f.filled})
}

// decodeCapture reads a capture file and returns every TCP connection's Result.
func decodeCapture(path string, keys *keylog.Log) ([]connResult, error) {
	return decodeCaptureFed(path, keys, false)
}

// decodeCaptureFed is decodeCapture, handing over only new bytes if asked.
func decodeCaptureFed(path string, keys *keylog.Log, newBytesOnly bool) ([]connResult, error) {
	r, err := capture.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []connResult
	tracker := flow.NewTracker(func(c *flow.Conn) flow.Handler {
		return &feeder{conn: New(keys), out: &out, newBytesOnly: newBytesOnly}
	}, flow.ServerHint{})
	var p capture.Packet
	for {
		err := r.Next(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		tracker.Add(&p)
	}
	tracker.Flush()
	return out, nil
}

// accessEntry is one line of the nginx access log format the tests configure:
// '$server_port $remote_port "$request" $status $bytes_sent $body_bytes_sent
// $request_completion'.
type accessEntry struct {
	serverPort, remotePort int
	method, path, proto    string
	status                 int
	bytesSent, bodySent    int64
	// incomplete: nginx did not send the whole response ($request_completion
	// empty: the client reset the stream or closed the connection first). The
	// logs in testdata made before the field was logged have none: complete.
	incomplete bool
}

var accessLine = regexp.MustCompile(`^(\d+) (\d+) "(\S+) (\S+) (\S+)" (\d+) (\d+) (\d+)( (OK|-)?)?$`)

func parseAccessLog(text string) ([]accessEntry, error) {
	var out []accessEntry
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		m := accessLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("access log line %q does not match the configured format", line)
		}
		e := accessEntry{method: m[3], path: m[4], proto: m[5]}
		e.serverPort, _ = strconv.Atoi(m[1])
		e.remotePort, _ = strconv.Atoi(m[2])
		e.status, _ = strconv.Atoi(m[6])
		e.bytesSent, _ = strconv.ParseInt(m[7], 10, 64)
		e.bodySent, _ = strconv.ParseInt(m[8], 10, 64)
		e.incomplete = m[9] != "" && m[10] != "OK"
		out = append(out, e)
	}
	return out, sc.Err()
}

// compareWithAccessLog checks that the decrypted exchanges are exactly the
// requests nginx logged, connection by connection (the log has the client's
// port): same method, path and status, the response's body bytes equal to
// $body_bytes_sent, and its bytes equal to $bytes_sent (HTTP/1.x: the whole
// message; HTTP/2: nginx counts the stream's HEADERS and DATA frames, frame
// headers included).
func compareWithAccessLog(t *testing.T, conns []connResult, entries []accessEntry) {
	t.Helper()
	byPort := make(map[int][]accessEntry)
	for _, e := range entries {
		byPort[e.remotePort] = append(byPort[e.remotePort], e)
	}
	matched := 0
	for _, c := range conns {
		logged := byPort[int(c.client.Port())]
		res := c.result
		if len(logged) == 0 {
			// A connection nginx logged nothing on: a browser's spare preconnect.
			for _, x := range res.Exchanges {
				t.Errorf("connection from port %d: exchange %s %s found, nginx logged none", c.client.Port(), x.Method, x.Path)
			}
			continue
		}
		if !res.Decrypted {
			t.Errorf("connection from port %d: not decrypted (%s; %v)", c.client.Port(), res.NoKeysReason, res.Decryption.Problems)
			continue
		}
		if len(res.Decryption.Problems) != 0 {
			t.Errorf("connection from port %d: problems %v", c.client.Port(), res.Decryption.Problems)
		}
		if len(res.Exchanges) != len(logged) {
			t.Errorf("connection from port %d: %d exchanges, nginx logged %d", c.client.Port(), len(res.Exchanges), len(logged))
		}
		wantProtocol := ProtocolHTTP1
		if logged[0].proto == "HTTP/2.0" {
			wantProtocol = ProtocolHTTP2
		}
		if res.Protocol != wantProtocol {
			t.Errorf("connection from port %d: protocol %q, nginx logged %s", c.client.Port(), res.Protocol, logged[0].proto)
		}
		// Match in log order: nginx logs a request when it ends, so for HTTP/2
		// match by method and path, the first unused one.
		used := make([]bool, len(res.Exchanges))
		for _, e := range logged {
			found := -1
			for i, x := range res.Exchanges {
				if !used[i] && x.Method == e.method && x.Path == e.path {
					found = i
					break
				}
			}
			if found < 0 {
				t.Errorf("connection from port %d: nginx logged %s %s, not among the exchanges", c.client.Port(), e.method, e.path)
				continue
			}
			used[found] = true
			matched++
			x := res.Exchanges[found]
			// A response nginx did not finish (the browser cancelled it: Chromium
			// at times resets the stream of an image it cannot decode) must be
			// read as incomplete, with the bytes it did send; any other, as
			// complete.
			if x.Status != e.status || x.BodyBytes != e.bodySent || x.Bytes != e.bytesSent || x.Complete == e.incomplete || x.Incomplete != e.incomplete {
				t.Errorf("port %d %s %s: status %d, body %d, bytes %d (complete %t, incomplete %t %s); nginx logged %d, %d, %d",
					c.client.Port(), e.method, e.path, x.Status, x.BodyBytes, x.Bytes, x.Complete, x.Incomplete, x.Reason, e.status, e.bodySent, e.bytesSent)
			}
			if (x.RequestOffset < res.HandshakeEnd[flow.ToServer]) != x.EarlyData || x.ResponseStart < res.HandshakeEnd[flow.ToClient] ||
				x.ResponseEnd <= x.ResponseStart || x.FirstByteNs < x.RequestNs || x.LastByteNs < x.FirstByteNs {
				t.Errorf("port %d %s %s: request at %d, response %d..%d, times %d %d %d: out of order with the handshake end %v",
					c.client.Port(), e.method, e.path, x.RequestOffset, x.ResponseStart, x.ResponseEnd, x.RequestNs, x.FirstByteNs, x.LastByteNs, res.HandshakeEnd)
			}
		}
	}
	if matched != len(entries) {
		t.Errorf("%d of the %d requests nginx logged were found", matched, len(entries))
	}
}

// tsharkFields runs tshark on a capture with the key log and returns the rows
// of the fields asked for, tab-separated (multiple values of a field in a
// packet are comma-separated).
func tsharkFields(t *testing.T, pcap, keys, filter string, fields ...string) [][]string {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (Debian package tshark)")
	}
	// Out-of-order reassembly: holes filled by later retransmissions (off by default).
	args := []string{"-r", pcap, "-o", "tls.keylog_file:" + keys, "-o", "tcp.reassemble_out_of_order:TRUE",
		"-Y", filter, "-T", "fields", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command("tshark", args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user profile
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", strings.Join(args, " "), err)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows
}

func splitValues(field string) []string {
	if field == "" {
		return nil
	}
	return strings.Split(field, ",")
}

// tsharkExchange is what tshark's dissectors showed of one request.
type tsharkExchange struct {
	method, path string
	status       int
	dataBytes    int64 // HTTP/2: DATA frame payloads of the response
}

// tsharkReading is what tshark's decryption of a capture shows: the requests of
// every connection, keyed by the client port, in order (HTTP/1.x and HTTP/2),
// and the payload range of the first packet with each side's Finished, keyed by
// client port and direction.
type tsharkReading struct {
	exchanges map[int][]tsharkExchange
	finished  map[[2]int][2]int64
}

// readWithTshark runs tshark once over the capture with the key log.
func readWithTshark(t *testing.T, pcap, keys string, serverPort int) tsharkReading {
	t.Helper()
	reading := tsharkReading{exchanges: make(map[int][]tsharkExchange), finished: make(map[[2]int][2]int64)}
	type streamKey struct {
		port   int
		stream string
	}
	streams := make(map[streamKey]*tsharkExchange)
	var order []streamKey
	type pending struct{ requests, responses []tsharkExchange }
	h1 := make(map[int]*pending)
	var h1Order []int
	rows := tsharkFields(t, pcap, keys, "http || http2 || tls.handshake.type == 20",
		"tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.len", "tls.handshake.type",
		"http2.streamid", "http2.type", "http2.length", "http2.headers.method", "http2.headers.path", "http2.headers.status",
		"http.request.method", "http.request.uri", "http.response.code")
	for _, row := range rows {
		for len(row) < 14 {
			row = append(row, "")
		}
		src, _ := strconv.Atoi(row[0])
		dst, _ := strconv.Atoi(row[1])
		toServer := dst == serverPort
		port, dir := src, int(flow.ToServer)
		if !toServer {
			port, dir = dst, int(flow.ToClient)
		}
		// Finished: relative sequence numbers count the first payload byte as 1.
		if slices.Contains(splitValues(row[4]), "20") {
			if _, seen := reading.finished[[2]int{port, dir}]; !seen {
				seq, _ := strconv.ParseInt(row[2], 10, 64)
				length, _ := strconv.ParseInt(row[3], 10, 64)
				reading.finished[[2]int{port, dir}] = [2]int64{seq - 1, seq - 1 + length}
			}
		}
		// HTTP/2: the frames' stream ids and types, and the :method, :path and
		// :status of the packet's HEADERS frames in order.
		ids, types, lengths := splitValues(row[5]), splitValues(row[6]), splitValues(row[7])
		methods, paths, statuses := splitValues(row[8]), splitValues(row[9]), splitValues(row[10])
		headers := 0
		for i := range min(len(ids), len(types), len(lengths)) {
			if ids[i] == "0" {
				continue
			}
			key := streamKey{port, ids[i]}
			x := streams[key]
			if x == nil {
				x = &tsharkExchange{}
				streams[key] = x
				order = append(order, key)
			}
			switch types[i] {
			case "1": // HEADERS: requests carry :method and :path, responses :status
				if toServer && headers < len(paths) && headers < len(methods) {
					x.method, x.path = methods[headers], paths[headers]
				}
				if !toServer && headers < len(statuses) {
					x.status, _ = strconv.Atoi(statuses[headers])
				}
				headers++
			case "0":
				if !toServer {
					n, _ := strconv.ParseInt(lengths[i], 10, 64)
					x.dataBytes += n
				}
			}
		}
		// HTTP/1.x: requests and responses in order per connection.
		if row[11] == "" && row[13] == "" {
			continue
		}
		p := h1[port]
		if p == nil {
			p = &pending{}
			h1[port] = p
			h1Order = append(h1Order, port)
		}
		uris := splitValues(row[12])
		for i, method := range splitValues(row[11]) {
			if i < len(uris) {
				p.requests = append(p.requests, tsharkExchange{method: method, path: uris[i]})
			}
		}
		for _, code := range splitValues(row[13]) {
			status, _ := strconv.Atoi(code)
			p.responses = append(p.responses, tsharkExchange{status: status})
		}
	}
	for _, key := range order {
		reading.exchanges[key.port] = append(reading.exchanges[key.port], *streams[key])
	}
	for _, port := range h1Order {
		p := h1[port]
		for i, q := range p.requests {
			if i < len(p.responses) {
				q.status = p.responses[i].status
			}
			reading.exchanges[port] = append(reading.exchanges[port], q)
		}
	}
	return reading
}

// compareWithTshark checks the exchanges against tshark's decryption of the
// same capture with the same key log: the same requests in the same order per
// connection, statuses, and HTTP/2 DATA bytes; and each side's handshake end
// inside the packet tshark shows its Finished in.
func compareWithTshark(t *testing.T, pcap, keys string, serverPort int, conns []connResult) {
	t.Helper()
	want := readWithTshark(t, pcap, keys, serverPort)
	for _, c := range conns {
		port := int(c.client.Port())
		var got []tsharkExchange
		for _, x := range c.result.Exchanges {
			e := tsharkExchange{method: x.Method, path: x.Path, status: x.Status}
			if x.Protocol == ProtocolHTTP2 {
				e.dataBytes = x.BodyBytes // no padding from nginx
			}
			got = append(got, e)
		}
		if fmt.Sprint(got) != fmt.Sprint(want.exchanges[port]) {
			t.Errorf("connection from port %d:\n got %v\ntshark %v", port, got, want.exchanges[port])
		}
		for dir := range 2 {
			r, ok := want.finished[[2]int{port, dir}]
			end := c.result.HandshakeEnd[dir]
			if !ok {
				if end >= 0 {
					t.Errorf("connection from port %d dir %d: handshake end %d, tshark shows no Finished", port, dir, end)
				}
				continue
			}
			if end <= r[0] || end > r[1] {
				t.Errorf("connection from port %d dir %d: handshake end %d outside the packet with tshark's Finished (%d..%d]",
					port, dir, end, r[0], r[1])
			}
		}
	}
}
