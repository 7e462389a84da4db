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
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/slowstart/slowstart/internal/fault"
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
	// LongLines counts the lines of Skipped longer than MaxLineBytes.
	LongLines int
}

// New returns an empty Log.
func New() *Log {
	return &Log{secrets: make(map[[clientRandomBytes]byte]map[string][]byte)}
}

// Limits of what Parse reads (docs/security.md).
const (
	// MaxLineBytes is the longest line read: a key log's lines are a label, 64
	// hex digits and at most 96 more (some 200 bytes). A longer line is
	// skipped, counted in Skipped and LongLines, without being held whole.
	MaxLineBytes = 4 << 10
	// MaxBytes is the largest key log read: a line of some 200 bytes per
	// secret, a few per connection, is a million connections' worth.
	MaxBytes = 256 << 20
	// textCheckBytes is how far into the input a NUL byte, which no key log
	// holds, makes it refused before any secret was read (a binary file,
	// /dev/urandom, /dev/zero).
	textCheckBytes = 64 << 10
)

// ErrNotKeyLog is returned for an input that cannot be a key log: binary data,
// or longer than MaxBytes.
var ErrNotKeyLog = errors.New("not an NSS key log")

// ParseFile reads a key log file.
func ParseFile(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keylog: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return nil, fmt.Errorf("keylog: %s is a directory: give the file SSLKEYLOGFILE named", path)
	}
	l, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("keylog: %s: %w", path, err)
	}
	return l, nil
}

// Parse reads a key log. Lines it cannot use are counted in Skipped (lines
// longer than MaxLineBytes in LongLines as well); a read error is returned with
// what was parsed before it. Binary data (a NUL byte in the first 64 KiB,
// before any secret) and an input longer than MaxBytes are refused with
// ErrNotKeyLog, in memory bounded by the longest line kept.
func Parse(r io.Reader) (*Log, error) {
	l := New()
	br := bufio.NewReaderSize(r, 64<<10)
	var read int64
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if read < textCheckBytes && l.Len() == 0 && bytes.IndexByte(chunk, 0) >= 0 {
			return l, fmt.Errorf("%w: it holds binary data (a NUL byte at byte %d)", ErrNotKeyLog, read+int64(bytes.IndexByte(chunk, 0)))
		}
		read += int64(len(chunk))
		if read > MaxBytes {
			return l, fmt.Errorf("%w: longer than %d MiB", ErrNotKeyLog, MaxBytes>>20)
		}
		if !tooLong {
			if len(line)+len(chunk) > MaxLineBytes+1 { // +1: the newline
				tooLong, line = true, line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		if len(chunk) > 0 || len(line) > 0 || tooLong {
			if tooLong {
				l.Skipped++
				l.LongLines++
			} else {
				l.AddLine(string(line))
			}
		}
		line, tooLong = line[:0], false
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return l, err
		}
	}
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

// Open reads the key log a verb was given (--keylog), or the one
// $SSLKEYLOGFILE names when path is empty; nil when neither names a file
// that exists. Its errors are marked fault.File: the file can't be read, or
// holds no secrets.
func Open(path string) (*Log, error) {
	if path == "" {
		path = os.Getenv("SSLKEYLOGFILE")
		if path == "" {
			return nil, nil
		}
		if _, err := os.Stat(path); err != nil {
			return nil, nil // an exported variable for clients to write to: nothing there yet
		}
	}
	keys, err := ParseFile(path)
	if err != nil {
		return nil, fault.Filef("--keylog: %w", err)
	}
	if keys.Len() == 0 {
		return nil, fault.Filef("--keylog %s holds no secrets (%d lines skipped): give the file SSLKEYLOGFILE named when the client ran", path, keys.Skipped)
	}
	return keys, nil
}
