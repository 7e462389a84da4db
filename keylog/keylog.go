// Package keylog reads TLS key log files in the NSS format that browsers, curl and
// servers write when SSLKEYLOGFILE is set: one secret per line, "LABEL
// <client_random hex> <secret hex>", keyed by the ClientHello's random. TLS 1.2
// uses the CLIENT_RANDOM label (the master secret); TLS 1.3 and QUIC use the
// traffic secret labels.
//
// It only reads and looks up secrets; decrypting records is the job of the
// packages that know TLS and QUIC.
package keylog

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// Labels of the NSS key log format.
const (
	ClientRandom                 = "CLIENT_RANDOM" // TLS 1.2 and earlier: the 48-byte master secret
	ClientEarlyTrafficSecret     = "CLIENT_EARLY_TRAFFIC_SECRET"
	ClientHandshakeTrafficSecret = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
	ServerHandshakeTrafficSecret = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
	ClientTrafficSecret0         = "CLIENT_TRAFFIC_SECRET_0"
	ServerTrafficSecret0         = "SERVER_TRAFFIC_SECRET_0"
	EarlyExporterSecret          = "EARLY_EXPORTER_SECRET"
	ExporterSecret               = "EXPORTER_SECRET"
)

// clientRandomBytes is the size of the ClientHello's random.
const clientRandomBytes = 32

// Log holds the secrets of a key log, by client random and label.
type Log struct {
	secrets map[[clientRandomBytes]byte]map[string][]byte
	// Skipped counts lines that are neither comments, blank, nor a well-formed
	// "LABEL <32-byte hex> <hex>" line (for instance RSA pre-master lines, which
	// are keyed differently and not used here).
	Skipped int
}

// New returns an empty Log.
func New() *Log {
	return &Log{secrets: make(map[[clientRandomBytes]byte]map[string][]byte)}
}

// ParseFile reads a key log file.
func ParseFile(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keylog: %w", err)
	}
	defer f.Close()
	l, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("keylog: %s: %w", path, err)
	}
	return l, nil
}

// Parse reads a key log. Lines it cannot use are counted in Skipped; a read error
// is returned with what was parsed before it.
func Parse(r io.Reader) (*Log, error) {
	l := New()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		l.AddLine(sc.Text())
	}
	return l, sc.Err()
}

// AddLine adds one line of a key log (comments and blank lines are ignored). It
// reports whether the line held a secret.
func (l *Log) AddLine(line string) bool {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return false
	}
	fields := strings.Fields(line)
	if len(fields) != 3 {
		l.Skipped++
		return false
	}
	random, err1 := hex.DecodeString(fields[1])
	secret, err2 := hex.DecodeString(fields[2])
	if err1 != nil || err2 != nil || len(random) != clientRandomBytes || len(secret) == 0 {
		l.Skipped++
		return false
	}
	l.Add(fields[0], random, secret)
	return true
}

// Add records a secret.
func (l *Log) Add(label string, clientRandom, secret []byte) {
	var key [clientRandomBytes]byte
	copy(key[:], clientRandom)
	m := l.secrets[key]
	if m == nil {
		m = make(map[string][]byte)
		l.secrets[key] = m
	}
	m[label] = append([]byte(nil), secret...)
}

// Secret returns the secret of a label for the connection whose ClientHello carried
// clientRandom.
func (l *Log) Secret(label string, clientRandom []byte) ([]byte, bool) {
	if l == nil || len(clientRandom) != clientRandomBytes {
		return nil, false
	}
	s, ok := l.secrets[[clientRandomBytes]byte(clientRandom)][label]
	return s, ok
}

// Has reports whether the log holds any secret for clientRandom.
func (l *Log) Has(clientRandom []byte) bool {
	if l == nil || len(clientRandom) != clientRandomBytes {
		return false
	}
	return len(l.secrets[[clientRandomBytes]byte(clientRandom)]) > 0
}

// Len is the number of connections (client randoms) with secrets.
func (l *Log) Len() int {
	if l == nil {
		return 0
	}
	return len(l.secrets)
}
