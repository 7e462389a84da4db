package tlsrec

import (
	"bytes"
	"crypto/tls"
	"reflect"
	"slices"
	"testing"

	"github.com/slowstart/slowstart/internal/streamtest"
)

// piece is one Write call.
type piece = streamtest.Piece

func parse(pieces []piece) *Stream {
	stream := NewStream()
	for _, p := range pieces {
		stream.Write(p.Offset, p.Data, p.Length)
	}
	return stream
}

// recordChainEnd follows record headers through a fully captured stream and
// returns how many records there are and where the chain ends.
func recordChainEnd(stream []byte) (records int, end int) {
	for end+RecordHeaderBytes <= len(stream) {
		end += RecordHeaderBytes + (int(stream[end+3])<<8 | int(stream[end+4]))
		records++
	}
	return records, end
}

// checkNoInventedRecords fails if got holds a record that the fully captured
// parse (truth) does not hold at the same offset with the same type and length.
func checkNoInventedRecords(t *testing.T, got, truth []Record) {
	t.Helper()
	byOffset := make(map[int64]Record, len(truth))
	for _, record := range truth {
		byOffset[record.Offset] = record
	}
	for _, record := range got {
		want, ok := byOffset[record.Offset]
		if !ok || want.ContentType != record.ContentType || want.Length != record.Length {
			t.Errorf("record at offset %d (type %d, length %d) is not a real record boundary",
				record.Offset, record.ContentType, record.Length)
		}
	}
}

func handshakeTypesOf(records []Record) []uint8 {
	var types []uint8
	for _, record := range records {
		types = append(types, record.HandshakeTypes...)
	}
	return types
}

func TestRealHandshakes(t *testing.T) {
	certificate := selfSignedCertificate(t, 120)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		session := runTLS(t, version, certificate, 40000)
		t.Run(VersionString(version), func(t *testing.T) {
			for _, side := range []struct {
				name   string
				stream []byte
			}{{"client", session.clientStream}, {"server", session.serverStream}} {
				t.Run(side.name, func(t *testing.T) {
					parsed := parse(streamtest.Whole(side.stream))
					records := parsed.Records()
					count, chainEnd := recordChainEnd(side.stream)
					if !parsed.IsTLS() || !parsed.Synced() || parsed.LostAt() != -1 {
						t.Fatalf("IsTLS=%t Synced=%t LostAt=%d, want a synced TLS stream",
							parsed.IsTLS(), parsed.Synced(), parsed.LostAt())
					}
					if chainEnd != len(side.stream) || len(records) != count {
						t.Fatalf("%d records, want %d tiling %d bytes (chain ends at %d)",
							len(records), count, len(side.stream), chainEnd)
					}
					for i := 1; i < len(records); i++ {
						if records[i].Offset != records[i-1].End() {
							t.Fatalf("record %d starts at %d, previous ends at %d", i, records[i].Offset, records[i-1].End())
						}
					}
					checkSide(t, side.name, version, session, parsed)
				})
			}
		})
	}
}

