// Package tlsrec finds TLS record boundaries in one direction of a TCP byte stream
// and reads what the handshake shows in the clear: ClientHello and ServerHello
// fields and the types of the handshake messages sent before encryption starts.
//
// It is built for captures cut by a small snaplen: each piece of the stream comes
// with its true length, bytes that were not captured are skipped by count, and a
// record boundary that falls into uncaptured bytes makes the stream lose sync rather
// than guess. A conservative resynchronization at the start of a later segment is
// marked on the record it finds.
//
// It is not a TLS implementation: it decrypts nothing, checks no MACs and no
// certificates, and does not decide round trips or flights (package rounds does that
// from who sent what when). It gives records with stream offsets, so callers can say
// where a flight or the application data starts and ends.
package tlsrec

import (
	"fmt"
	"iter"

	"github.com/slowstart/slowstart/internal/inorder"
)

// Record content types.
const (
	ContentChangeCipherSpec uint8 = 20
	ContentAlert            uint8 = 21
	ContentHandshake        uint8 = 22
	ContentApplicationData  uint8 = 23
	ContentHeartbeat        uint8 = 24
)

// Handshake message types.
const (
	HandshakeHelloRequest        uint8 = 0
	HandshakeClientHello         uint8 = 1
	HandshakeServerHello         uint8 = 2
	HandshakeNewSessionTicket    uint8 = 4
	HandshakeEndOfEarlyData      uint8 = 5
	HandshakeEncryptedExtensions uint8 = 8
	HandshakeCertificate         uint8 = 11
	HandshakeServerKeyExchange   uint8 = 12
	HandshakeCertificateRequest  uint8 = 13
	HandshakeServerHelloDone     uint8 = 14
	HandshakeCertificateVerify   uint8 = 15
	HandshakeClientKeyExchange   uint8 = 16
	HandshakeFinished            uint8 = 20
	HandshakeCertificateStatus   uint8 = 22
	HandshakeKeyUpdate           uint8 = 24
)

// Protocol versions as they appear on the wire.
const (
	VersionSSL30 uint16 = 0x0300
	VersionTLS10 uint16 = 0x0301
	VersionTLS11 uint16 = 0x0302
	VersionTLS12 uint16 = 0x0303
	VersionTLS13 uint16 = 0x0304
)

const (
	// RecordHeaderBytes is the size of a record header: type, version, length.
	RecordHeaderBytes = 5
	// MaxRecordLength is the largest record body accepted: 2^14 plus the 2048 bytes
	// of expansion the RFCs allow for ciphertext.
	MaxRecordLength = 1<<14 + 2048
	// MaxStoredRecords bounds the records a Stream keeps; later records are still
	// parsed and counted (RecordCount) but not stored.
	MaxStoredRecords = 1 << 16

	// MaxHandshakeTypesPerRecord bounds Record.HandshakeTypes; real records carry
	// a handful of messages.
	MaxHandshakeTypesPerRecord = 32

	handshakeHeaderBytes = 4
	// maxHelloBytes bounds the ClientHello/ServerHello bytes buffered for parsing.
	maxHelloBytes = 1 << 16
)

// VersionString names a protocol version the way reports show it: "1.0" .. "1.3",
// "SSL 3.0", or "" when v is not a known version.
func VersionString(v uint16) string {
	switch v {
	case VersionSSL30:
		return "SSL 3.0"
	case VersionTLS10:
		return "1.0"
	case VersionTLS11:
		return "1.1"
	case VersionTLS12:
		return "1.2"
	case VersionTLS13:
		return "1.3"
	}
	return ""
}

// Record is one TLS record as seen in the stream.
type Record struct {
	// Offset is the stream offset of the record header's first byte.
	Offset int64
	// ContentType is the record-layer type (20..24). In TLS 1.3 encrypted handshake
	// messages travel as application data (23) too.
	ContentType uint8
	// Version is the record-layer version (TLS 1.3 records say 0x0303 or 0x0301).
	Version uint16
	// Length is the body length in bytes, without the 5-byte header.
	Length int
	// HandshakeTypes lists the handshake message types whose 4-byte header starts in
	// this record, for records in the clear whose bytes were captured. It is nil for
	// encrypted records, for records where the handshake framing was lost, and for
	// records that only continue a message begun in an earlier record. At most
	// MaxHandshakeTypesPerRecord are kept.
	HandshakeTypes []uint8
	// Encrypted reports that the body is protected (application data, and records
	// sent after this direction's ChangeCipherSpec in TLS 1.2 and earlier).
	Encrypted bool
	// CapturedBytes counts the header and body bytes that were captured.
	CapturedBytes int
	// Resynced reports that this record's header was found by resynchronization at
	// the start of a segment after sync was lost, not by following the previous
	// record. The records after it follow from it.
	Resynced bool
}

