package quicanalysis_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/analysis"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/quicanalysis"
	"github.com/slowstart/slowstart/report"
)

// quicTestdata is the directory of the committed QUIC captures (README.md there).
const quicTestdata = "../testdata/quic"

// tsharkFields are the fields of tshark's reading of a committed capture, one line
// per frame, in NAME.tshark.tsv.
var tsharkFields = []string{"frame.time_epoch", "udp.srcport", "udp.length", "quic.connection.number",
	"quic.header_form", "quic.long.packet_type", "quic.packet_number", "quic.packet_length", "quic.decryption_failed",
	"quic.crypto.offset", "quic.crypto.length", "quic.ack.largest_acknowledged",
	"quic.stream.stream_id", "quic.stream.off", "quic.stream.offset", "quic.stream_data",
	"tls.handshake.type", "tls.handshake.length"}

// tsharkReading runs tshark on a capture with its key log and returns its reading as
// NAME.tshark.tsv holds it: the fields above, tab-separated, lists comma-separated,
// with each STREAM frame's data (quic.stream_data, hexadecimal) replaced by its
// length in bytes (0 for tshark's <MISSING>, a frame without data).
func tsharkReading(tshark, pcap, keys string) (string, error) {
	args := []string{"-r", pcap, "-o", "tls.keylog_file:" + keys, "-Y", "quic", "-T", "fields",
		"-E", "header=y", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		return "", fmt.Errorf("tshark: %w", err)
	}
	data := slices.Index(tsharkFields, "quic.stream_data")
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		cols := strings.Split(line, "\t")
		if len(cols) == len(tsharkFields) && cols[data] != "" && cols[data] != "quic.stream_data" {
			var lengths []string
			for _, h := range strings.Split(cols[data], ",") {
				// tshark writes <MISSING> for a frame without data (a FIN alone).
				if _, err := hex.DecodeString(h); err != nil {
					h = ""
				}
				lengths = append(lengths, strconv.Itoa(len(h)/2))
			}
			cols[data] = strings.Join(lengths, ",")
		}
		b.WriteString(strings.Join(cols, "\t") + "\n")
	}
	return b.String(), nil
}

// tsharkDatagram is one line of tshark's reading: a datagram and its packets.
type tsharkDatagram struct {
	timeNs     int64
	fromClient bool
	payload    int // UDP payload bytes
	connection string
	packets    []string // "c2s initial 0 1200"
	crypto     []string // "s2c 0+90"
	acks       []string // "c2s 3"
	handshake  bool     // holds a long-header packet with CRYPTO frames
	streams    map[uint64]uint64
	tlsTypes   []string
	tlsLengths []string
	failed     bool
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("tshark reading: %q is not a number", s)
	}
	return n
}

