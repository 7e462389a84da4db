package exact

import (
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/slowstart/slowstart/lab/server"
	"github.com/slowstart/slowstart/tlsrec"
)

// writeCounter counts what the server hands to the connection (counted before
// the write: on a net.Pipe a write returns only once the reader has it all).
type writeCounter struct {
	net.Conn
	mu      sync.Mutex
	written int64
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.written += int64(len(b))
	w.mu.Unlock()
	return w.Conn.Write(b)
}

func (w *writeCounter) total() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// TestCountingConnTLSFlight: with writes held back after the ClientHello, a
// TLS client reads the server's whole first flight and then reports its
// length, which is what the server wrote; the ServerHello names the version.
func TestCountingConnTLSFlight(t *testing.T) {
	cert, _, err := server.GenerateChain(server.ChainConfig{ServerName: "flight.test", Intermediates: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tlsrec.VersionString(version), func(t *testing.T) {
			clientSide, serverSide := net.Pipe()
			defer clientSide.Close()
			defer serverSide.Close()
			counter := &writeCounter{Conn: serverSide}
			srv := tls.Server(counter, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version})
			go srv.Handshake()

			flightDone := make(chan int64, 1)
			counting := &countingConn{Conn: clientSide}
			counting.holdWrites(flightDone)
			client := tls.Client(counting, &tls.Config{InsecureSkipVerify: true})
			go client.Handshake()

			select {
			case flight := <-flightDone:
				if flight != counter.total() || flight == 0 {
					t.Errorf("flight of %d bytes, the server wrote %d", flight, counter.total())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the client never answered the server's flight")
			}
			if got := serverHelloVersion(counting.prefixBytes()); got != tlsrec.VersionString(version) {
				t.Errorf("ServerHello version %q, want %q", got, tlsrec.VersionString(version))
			}
		})
	}
}

func TestWritesFlightEnd(t *testing.T) {
	record := func(kind byte, n int) []byte {
		return append([]byte{kind, 3, 3, byte(n >> 8), byte(n)}, make([]byte, n)...)
	}
	cases := []struct {
		name  string
		write []byte
		want  bool
	}{
		{"change cipher spec alone", record(recordChangeCipherSpec, 1), false},
		{"handshake", record(recordHandshake, 40), true},
		{"change cipher spec then application data", append(record(recordChangeCipherSpec, 1), record(recordApplicationData, 53)...), true},
		{"alert", record(21, 2), false},
		{"short", []byte{recordHandshake, 3}, false},
	}
	for _, tc := range cases {
		if got := writesFlightEnd(tc.write); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServerHelloVersionRejectsOtherData(t *testing.T) {
	for _, stream := range [][]byte{nil, []byte("HTTP/1.1 200 OK\r\n"), {recordHandshake, 3, 3, 0, 4, 1, 0, 0, 0}} {
		if got := serverHelloVersion(stream); got != "" {
			t.Errorf("serverHelloVersion(%q) = %q, want empty", stream, got)
		}
	}
}