// End is the stream offset just after the record's last byte.
func (r Record) End() int64 { return r.Offset + RecordHeaderBytes + int64(r.Length) }

// HelloInfo is what a ClientHello or ServerHello showed. Fields are filled as they
// were seen; a hello cut by the capture leaves the fields after the cut empty.
type HelloInfo struct {
	// Found reports that a ClientHello or ServerHello header was seen.
	Found bool
	// IsClient reports that the hello was a ClientHello (this is the client's stream).
	IsClient bool
	// SNI is the server name the client asked for (ClientHello).
	SNI string
	// ALPN holds the protocols the client offered (ClientHello) or the one the server
	// chose (ServerHello, TLS 1.2 and earlier; TLS 1.3 sends its choice encrypted).
	ALPN []string
	// Versions are the versions a client offered in supported_versions, GREASE
	// values left out; nil when the extension was absent or not captured.
	Versions []uint16
	// LegacyVersion is the hello's legacy_version field.
	LegacyVersion uint16
	// Random is the hello's 32-byte random (the last hello's, after a
	// HelloRetryRequest), nil when it was not captured. Key logs are keyed by the
	// ClientHello's; TLS 1.2 key derivation needs both.
	Random []byte
	// NegotiatedVersion is the version the server chose (ServerHello): the
	// supported_versions extension when present, else the legacy version; 0 when
	// the part of the ServerHello that decides it was not captured.
	NegotiatedVersion uint16
	// CipherSuite is the suite the server chose (ServerHello), 0 if unknown.
	CipherSuite uint16
	// HelloRetryRequest reports that the server sent a HelloRetryRequest.
	HelloRetryRequest bool
	// Truncated reports that a hello was not captured whole, so fields past the cut
	// are unknown rather than absent.
	Truncated bool
}

type parseState uint8

const (
	stateHeader parseState = iota // collecting a record header
	stateBody                     // inside a record body
	stateLost                     // a record boundary fell into uncaptured bytes
	stateNotTLS                   // the stream does not start like TLS: ignore it
)

// Stream parses one direction of a TLS connection. The zero value is not ready:
// use NewStream. A Stream is not safe for concurrent use.
type Stream struct {
	nextOffset int64 // stream offset of the next byte expected
	state      parseState
	decided    bool // whether the first record header was judged
	isTLS      bool
	lostAt     int64

	header       [RecordHeaderBytes]byte
	headerN      int
	recordOffset int64
	recordType   uint8
	// recordEncrypted reports that the current record's body is protected.
	recordEncrypted bool
	bodyLeft        int
	current         int  // index of the current record in records, -1 if not stored
	resyncNext      bool // the next record header comes from resynchronization

	records     recordStore
	recordCount int64

	changeCipherSpecSent bool
	hello                HelloInfo
	handshake            handshakeReader
}

// NewStream returns a parser for one direction of a TCP stream.
func NewStream() *Stream {
	return &Stream{lostAt: -1, current: -1}
}

// IsTLS reports whether the first captured bytes of the stream hold a plausible
// TLS record header.
func (s *Stream) IsTLS() bool { return s.isTLS }

// Synced reports whether the parser currently knows where the next record starts.
func (s *Stream) Synced() bool { return s.state == stateHeader || s.state == stateBody }

// LostAt is the stream offset where record sync was most recently lost (a record
// header that was not captured, or an implausible one), or -1 if it never was.
func (s *Stream) LostAt() int64 { return s.lostAt }

// Records returns the records seen so far, in stream order, in a slice of its
// own; the last one may still be in progress. (EachRecord reads them without the
// slice.)
func (s *Stream) Records() []Record {
	out := make([]Record, 0, s.records.Len())
	for _, r := range s.records.All() {
		out = append(out, r)
	}
	return out
}