// checkSide checks what each side's stream must show for its version.
func checkSide(t *testing.T, side string, version uint16, session tlsSession, parsed *Stream) {
	t.Helper()
	records := parsed.Records()
	hello := parsed.Hello()
	types := handshakeTypesOf(records)
	if !hello.Found || hello.Truncated {
		t.Fatalf("hello Found=%t Truncated=%t, want a whole hello", hello.Found, hello.Truncated)
	}
	// Both hellos start the stream (record header, handshake header, version), so
	// the random is at a fixed place in the bytes each side wrote.
	stream := session.serverStream
	if side == "client" {
		stream = session.clientStream
	}
	const randomAt = RecordHeaderBytes + handshakeHeaderBytes + 2
	if wantRandom := stream[randomAt : randomAt+32]; !bytes.Equal(hello.Random, wantRandom) {
		t.Errorf("%s random %x, want %x", side, hello.Random, wantRandom)
	}
	firstEncrypted := slices.IndexFunc(records, func(r Record) bool { return r.Encrypted })
	if firstEncrypted < 0 {
		t.Fatalf("no encrypted record in %+v", records)
	}
	for _, record := range records[firstEncrypted:] {
		if !record.Encrypted && record.ContentType != ContentChangeCipherSpec {
			t.Errorf("record at %d (type %d) after encryption started is not marked encrypted", record.Offset, record.ContentType)
		}
		if record.HandshakeTypes != nil {
			t.Errorf("encrypted record at %d has handshake types %v", record.Offset, record.HandshakeTypes)
		}
	}
	if records[len(records)-1].ContentType != ContentAlert && records[len(records)-1].ContentType != ContentApplicationData {
		t.Errorf("last record type %d, want application data or alert", records[len(records)-1].ContentType)
	}

	if side == "client" {
		if !hello.IsClient || hello.SNI != session.serverName || !reflect.DeepEqual(hello.ALPN, session.clientALPN) {
			t.Errorf("client hello %+v, want SNI %q ALPN %v", hello, session.serverName, session.clientALPN)
		}
		if !slices.Contains(hello.Versions, version) && !(version == tls.VersionTLS12 && hello.Versions == nil) {
			t.Errorf("client offered versions %x, want %x among them", hello.Versions, version)
		}
		wantTypes := []uint8{HandshakeClientHello}
		if version == tls.VersionTLS12 {
			wantTypes = append(wantTypes, HandshakeClientKeyExchange)
		}
		if !reflect.DeepEqual(types, wantTypes) {
			t.Errorf("client handshake types in the clear %v, want %v", types, wantTypes)
		}
		return
	}

	if hello.IsClient || hello.NegotiatedVersion != session.serverState.Version ||
		hello.CipherSuite != session.serverState.CipherSuite {
		t.Errorf("server hello %+v, want version %x suite %x", hello, session.serverState.Version, session.serverState.CipherSuite)
	}
	if version == tls.VersionTLS12 {
		if !reflect.DeepEqual(hello.ALPN, []string{session.clientState.NegotiatedProtocol}) {
			t.Errorf("server ALPN %v, want %q", hello.ALPN, session.clientState.NegotiatedProtocol)
		}
		// ECDHE suites: ServerHello, Certificate, ServerKeyExchange, ServerHelloDone in
		// order, before the ChangeCipherSpec.
		want := []uint8{HandshakeServerHello, HandshakeCertificate, HandshakeServerKeyExchange, HandshakeServerHelloDone}
		if len(types) < len(want) || !reflect.DeepEqual(types[:len(want)], want) {
			t.Errorf("server handshake types in the clear %v, want them to start with %v", types, want)
		}
		return
	}
	if !reflect.DeepEqual(types, []uint8{HandshakeServerHello}) {
		t.Errorf("TLS 1.3 server handshake types in the clear %v, want only ServerHello", types)
	}
	if hello.ALPN != nil {
		t.Errorf("TLS 1.3 server ALPN %v, want nil (it is sent encrypted)", hello.ALPN)
	}
	for _, record := range records[1:] {
		if record.ContentType == ContentHandshake {
			t.Errorf("TLS 1.3 server sent a cleartext-typed handshake record at %d after the ServerHello", record.Offset)
		}
	}
}