// parseTsharkReading reads NAME.tshark.tsv; the server is at port 443.
func parseTsharkReading(t *testing.T, text string) []tsharkDatagram {
	t.Helper()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) < 2 || lines[0] != strings.Join(tsharkFields, "\t") {
		t.Fatalf("tshark reading: want a header of %v", tsharkFields)
	}
	col := func(name string) int { return slices.Index(tsharkFields, name) }
	var out []tsharkDatagram
	for _, line := range lines[1:] {
		f := strings.Split(line, "\t")
		if len(f) != len(tsharkFields) {
			t.Fatalf("tshark reading: line %q", line)
		}
		secs, frac, _ := strings.Cut(f[col("frame.time_epoch")], ".")
		frac = (frac + "000000000")[:9]
		d := tsharkDatagram{timeNs: atoi(t, secs)*1e9 + atoi(t, frac), fromClient: f[col("udp.srcport")] != "443",
			payload: int(atoi(t, f[col("udp.length")])) - 8, connection: f[col("quic.connection.number")],
			failed: f[col("quic.decryption_failed")] != "", streams: map[uint64]uint64{}}
		dir := "s2c"
		if d.fromClient {
			dir = "c2s"
		}
		forms, types := splitList(f[col("quic.header_form")]), splitList(f[col("quic.long.packet_type")])
		numbers, lengths := splitList(f[col("quic.packet_number")]), splitList(f[col("quic.packet_length")])
		if len(numbers) != len(forms) || len(lengths) != len(forms) {
			t.Fatalf("tshark reading: packets without numbers in %q (not decrypted?)", line)
		}
		long := false
		for i, form := range forms {
			space := "application"
			if form == "1" {
				long = true
				switch types[0] {
				case "0":
					space = "initial"
				case "2":
					space = "handshake"
				}
				types = types[1:]
			}
			d.packets = append(d.packets, fmt.Sprintf("%s %s %s %s", dir, space, numbers[i], lengths[i]))
		}
		offsets, cryptoLengths := splitList(f[col("quic.crypto.offset")]), splitList(f[col("quic.crypto.length")])
		for i := range offsets {
			d.crypto = append(d.crypto, fmt.Sprintf("%s %s+%s", dir, offsets[i], cryptoLengths[i]))
		}
		d.handshake = long && len(offsets) > 0
		for _, l := range splitList(f[col("quic.ack.largest_acknowledged")]) {
			d.acks = append(d.acks, dir+" "+l)
		}
		// STREAM frames: an offset only where the OFF bit is set; the data's length.
		ids, offBits := splitList(f[col("quic.stream.stream_id")]), splitList(f[col("quic.stream.off")])
		streamOffsets, dataLengths := splitList(f[col("quic.stream.offset")]), splitList(f[col("quic.stream_data")])
		for i, id := range ids {
			offset := int64(0)
			if offBits[i] == "1" {
				offset, streamOffsets = atoi(t, streamOffsets[0]), streamOffsets[1:]
			}
			end := uint64(offset)
			if i < len(dataLengths) {
				end += uint64(atoi(t, dataLengths[i]))
			}
			sid := uint64(atoi(t, id))
			d.streams[sid] = max(d.streams[sid], end)
		}
		d.tlsTypes, d.tlsLengths = splitList(f[col("tls.handshake.type")]), splitList(f[col("tls.handshake.length")])
		out = append(out, d)
	}
	return out
}