// EachRecord yields the records seen so far, in stream order; the last one may
// still be in progress.
func (s *Stream) EachRecord() iter.Seq2[int, Record] { return s.records.All() }

// RecordCount is the number of records seen, including those past MaxStoredRecords.
func (s *Stream) RecordCount() int64 { return s.recordCount }

// Hello returns what the ClientHello or ServerHello of this stream showed so far.
func (s *Stream) Hello() HelloInfo {
	hello := s.hello
	if s.handshake.buffering && !s.handshake.bufferParsed {
		// A hello still in progress: show what has been captured of it.
		s.handshake.parseHello(&hello, true)
	}
	return hello
}

// String summarizes the stream's parse state for diagnostics.
func (s *Stream) String() string {
	return fmt.Sprintf("tlsrec.Stream{records=%d next=%d synced=%t lost_at=%d tls=%t}",
		s.recordCount, s.nextOffset, s.Synced(), s.lostAt, s.isTLS)
}

// Write hands over the next piece of the stream, in order. offset is the stream
// offset of data[0] (bytes since the first byte of the direction's stream, 0-based);
// length is the segment's true payload length; len(data) <= length (the rest was not
// captured). Pieces arrive in increasing offset order without overlap; offset may be
// larger than the end of the previous piece (bytes missing from the capture: a hole).
// Bytes that overlap what was already handed over are ignored.
func (s *Stream) Write(offset int64, data []byte, length int) {
	if length < len(data) {
		length = len(data)
	}
	if offset < 0 || length == 0 || s.state == stateNotTLS {
		return
	}
	gap, data, end, ok := inorder.Past(s.nextOffset, offset, data, length)
	if !ok {
		return // wholly overlaps what was handed over before
	}
	if gap > 0 {
		s.skip(gap)
	}
	if s.state == stateLost {
		s.tryResync(data)
	}
	s.consume(data)
	if uncaptured := end - s.nextOffset; uncaptured > 0 {
		s.skip(uncaptured)
	}
}

// PlausibleHeader reports whether h starts with what looks like a record header a
// real stack sends: a known content type, a version from SSL 3.0 to TLS 1.3 and a
// length within the limit.
func PlausibleHeader(h []byte) bool {
	if len(h) < RecordHeaderBytes {
		return false
	}
	contentType := h[0]
	version := uint16(h[1])<<8 | uint16(h[2])
	length := int(h[3])<<8 | int(h[4])
	return contentType >= ContentChangeCipherSpec && contentType <= ContentHeartbeat &&
		version >= VersionSSL30 && version <= VersionTLS13 &&
		length <= MaxRecordLength
}

// tryResync looks for a record header at the start of a segment's captured bytes
// after sync was lost. It accepts a candidate only if every record header that
// follows from it inside the captured bytes is plausible too, and the record is not
// empty.
//
// Before the first header was judged (the stream's first bytes were not captured),
// the first segment with a captured header's worth of bytes decides whether the
// stream is TLS at all.
func (s *Stream) tryResync(data []byte) {
	if len(data) < RecordHeaderBytes {
		return
	}
	if !resyncCandidate(data) {
		if !s.decided {
			s.decided = true
			s.state = stateNotTLS
		}
		return
	}
	s.state = stateHeader
	s.headerN = 0
	s.resyncNext = true
	s.handshake.lose()
}

func resyncCandidate(data []byte) bool {
	if !PlausibleHeader(data) || int(data[3])<<8|int(data[4]) == 0 {
		return false
	}
	for position := 0; position+RecordHeaderBytes <= len(data); {
		if !PlausibleHeader(data[position:]) {
			return false
		}
		position += RecordHeaderBytes + (int(data[position+3])<<8 | int(data[position+4]))
	}
	return true
}