// TestSplitsGiveTheSameResult feeds real streams in 1-byte pieces, in segments,
// and with the ServerHello split at every position, and compares with one piece.
func TestSplitsGiveTheSameResult(t *testing.T) {
	certificate := selfSignedCertificate(t, 40)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		session := runTLS(t, version, certificate, 5000)
		for _, stream := range [][]byte{session.clientStream, session.serverStream} {
			want := parse(streamtest.Whole(stream))
			check := func(name string, pieces []piece) {
				t.Helper()
				got := parse(pieces)
				if !reflect.DeepEqual(got.Records(), want.Records()) || !reflect.DeepEqual(got.Hello(), want.Hello()) {
					t.Errorf("%s %s: records or hello differ from the one-piece parse\n got %+v\nwant %+v",
						VersionString(version), name, got.Hello(), want.Hello())
				}
			}
			check("1-byte pieces", streamtest.Segmentize(stream, 1, 0))
			check("1448-byte segments", streamtest.Segmentize(stream, 1448, 0))
			// Split in two at every position of the first record (the hello) and a bit past.
			firstEnd := int(want.Records()[0].End())
			for split := 1; split < min(firstEnd+12, len(stream)); split++ {
				check("split", []piece{{Offset: 0, Data: stream[:split], Length: split}, {Offset: int64(split), Data: stream[split:], Length: len(stream) - split}})
			}
		}
	}
}

// TestSnaplen cuts each 1448-byte segment to its first 148 bytes, as a 200-byte
// snaplen does, and drops whole segments; the parse must never invent a record.
func TestSnaplen(t *testing.T) {
	certificate := selfSignedCertificate(t, 200)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		session := runTLS(t, version, certificate, 60000)
		for _, side := range []struct {
			name   string
			stream []byte
		}{{"client", session.clientStream}, {"server", session.serverStream}} {
			truth := parse(streamtest.Whole(side.stream))
			for _, cut := range []struct {
				name          string
				capturedBytes int
				holes         []int
			}{
				{"snaplen 200", 148, nil},
				{"snaplen 200 with holes", 148, []int{1, 3}},
				{"hole at second segment", 0, []int{1}},
				{"snaplen 60", 8, nil},
			} {
				pieces := streamtest.Segmentize(side.stream, 1448, cut.capturedBytes, cut.holes...)
				parsed := parse(pieces)
				last := pieces[len(pieces)-1]
				handedOverEnd := last.Offset + int64(last.Length)
				name := VersionString(version) + " " + side.name + " " + cut.name
				t.Run(name, func(t *testing.T) {
					checkNoInventedRecords(t, parsed.Records(), truth.Records())
					if len(parsed.Records()) == 0 || parsed.Records()[0].Offset != 0 {
						t.Fatalf("first record not found")
					}
					hello := parsed.Hello()
					if cut.capturedBytes >= 148 && side.name == "server" {
						// The ServerHello's fixed part and the cipher suite fit in 148 bytes.
						if hello.CipherSuite != session.serverState.CipherSuite {
							t.Errorf("cipher suite %x, want %x", hello.CipherSuite, session.serverState.CipherSuite)
						}
						if hello.NegotiatedVersion != 0 && hello.NegotiatedVersion != session.serverState.Version {
							t.Errorf("negotiated version %x, want %x or unknown", hello.NegotiatedVersion, session.serverState.Version)
						}
					}
					// Records starting before the end of what was handed over are either
					// found or the stream says it lost sync.
					reachable := 0
					for _, record := range truth.Records() {
						if record.Offset < handedOverEnd {
							reachable++
						}
					}
					if len(parsed.Records()) < reachable && parsed.LostAt() < 0 {
						t.Errorf("records were missed (%d of %d) but the stream never lost sync", len(parsed.Records()), reachable)
					}
				})
			}
		}
	}
}

// Synthetic streams built record by record.

func record(contentType uint8, body []byte) []byte {
	return append([]byte{contentType, 3, 3, byte(len(body) >> 8), byte(len(body))}, body...)
}