// TestCommittedQUICCapture reads the committed capture of testdata/quic with its key
// log through analysis.File, as analyze --keylog does, and checks the report against
// tshark's reading of the same file with the same key log (NAME.tshark.tsv, which
// the test makes again and compares when tshark is installed): every packet's
// direction, number space, number and length in order; every CRYPTO frame; every ACK
// frame's largest acknowledged; the bytes each way; the certificate and the server's
// handshake bytes; the end of the response stream. The handshake's round trips, the
// server's first flight and the amplification limit are read from tshark's times as
// one reads them by hand: the server's datagrams with handshake CRYPTO frames fall
// in bursts a round trip apart, one per handshake round trip, and the first flight
// is what arrived before the second burst; the server was held back by the limit
// when that first flight came within a datagram of three times the client's first
// datagram and the handshake went on in a second burst. The initial window must
// hold the built-in server's: quic-go's 32 packets of 1,280 bytes.
func TestCommittedQUICCapture(t *testing.T) {
	const name = "h3-builtin-rtt40-chain6000-60000"
	pcap := filepath.Join(quicTestdata, name+".client.pcap")
	keysPath := filepath.Join(quicTestdata, name+".keys")
	tsvPath := filepath.Join(quicTestdata, name+".tshark.tsv")
	if tshark, err := exec.LookPath("tshark"); err != nil {
		t.Log("tshark is not installed (apt-get install tshark): the committed reading is not made again")
	} else {
		reading, err := tsharkReading(tshark, pcap, keysPath)
		if err != nil {
			t.Fatal(err)
		}
		if os.Getenv("SLOWSTART_UPDATE_TSHARK") != "" {
			if err := os.WriteFile(tsvPath, []byte(reading), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		committed, err := os.ReadFile(tsvPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(committed, []byte(reading)) {
			t.Fatalf("%s is not tshark's reading of %s (SLOWSTART_UPDATE_TSHARK=1 writes it again)", tsvPath, pcap)
		}
	}
	text, err := os.ReadFile(tsvPath)
	if err != nil {
		t.Fatal(err)
	}
	theirs := parseTsharkReading(t, string(text))

	keys, err := keylog.ParseFile(keysPath)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analysis.File(context.Background(), pcap, analysis.Options{KeyLog: keys, Packets: true})
	if err != nil {
		t.Fatal(err)
	}
	var conns []report.Connection
	for _, c := range rep.Connections {
		if c.Transport == report.TransportQUIC {
			conns = append(conns, c)
		}
	}
	connections := map[string]bool{}
	for _, d := range theirs {
		connections[d.connection] = true
		if d.failed {
			t.Errorf("tshark could not decrypt a packet at %d", d.timeNs)
		}
	}
	if len(conns) != len(connections) || len(conns) != 1 {
		t.Fatalf("%d QUIC connections, tshark %d", len(conns), len(connections))
	}
	c := conns[0]
	if c.QUIC.Decrypted != "all" || c.QUIC.Undecrypted != 0 {
		t.Errorf("decrypted %q, %d packets not", c.QUIC.Decrypted, c.QUIC.Undecrypted)
	}
	if c.Vantage != report.VantageClient {
		t.Errorf("vantage %s: the capture was taken at the client's TUN device", c.Vantage)
	}

	// Packet by packet, and the frames.
	var ours, oursCrypto, oursAcks []string
	for _, p := range c.QUIC.PacketLog {
		ours = append(ours, fmt.Sprintf("%s %s %d %d", p.Dir, p.Space, p.Number, p.Bytes))
		for _, f := range p.Frames {
			switch {
			case strings.HasPrefix(f, "CRYPTO "):
				oursCrypto = append(oursCrypto, p.Dir+" "+strings.TrimPrefix(f, "CRYPTO "))
			case strings.HasPrefix(f, "ACK "):
				ranges := strings.Split(strings.TrimPrefix(f, "ACK "), ",")
				top := ranges[len(ranges)-1]
				if _, hi, ok := strings.Cut(top, "-"); ok {
					top = hi
				}
				oursAcks = append(oursAcks, p.Dir+" "+top)
			}
		}
	}
	var packets, crypto, acks []string
	var toClient, toServer int64
	for _, d := range theirs {
		packets, crypto, acks = append(packets, d.packets...), append(crypto, d.crypto...), append(acks, d.acks...)
		if d.fromClient {
			toServer += int64(d.payload)
		} else {
			toClient += int64(d.payload)
		}
	}
	if !slices.Equal(ours, packets) {
		t.Errorf("packets differ from tshark's:\nours   %q\ntshark %q", ours, packets)
	}
	for _, l := range []struct {
		what         string
		ours, theirs []string
	}{{"CRYPTO frames", oursCrypto, crypto}, {"ACK frames", oursAcks, acks}} {
		slices.Sort(l.ours)
		slices.Sort(l.theirs)
		if !slices.Equal(l.ours, l.theirs) {
			t.Errorf("%s differ: ours %q, tshark %q", l.what, l.ours, l.theirs)
		}
	}
	if c.BytesToClient != toClient || c.BytesToServer != toServer {
		t.Errorf("bytes to client %d, to server %d; tshark %d and %d", c.BytesToClient, c.BytesToServer, toClient, toServer)
	}

	// The TLS handshake's Certificate message.
	certificate := 0
	for _, d := range theirs {
		for i, typ := range d.tlsTypes {
			if typ == "11" && !d.fromClient {
				certificate = 4 + int(atoi(t, d.tlsLengths[i]))
			}
		}
	}
	if certificate == 0 || c.QUIC.CertificateBytes != certificate {
		t.Errorf("certificate %d bytes, tshark's Certificate message %d", c.QUIC.CertificateBytes, certificate)
	}

	// The response: the end of the server's stream 0.
	var responseEnd uint64
	for _, d := range theirs {
		if !d.fromClient {
			responseEnd = max(responseEnd, d.streams[0])
		}
	}
	if len(c.HTTP) != 1 || c.HTTP[0].Bytes != int64(responseEnd) {
		t.Errorf("HTTP %+v, want one response of %d stream bytes", c.HTTP, responseEnd)
	}

	// The handshake's bursts, read from tshark's times.
	clientStart, serverStart := theirs[0].timeNs, int64(0)
	maxServerDatagram := 0
	for _, d := range theirs {
		if !d.fromClient {
			if serverStart == 0 {
				serverStart = d.timeNs
			}
			maxServerDatagram = max(maxServerDatagram, d.payload)
		}
	}
	handshakeRTT := serverStart - clientStart
	var bursts []int64 // start of each burst of server handshake datagrams
	last := int64(0)
	for _, d := range theirs {
		if d.fromClient || !d.handshake {
			continue
		}
		if len(bursts) == 0 || d.timeNs-last > handshakeRTT/2 {
			bursts = append(bursts, d.timeNs)
		}
		last = d.timeNs
	}
	// The first flight: what arrived before the second burst, or with one burst,
	// before the response (the server's stream 0).
	firstFlight := 0
	for _, d := range theirs {
		if d.fromClient {
			continue
		}
		if len(bursts) > 1 && d.timeNs >= bursts[1] || len(bursts) == 1 && d.streams[0] > 0 {
			break
		}
		firstFlight += d.payload
	}
	clientInitial := theirs[0].payload
	amplification := len(bursts) > 1 && firstFlight >= 3*clientInitial-maxServerDatagram
	t.Logf("tshark: %d handshake bursts, first flight %d bytes, client Initial %d bytes, amplification %v", len(bursts), firstFlight, clientInitial, amplification)
	if c.RoundTrips.TLS != len(bursts) {
		t.Errorf("%d handshake round trips, tshark's times show %d bursts of handshake data", c.RoundTrips.TLS, len(bursts))
	}
	if c.QUIC.ServerFirstFlightBytes != firstFlight || c.QUIC.ClientInitialBytes != clientInitial {
		t.Errorf("first flights: server %d bytes, client %d; tshark %d and %d", c.QUIC.ServerFirstFlightBytes, c.QUIC.ClientInitialBytes, firstFlight, clientInitial)
	}
	if c.QUIC.AmplificationLimited != amplification {
		t.Errorf("amplification_limited %v, tshark's times say %v", c.QUIC.AmplificationLimited, amplification)
	}
	var diagnosed bool
	for _, d := range c.Diagnoses {
		diagnosed = diagnosed || d.Kind == quicanalysis.DiagnosisCertificateChain
	}
	if diagnosed != amplification {
		t.Errorf("certificate_chain diagnosis %v, want %v", diagnosed, amplification)
	}

	// The initial window: whatever the verdict, it holds quic-go's.
	const window = 32 * 1280
	iw := c.InitialWindow
	switch iw.Verdict {
	case report.VerdictExact:
		if iw.Bytes-c.MSS >= window || iw.Bytes < window {
			t.Errorf("IW exact %d bytes: quic-go's %d is not within a datagram below it", iw.Bytes, window)
		}
	case report.VerdictRange:
		if window < iw.Bytes || window > iw.BytesMax {
			t.Errorf("IW %d to %d bytes: not quic-go's %d", iw.Bytes, iw.BytesMax, window)
		}
	case report.VerdictLowerBound:
		if iw.Bytes > window {
			t.Errorf("IW at least %d bytes: more than quic-go's %d", iw.Bytes, window)
		}
	}
}