// consume parses captured bytes starting at s.nextOffset.
func (s *Stream) consume(data []byte) {
	for len(data) > 0 {
		switch s.state {
		case stateHeader:
			if s.headerN == 0 {
				s.recordOffset = s.nextOffset
			}
			n := copy(s.header[s.headerN:], data)
			s.headerN += n
			s.nextOffset += int64(n)
			data = data[n:]
			if s.headerN == RecordHeaderBytes {
				s.startRecord()
			}
		case stateBody:
			n := min(s.bodyLeft, len(data))
			s.feedBody(data[:n])
			s.nextOffset += int64(n)
			data = data[n:]
			s.bodyLeft -= n
			if r := s.records.At(s.current); r != nil {
				r.CapturedBytes += n
			}
			if s.bodyLeft == 0 {
				s.endRecord()
			}
		default:
			s.nextOffset += int64(len(data))
			return
		}
	}
}

// skip accounts for n stream bytes that were not captured.
func (s *Stream) skip(n int64) {
	for n > 0 {
		switch s.state {
		case stateHeader:
			offset := s.nextOffset
			if s.headerN > 0 {
				offset = s.recordOffset
			}
			s.lose(offset)
		case stateBody:
			step := min(int64(s.bodyLeft), n)
			s.skipBody(int(step))
			s.nextOffset += step
			n -= step
			s.bodyLeft -= int(step)
			if s.bodyLeft == 0 {
				s.endRecord()
			}
		default:
			s.nextOffset += n
			return
		}
	}
}

// lose records that the record boundary at offset is unknown.
func (s *Stream) lose(offset int64) {
	s.state = stateLost
	s.lostAt = offset
	s.headerN = 0
	s.handshake.lose()
	s.finishHello()
}

// SSLv2Hello reports whether h starts with a ClientHello in SSL 2.0's record format,
// which clients of the SSL 3.0 and early TLS years sent first for compatibility: a
// 2-byte header with its high bit set, message type 1 (CLIENT-HELLO) and a version
// of SSL 3.0 or a TLS version. The record's total size (header included) is
// returned; what follows it is SSL 3.0/TLS records.
//
// The header's 15-bit length may say up to 32,767 bytes, but a CLIENT-HELLO holds
// cipher specs of 3 bytes each, a session ID of at most 16 bytes and a challenge of
// 16 to 32 (some hundreds of bytes in all): one whose body would be longer than a
// TLS record may be (MaxRecordLength) is not taken for a hello.
func SSLv2Hello(h []byte) (size int, ok bool) {
	if len(h) < RecordHeaderBytes || h[0]&0x80 == 0 || h[2] != 1 || h[3] != 3 || h[4] > 4 {
		return 0, false
	}
	length := int(h[0]&0x7f)<<8 | int(h[1])
	if length < 3+6 { // type, version, and three 2-byte lengths at least
		return 0, false
	}
	if size = 2 + length; size-RecordHeaderBytes > MaxRecordLength {
		return 0, false
	}
	return size, true
}

// startRecord handles a complete record header in s.header.
func (s *Stream) startRecord() {
	s.headerN = 0
	if size, ok := SSLv2Hello(s.header[:]); ok && !s.decided {
		// The client's first record in SSL 2.0's format: a ClientHello, taken as one
		// handshake record of its size (its body is not a TLS handshake message).
		s.decided, s.isTLS = true, true
		s.hello.Found, s.hello.IsClient = true, true
		record := Record{Offset: s.recordOffset, ContentType: ContentHandshake, Version: uint16(s.header[3])<<8 | uint16(s.header[4]),
			Length: size - RecordHeaderBytes, CapturedBytes: RecordHeaderBytes, HandshakeTypes: []uint8{HandshakeClientHello}}
		s.recordType, s.recordEncrypted, s.bodyLeft = ContentApplicationData, false, record.Length
		s.recordCount++
		var r *Record
		if s.current, r = s.store(); r != nil {
			*r = record
		}
		s.state = stateBody
		if s.bodyLeft == 0 {
			s.endRecord()
		}
		return
	}
	plausible := PlausibleHeader(s.header[:])
	if !s.decided {
		s.decided = true
		s.isTLS = plausible
		if !plausible {
			s.state = stateNotTLS
			return
		}
	}
	if !plausible {
		s.lose(s.recordOffset)
		return
	}
	// The record's fields, stored in place below (a Record built whole and
	// copied stalled on the copy).
	contentType, length, encrypted := s.header[0], int(s.header[3])<<8|int(s.header[4]), false
	resynced := s.resyncNext
	s.resyncNext = false
	s.recordType = contentType
	s.bodyLeft = length

	switch contentType {
	case ContentApplicationData:
		encrypted = true
	case ContentChangeCipherSpec:
		// Records after this one are protected, unless this is TLS 1.3's
		// middlebox-compatibility ChangeCipherSpec on the server side (1.3 servers
		// protect from the ServerHello on and send type 23 for all of it).
		if !(s.hello.Found && !s.hello.IsClient && s.hello.NegotiatedVersion == VersionTLS13) {
			s.changeCipherSpecSent = true
		}
	case ContentHandshake:
		encrypted = s.changeCipherSpecSent
		s.handshake.startRecord(length, s.changeCipherSpecSent && s.clientMayRetryHello())
		if s.handshake.probe == probeClientHello {
			encrypted = false // tentative: decided by the probe
		}
	default:
		encrypted = s.changeCipherSpecSent
	}
	s.recordEncrypted = encrypted

	s.recordCount++
	var r *Record
	if s.current, r = s.store(); r != nil {
		r.Offset, r.ContentType, r.Version = s.recordOffset, contentType, uint16(s.header[1])<<8|uint16(s.header[2])
		r.Length, r.CapturedBytes, r.Resynced, r.Encrypted = length, RecordHeaderBytes, resynced, encrypted
	}
	s.state = stateBody
	if s.bodyLeft == 0 {
		s.endRecord()
	}
}