func handshakeMessage(messageType uint8, body []byte) []byte {
	return append([]byte{messageType, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

func vector16(body []byte) []byte {
	return append([]byte{byte(len(body) >> 8), byte(len(body))}, body...)
}
func vector8(body []byte) []byte { return append([]byte{byte(len(body))}, body...) }

func extension(extensionType uint16, body []byte) []byte {
	return append([]byte{byte(extensionType >> 8), byte(extensionType)}, vector16(body)...)
}

func clientHelloBody(sni string, alpn []string, versions []uint16) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)          // random
	body = append(body, vector8(make([]byte, 32))...) // session id
	body = append(body, vector16([]byte{0x13, 0x01, 0xc0, 0x2f})...)
	body = append(body, vector8([]byte{0})...)
	var extensions []byte
	extensions = append(extensions, extension(extensionServerName, vector16(append([]byte{0}, vector16([]byte(sni))...)))...)
	var protocols []byte
	for _, protocol := range alpn {
		protocols = append(protocols, vector8([]byte(protocol))...)
	}
	extensions = append(extensions, extension(extensionALPN, vector16(protocols))...)
	var list []byte
	for _, version := range versions {
		list = append(list, byte(version>>8), byte(version))
	}
	extensions = append(extensions, extension(extensionSupportedVersions, vector8(list))...)
	return append(body, vector16(extensions)...)
}

func serverHelloBody(random []byte, suite uint16, selected uint16) []byte {
	body := append([]byte{3, 3}, random...)
	body = append(body, vector8(make([]byte, 32))...)
	body = append(body, byte(suite>>8), byte(suite), 0)
	var extensions []byte
	if selected != 0 {
		extensions = extension(extensionSupportedVersions, []byte{byte(selected >> 8), byte(selected)})
	}
	return append(body, vector16(extensions)...)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSynthetic(t *testing.T) {
	clientHello := handshakeMessage(HandshakeClientHello,
		clientHelloBody("example.test", []string{"h2", "http/1.1"}, []uint16{0x1a1a, VersionTLS13, VersionTLS12}))
	serverHello12 := handshakeMessage(HandshakeServerHello, serverHelloBody(make([]byte, 32), 0xc02f, 0))
	certificate := handshakeMessage(HandshakeCertificate, bytes.Repeat([]byte{0x30}, 3000))
	helloDone := handshakeMessage(HandshakeServerHelloDone, nil)
	appData := record(ContentApplicationData, bytes.Repeat([]byte{0xee}, 1000))

	// A handshake message split over two records, with its header split too.
	serverFlight := concat(serverHello12, certificate, helloDone)
	splitHeaderAt := len(serverHello12) + 2
	spanning := concat(record(ContentHandshake, serverFlight[:splitHeaderAt]), record(ContentHandshake, serverFlight[splitHeaderAt:]))

	tests := []struct {
		name       string
		pieces     func(stream []byte) []piece
		stream     []byte
		wantTLS    bool
		wantSynced bool
		wantLostAt int64
		// wantRecords lists offset, type and handshake types of the records.
		wantOffsets []int64
		wantTypes   [][]uint8
		wantResync  []bool
		wantHello   HelloInfo
	}{
		{
			name:        "handshake message spanning records with a split header",
			stream:      spanning,
			pieces:      streamtest.Whole,
			wantTLS:     true,
			wantSynced:  true,
			wantLostAt:  -1,
			wantOffsets: []int64{0, int64(5 + splitHeaderAt)},
			wantTypes:   [][]uint8{{HandshakeServerHello, HandshakeCertificate}, {HandshakeServerHelloDone}},
			wantHello:   HelloInfo{Found: true, LegacyVersion: VersionTLS12, NegotiatedVersion: VersionTLS12, CipherSuite: 0xc02f},
		},
		{
			name:   "not TLS",
			stream: []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
			pieces: streamtest.Whole, wantTLS: false, wantSynced: false, wantLostAt: -1,
		},
		{
			// The second record header falls into the uncaptured part of the first
			// segment: sync is lost there and found again at the next segment's start.
			name:   "lost in uncaptured bytes then resynced at a segment start",
			stream: concat(record(ContentHandshake, concat(serverHello12, certificate)), record(ContentHandshake, helloDone), appData, appData),
			pieces: func(stream []byte) []piece {
				appStart := len(stream) - 2*len(appData)
				return []piece{
					{Offset: 0, Data: stream[:200], Length: appStart - 30},
					{Offset: int64(appStart - 30), Data: nil, Length: 30},
					{Offset: int64(appStart), Data: stream[appStart:], Length: len(stream) - appStart},
				}
			},
			wantTLS: true, wantSynced: true,
			wantLostAt:  int64(5 + len(serverHello12) + len(certificate)),
			wantOffsets: []int64{0, int64(5 + len(serverHello12) + len(certificate) + 9), int64(5+len(serverHello12)+len(certificate)+9) + int64(len(appData))},
			wantTypes:   [][]uint8{{HandshakeServerHello, HandshakeCertificate}, nil, nil},
			wantResync:  []bool{false, true, false},
			wantHello:   HelloInfo{Found: true, LegacyVersion: VersionTLS12, NegotiatedVersion: VersionTLS12, CipherSuite: 0xc02f},
		},
		{
			// A segment that starts with bytes looking like a header, but whose next
			// header (inside the captured bytes) is not plausible, is not trusted.
			name: "resync refused when the following header is implausible",
			stream: concat(record(ContentApplicationData, make([]byte, 100)), []byte{23, 3, 3, 0, 0},
				[]byte{23, 3, 3, 0, 4, 1, 2, 3, 4, 0x99, 0x99, 0x99, 0x99, 0x99}),
			pieces: func(stream []byte) []piece {
				return []piece{{Offset: 0, Data: stream[:5], Length: 110}, {Offset: 110, Data: stream[110:], Length: len(stream) - 110}}
			},
			wantTLS: true, wantSynced: false, wantLostAt: 105,
			wantOffsets: []int64{0},
			wantTypes:   [][]uint8{nil},
		},
		{
			// After the handshake framing was lost (a message header not captured), a
			// record is read again only when one message fills it exactly.
			name:   "handshake framing lost then found again by an exactly filling message",
			stream: concat(record(ContentHandshake, concat(serverHello12, certificate)), record(ContentHandshake, concat(helloDone, helloDone)), record(ContentHandshake, helloDone)),
			pieces: func(stream []byte) []piece {
				firstEnd := 5 + len(serverHello12) + len(certificate)
				return []piece{
					{Offset: 0, Data: stream[:5+len(serverHello12)+2], Length: firstEnd}, // certificate header cut
					{Offset: int64(firstEnd), Data: stream[firstEnd:], Length: len(stream) - firstEnd},
				}
			},
			wantTLS: true, wantSynced: true, wantLostAt: -1,
			wantOffsets: []int64{0, int64(5 + len(serverHello12) + len(certificate)), int64(5+len(serverHello12)+len(certificate)) + 13},
			wantTypes:   [][]uint8{{HandshakeServerHello}, nil, {HandshakeServerHelloDone}},
			wantHello:   HelloInfo{Found: true, LegacyVersion: VersionTLS12, NegotiatedVersion: VersionTLS12, CipherSuite: 0xc02f},
		},
		{
			// TLS 1.3 HelloRetryRequest in middlebox-compatibility mode: the client's
			// second ClientHello follows its ChangeCipherSpec in the clear.
			name: "client retrying its hello after ChangeCipherSpec",
			stream: concat(record(ContentHandshake, clientHello), record(ContentChangeCipherSpec, []byte{1}),
				record(ContentHandshake, clientHello), record(ContentApplicationData, make([]byte, 50)),
				record(ContentHandshake, make([]byte, 40))),
			pieces:  func(stream []byte) []piece { return streamtest.Segmentize(stream, 7, 0) },
			wantTLS: true, wantSynced: true, wantLostAt: -1,
			wantOffsets: []int64{0, int64(5 + len(clientHello)), int64(11 + len(clientHello)), int64(16 + 2*len(clientHello)), int64(71 + 2*len(clientHello))},
			wantTypes:   [][]uint8{{HandshakeClientHello}, nil, {HandshakeClientHello}, nil, nil},
			wantHello: HelloInfo{Found: true, IsClient: true, SNI: "example.test", ALPN: []string{"h2", "http/1.1"},
				Versions: []uint16{VersionTLS13, VersionTLS12}, LegacyVersion: VersionTLS12},
		},
		{
			name:   "TLS 1.3 server: HelloRetryRequest, compatibility ChangeCipherSpec, ServerHello",
			stream: concat(record(ContentHandshake, handshakeMessage(HandshakeServerHello, serverHelloBody(helloRetryRandom[:], 0x1301, VersionTLS13))), record(ContentChangeCipherSpec, []byte{1}), record(ContentHandshake, handshakeMessage(HandshakeServerHello, serverHelloBody(make([]byte, 32), 0x1302, VersionTLS13))), appData),
			pieces: streamtest.Whole, wantTLS: true, wantSynced: true, wantLostAt: -1,
			wantOffsets: []int64{0, 87, 93, 180},
			wantTypes:   [][]uint8{{HandshakeServerHello}, nil, {HandshakeServerHello}, nil},
			wantHello:   HelloInfo{Found: true, LegacyVersion: VersionTLS12, NegotiatedVersion: VersionTLS13, CipherSuite: 0x1302, HelloRetryRequest: true},
		},
		{
			name:    "ClientHello cut by the snaplen",
			stream:  concat(record(ContentHandshake, clientHello)),
			pieces:  func(stream []byte) []piece { return []piece{{Offset: 0, Data: stream[:100], Length: len(stream)}} },
			wantTLS: true, wantSynced: true, wantLostAt: -1,
			wantOffsets: []int64{0},
			wantTypes:   [][]uint8{{HandshakeClientHello}},
			// The cut falls inside the SNI extension: only the fixed fields are known.
			wantHello: HelloInfo{Found: true, IsClient: true, LegacyVersion: VersionTLS12, Truncated: true},
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			parsed := parse(test.pieces(test.stream))
			if parsed.IsTLS() != test.wantTLS || parsed.Synced() != test.wantSynced || parsed.LostAt() != test.wantLostAt {
				t.Errorf("IsTLS=%t Synced=%t LostAt=%d, want %t %t %d", parsed.IsTLS(), parsed.Synced(), parsed.LostAt(),
					test.wantTLS, test.wantSynced, test.wantLostAt)
			}
			records := parsed.Records()
			var offsets []int64
			var types [][]uint8
			var resynced []bool
			for _, r := range records {
				offsets = append(offsets, r.Offset)
				types = append(types, r.HandshakeTypes)
				resynced = append(resynced, r.Resynced)
			}
			if !reflect.DeepEqual(offsets, test.wantOffsets) || !reflect.DeepEqual(types, test.wantTypes) {
				t.Errorf("records at %v with handshake types %v, want %v %v", offsets, types, test.wantOffsets, test.wantTypes)
			}
			if test.wantResync != nil && !reflect.DeepEqual(resynced, test.wantResync) {
				t.Errorf("resynced %v, want %v", resynced, test.wantResync)
			}
			got := parsed.Hello()
			// The synthetic hellos' randoms are zeros: check only that a captured
			// random is whole, then compare the rest.
			if len(got.Random) != 0 && len(got.Random) != 32 {
				t.Errorf("random of %d bytes, want 32 or none", len(got.Random))
			}
			got.Random = nil
			if !reflect.DeepEqual(got, test.wantHello) {
				t.Errorf("hello\n got %+v\nwant %+v", got, test.wantHello)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	for _, test := range []struct {
		version uint16
		want    string
	}{{0x0301, "1.0"}, {0x0302, "1.1"}, {0x0303, "1.2"}, {0x0304, "1.3"}, {0x0300, "SSL 3.0"}, {0x7f17, ""}} {
		if got := VersionString(test.version); got != test.want {
			t.Errorf("VersionString(%#x) = %q, want %q", test.version, got, test.want)
		}
	}
}

// TestOverlapAndEmptyPieces checks that bytes handed over twice (a retransmission
// the caller did not filter) and empty pieces change nothing.
func TestOverlapAndEmptyPieces(t *testing.T) {
	stream := concat(record(ContentHandshake, handshakeMessage(HandshakeServerHello, serverHelloBody(make([]byte, 32), 0xc02f, 0))),
		record(ContentApplicationData, make([]byte, 300)))
	want := parse(streamtest.Whole(stream))
	got := parse([]piece{
		{Offset: 0, Data: stream[:50], Length: 50},
		{Offset: 0, Data: stream[:60], Length: 60}, // overlaps the first 50 bytes
		{Offset: 60, Data: nil, Length: 0},
		{Offset: 40, Data: stream[40:], Length: len(stream) - 40},
	})
	if !reflect.DeepEqual(got.Records(), want.Records()) || !reflect.DeepEqual(got.Hello(), want.Hello()) {
		t.Fatalf("records %+v, want %+v", got.Records(), want.Records())
	}
}

// TestSSLv2Hello: a client of the SSL 3.0 years opens with a ClientHello in SSL 2.0's
// record format (a 2-byte header with the high bit set) and goes on with SSL 3.0
// records: the stream is TLS, the first record is the ClientHello, and the records
// after it are found where they start.
func TestSSLv2Hello(t *testing.T) {
	hello := []byte{0x80, 46, 1, 3, 0, 0, 21, 0, 0, 0, 16}
	hello = append(hello, make([]byte, 21+16)...)
	if len(hello) != 48 {
		t.Fatalf("test hello is %d bytes", len(hello))
	}
	kex := []byte{ContentHandshake, 3, 0, 0, 4, HandshakeClientKeyExchange, 0, 0, 0}
	s := NewStream()
	data := append(append([]byte(nil), hello...), kex...)
	s.Write(0, data, len(data))
	if !s.IsTLS() {
		t.Fatal("an SSLv2-format ClientHello is not taken for TLS")
	}
	rs := s.Records()
	if len(rs) != 2 || rs[0].End() != 48 || rs[1].Offset != 48 || rs[1].End() != int64(len(data)) {
		t.Fatalf("records %+v, want the hello (0-48) and a record at 48", rs)
	}
	if len(rs[0].HandshakeTypes) != 1 || rs[0].HandshakeTypes[0] != HandshakeClientHello {
		t.Errorf("first record's handshake types %v, want a ClientHello", rs[0].HandshakeTypes)
	}
	if !s.Hello().IsClient {
		t.Error("the stream's hello is not the client's")
	}
	// A stream that begins with other bytes with the high bit set is not TLS.
	other := NewStream()
	other.Write(0, []byte{0x80, 46, 7, 3, 0, 0, 0, 0, 0}, 9)
	if other.IsTLS() {
		t.Error("bytes that are no SSLv2 ClientHello taken for TLS")
	}
	// Nor one whose header says a hello longer than any TLS record may be (the
	// fuzzer's 0xff 0x30: 32,560 bytes): its record would outgrow the limit
	// every record is held to.
	for _, length := range []int{MaxRecordLength + 3 + 1, 0x7fff} {
		long := NewStream()
		long.Write(0, []byte{0x80 | byte(length>>8), byte(length), 1, 3, 0}, 5)
		if long.IsTLS() {
			t.Errorf("an SSLv2 header of length %d taken for a ClientHello", length)
		}
	}
	// The longest allowed is one.
	longest := MaxRecordLength + 3
	if size, ok := SSLv2Hello([]byte{0x80 | byte(longest>>8), byte(longest), 1, 3, 0}); !ok || size-RecordHeaderBytes != MaxRecordLength {
		t.Errorf("SSLv2Hello of the longest allowed length: %d, %v", size, ok)
	}
}