// store makes room for the next record (unless MaxStoredRecords are kept):
// its index and the record, zero, to be filled in place; or -1 and nil. The
// records before it change no more, but the one a handshake message header in
// progress began in: they are encoded.
func (s *Stream) store() (int, *Record) {
	if s.records.Len() >= MaxStoredRecords {
		return -1, nil
	}
	keep := s.records.Len()
	if i, ok := s.handshake.pendingHeaderRecord(); ok {
		keep = min(keep, i)
	}
	s.records.FreezeBefore(keep)
	return s.records.Len(), s.records.AppendZero()
}

// clientMayRetryHello reports whether this client stream may send a second
// ClientHello in the clear after its ChangeCipherSpec (TLS 1.3 HelloRetryRequest in
// middlebox-compatibility mode).
func (s *Stream) clientMayRetryHello() bool {
	if !s.hello.IsClient {
		return false
	}
	for _, version := range s.hello.Versions {
		if version == VersionTLS13 {
			return true
		}
	}
	return false
}

func (s *Stream) endRecord() {
	s.state = stateHeader
	s.headerN = 0
	if s.recordType == ContentHandshake {
		s.handshake.endRecord()
	}
	s.current = -1
}

// handshakeInClear reports whether the current record's body goes to the
// handshake reader.
func (s *Stream) handshakeInClear() bool {
	return s.recordType == ContentHandshake && !s.recordEncrypted
}

func (s *Stream) feedBody(data []byte) {
	if !s.handshakeInClear() {
		return
	}
	s.handshake.feed(data, s)
}

func (s *Stream) skipBody(n int) {
	if !s.handshakeInClear() {
		return
	}
	s.handshake.skip(n, s)
}

// noteHandshakeType is called by the handshake reader for each message header,
// with the index of the record where the header started.
func (s *Stream) noteHandshakeType(recordIndex int, messageType uint8) {
	if r := s.records.At(recordIndex); r != nil && len(r.HandshakeTypes) < MaxHandshakeTypesPerRecord {
		r.HandshakeTypes = append(r.HandshakeTypes, messageType)
	}
}

// probeFailed is called by the handshake reader when the start of a record does not
// look like a cleartext handshake message.
func (s *Stream) probeFailed(kind probeKind) {
	if kind == probeClientHello {
		s.recordEncrypted = true
	}
	r := s.records.At(s.current)
	if r == nil {
		return
	}
	r.HandshakeTypes = nil
	r.Encrypted = s.recordEncrypted
}

// finishHello parses a hello whose buffering ended (complete or cut).
func (s *Stream) finishHello() {
	reader := &s.handshake
	if !reader.buffering || reader.bufferParsed {
		return
	}
	reader.parseHello(&s.hello, reader.bufferBroken || reader.messageLeft > 0)
	reader.bufferParsed = true
	reader.buffering = false
}
