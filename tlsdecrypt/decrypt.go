// Package tlsdecrypt decrypts the TLS records of one connection from both
// directions of its TCP byte stream, with the secrets of an NSS key log (package
// keylog): TLS 1.2 with AES-GCM, ChaCha20-Poly1305 or AES-CBC (HMAC-SHA1/SHA256/
// SHA384, MAC-then-encrypt or encrypt-then-MAC), and TLS 1.3 with its three
// suites, key updates and 0-RTT data included.
//
// It is fed what tlsrec is fed: each direction's new in-order bytes with their
// stream offset and true length (captures cut by a snaplen, holes); bytes that
// fill a hole later (a retransmission seen after the bytes above it) are taken
// too, within a bounded wait. It gives every
// protected record with the TCP stream offsets its ciphertext lay at, its inner
// content type and plaintext, and it knows exactly where each side's handshake
// ended (the record that carried its Finished), so that session tickets, key
// updates and alerts are not taken for application data.
//
// It never invents plaintext: a record whose bytes were not all captured is
// reported lost (with its plaintext length when the cipher fixes it), and a record
// that does not authenticate under the keys stops its direction with the reason.
// A record boundary that falls into uncaptured bytes stops the direction too:
// without the boundary the record sequence numbers, and so the nonces, are
// unknown. Without keys for the connection it gives nothing.
//
// It does not parse HTTP (see packages httpmsg, http2msg and tlshttp), verify
// certificates or Finished MACs, or follow TLS 1.2 renegotiation, and it does not
// decrypt TLS 1.0/1.1, SSL, RSA key exchanges without a CLIENT_RANDOM line, or
// QUIC.
package tlsdecrypt

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"

	"github.com/slowstart/slowstart/flow"
	"github.com/slowstart/slowstart/internal/inorder"
	"github.com/slowstart/slowstart/keylog"
	"github.com/slowstart/slowstart/tlsrec"
)

// Epoch names the keys a record was protected with.
type Epoch uint8

// Epochs.
const (
	EpochEarly       Epoch = iota + 1 // TLS 1.3 0-RTT data (client)
	EpochHandshake                    // TLS 1.3 handshake traffic keys
	EpochApplication                  // TLS 1.3 application traffic keys; TLS 1.2 keys
)

func (e Epoch) String() string {
	switch e {
	case EpochEarly:
		return "early"
	case EpochHandshake:
		return "handshake"
	case EpochApplication:
		return "application"
	}
	return "none"
}

const (
	// MaxQueuedBytes bounds the client's protected records kept while the
	// server's hello, which says how to decrypt them, is not complete yet.
	MaxQueuedBytes = 1 << 20
	// maxMessageBytes bounds a decrypted handshake message kept for parsing
	// (EncryptedExtensions); longer ones are framed and skipped.
	maxMessageBytes = 1 << 14
)

// Reasons a record was not decrypted.
const (
	ReasonNotCaptured     = "the record was not captured whole (capture hole or snaplen)"
	ReasonStreamEnded     = "the stream ended inside the record"
	ReasonEarlyDataNoKeys = "0-RTT early data, and the key log has no CLIENT_EARLY_TRAFFIC_SECRET for it"
)

// Record is one protected record of the connection.
type Record struct {
	Dir flow.Dir
	// Offset is the TCP stream offset of the record header's first byte, End the
	// offset just after its last byte.
	Offset, End int64
	// FirstNs is the time given with the piece that carried the record's first
	// byte, LastNs the latest time of the pieces that carried any of it: when the
	// record was complete (pieces filling a hole late can carry its first bytes
	// after its last ones).
	FirstNs, LastNs int64
	// Epoch is the keys the record was protected with; KeyPhase counts the TLS
	// 1.3 key updates of this direction before it. For a lost TLS 1.3 record they
	// are the keys it would have had unless it carried a key change.
	Epoch    Epoch
	KeyPhase int
	// Seq is the record's sequence number under its keys.
	Seq uint64
	// OuterType is the record header's content type; ContentType the real one
	// (TLS 1.3 hides it inside the encryption). ContentType is 0 for a lost TLS
	// 1.3 record.
	OuterType, ContentType uint8
	// Plaintext is the decrypted content, valid only during the OnRecord call.
	Plaintext []byte
	// PlaintextLength is len(Plaintext), or for a lost record the length the
	// cipher fixes (TLS 1.2 AEAD suites) or -1 when padding hides it.
	PlaintextLength int
	// HandshakeTypes lists the handshake messages that end in this record
	// (ContentType 22).
	HandshakeTypes []uint8
	// AfterHandshake reports that the record came after this side's Finished.
	AfterHandshake bool
	// Lost reports that the record was not decrypted; Reason says why.
	Lost   bool
	Reason string
}

// Config sets up a Decryptor.
type Config struct {
	// Keys is the key log; nil or without an entry for the connection: nothing is
	// decrypted.
	Keys *keylog.Log
	// OnRecord receives each protected record, decrypted or lost, in stream order
	// within each direction. The Record and its plaintext are reused after it
	// returns.
	OnRecord func(*Record)
	// MaxPendingBytes bounds the bytes of one direction that wait for a hole
	// before them to be filled (see Write): 0 means DefaultMaxPendingBytes, a
	// negative value no waiting.
	MaxPendingBytes int
}

// DefaultMaxPendingBytes is the default of Config.MaxPendingBytes.
const DefaultMaxPendingBytes = 1 << 20

// Problem is something that kept records from being decrypted.
type Problem struct {
	Dir    flow.Dir
	Offset int64 // TCP stream offset where it happened
	Reason string
}

func (p Problem) String() string {
	side := "client"
	if p.Dir == flow.ToClient {
		side = "server"
	}
	return fmt.Sprintf("%s stream at offset %d: %s", side, p.Offset, p.Reason)
}

// DirSummary is what happened to one direction.
type DirSummary struct {
	// HandshakeEnd is the TCP stream offset just after the record that carried
	// this side's Finished; -1 when not known.
	HandshakeEnd int64
	// HandshakeEndInferred reports that the Finished was in a lost record and
	// HandshakeEnd is where the next keys were found to start.
	HandshakeEndInferred bool
	// Decrypted and Lost count records.
	Decrypted, Lost int
	// StoppedAt is the TCP stream offset from which nothing more was decrypted,
	// -1 if decryption did not stop; StopReason says why.
	StoppedAt  int64
	StopReason string
}

// Summary is what the Decryptor learned of the connection.
type Summary struct {
	// Keys reports that the key log had secrets for the connection's version.
	Keys bool
	// NoKeysReason says why nothing was decrypted when Keys is false.
	NoKeysReason string
	// Version and CipherSuite are the server's choice (0 if not seen); ALPN the
	// protocol it chose (from the ServerHello, or TLS 1.3's EncryptedExtensions).
	Version     uint16
	CipherSuite uint16
	ALPN        string
	// ClientRandom is the ClientHello's random, the key log's key.
	ClientRandom []byte
	Dirs         [2]DirSummary
	// Problems lists what kept records from being decrypted, in order found
	// (at most maxProblems).
	Problems []Problem
}

const maxProblems = 64

// rawRecord is a record as framed from the stream.
type rawRecord struct {
	offset          int64
	header          [tlsrec.RecordHeaderBytes]byte
	body            []byte // the captured body (whole when whole)
	length          int
	whole           bool
	firstNs, lastNs int64
}

func (r *rawRecord) end() int64 { return r.offset + tlsrec.RecordHeaderBytes + int64(r.length) }

type framing uint8

const (
	framingHeader framing = iota
	framingBody
	framingLost   // a record boundary fell into uncaptured bytes
	framingNotTLS // the stream does not start with a TLS record
)

// side is one direction's state.
type side struct {
	dir   flow.Dir
	hello *tlsrec.Stream

	// Framing.
	next    int64
	framing framing
	decided bool // the first record header was judged
	headerN int
	rec     rawRecord
	timeNs  int64

	// Protection.
	changeCipherSpec bool // TLS 1.2: this side sent ChangeCipherSpec
	cipher           *recordCipher
	epoch            Epoch
	keyPhase         int
	secret           []byte // TLS 1.3: the current traffic secret
	// authenticated: a record authenticated under the current keys.
	authenticated bool
	// lostEnds are the end offsets of the records lost since the last one that
	// authenticated (TLS 1.3 key changes may hide in them).
	lostEnds []int64

	handshakeDone bool
	messages      messageReader

	queue      []rawRecord
	queueBytes int

	// pending pieces wait for a hole before them to be filled, by offset.
	pending      []pendingPiece
	pendingBytes int

	summary   DirSummary
	stopped   bool
	plaintext []byte
	out       Record
}

// Decryptor decrypts one connection. The zero value is not ready: use New. A
// Decryptor is not safe for concurrent use.
type Decryptor struct {
	cfg        Config
	sides      [2]side
	maxPending int

	// Set up once the ServerHello is known.
	setup   bool
	failed  bool // nothing more will be decrypted
	suite   *suite
	summary Summary
	// TLS 1.2 keys, kept until each side's ChangeCipherSpec.
	pending12 [2]*recordCipher
	// TLS 1.3 secrets.
	trafficSecret [2][]byte
	earlySecret   []byte
	hsSecret      [2][]byte
	// clientHelloSeen: the client's first handshake record was read;
	// earlyDataOffered: its ClientHello offered 0-RTT data (early_data extension).
	clientHelloSeen  bool
	earlyDataOffered bool
}

// New returns a Decryptor for one connection.
func New(cfg Config) *Decryptor {
	d := &Decryptor{cfg: cfg, maxPending: cfg.MaxPendingBytes}
	if d.maxPending == 0 {
		d.maxPending = DefaultMaxPendingBytes
	}
	for dir := range d.sides {
		s := &d.sides[dir]
		s.dir = flow.Dir(dir)
		s.hello = tlsrec.NewStream()
		s.summary = DirSummary{HandshakeEnd: -1, StoppedAt: -1}
	}
	return d
}

// Summary returns what was learned so far.
func (d *Decryptor) Summary() Summary {
	out := d.summary
	for dir := range d.sides {
		out.Dirs[dir] = d.sides[dir].summary
	}
	out.Problems = append([]Problem(nil), d.summary.Problems...)
	return out
}

// Write hands over bytes of direction dir: offset is the stream offset of
// data[0], length the true length of the piece (len(data) <= length; the rest
// was not captured), timeNs when it was seen (0 if unknown).
//
// Pieces are best handed over in order, as tlsrec takes them. Bytes already
// handed over are ignored, so retransmissions may be handed over too. A piece
// that starts beyond the bytes handed over waits, with the pieces after it, for
// the missing bytes (a retransmission that fills the hole), up to
// Config.MaxPendingBytes; bytes still missing then, or at Close, are a hole.
func (d *Decryptor) Write(dir flow.Dir, offset int64, data []byte, length int, timeNs int64) {
	if length < len(data) {
		length = len(data)
	}
	if offset < 0 || length == 0 || d.failed || dir > flow.ToClient {
		return
	}
	s := &d.sides[dir]
	if offset > s.next && d.maxPending > 0 {
		s.addPending(offset, data, length, timeNs)
		for len(s.pending) > 0 && s.pendingBytes > d.maxPending {
			// No room to wait longer: the oldest hole stays a hole.
			d.processPending(s, 1)
		}
		return
	}
	d.process(s, offset, data, length, timeNs)
	d.processPending(s, 0)
}

// pendingPiece is a piece waiting for the bytes before it.
type pendingPiece struct {
	offset int64
	data   []byte
	length int
	timeNs int64
}

func (s *side) addPending(offset int64, data []byte, length int, timeNs int64) {
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].offset > offset })
	s.pending = slices.Insert(s.pending, i, pendingPiece{offset, bytes.Clone(data), length, timeNs})
	s.pendingBytes += len(data)
}

// processPending hands over the waiting pieces that now follow the bytes handed
// over, and at least the first force of them whatever the hole before it.
func (d *Decryptor) processPending(s *side, force int) {
	for len(s.pending) > 0 && (force > 0 || s.pending[0].offset <= s.next) {
		p := s.pending[0]
		s.pending = s.pending[1:]
		s.pendingBytes -= len(p.data)
		force--
		d.process(s, p.offset, p.data, p.length, p.timeNs)
	}
	if len(s.pending) == 0 {
		s.pending = nil
	}
}

// process hands a piece to the hello parser and the record framing, in order.
func (d *Decryptor) process(s *side, offset int64, data []byte, length int, timeNs int64) {
	if d.failed {
		return
	}
	if !d.setup {
		s.hello.Write(offset, data, length)
	}
	gap, data, end, ok := inorder.Past(s.next, offset, data, length)
	if !ok || s.framing == framingNotTLS || s.stopped {
		return
	}
	s.timeNs = timeNs
	if gap > 0 {
		d.skip(s, gap)
	}
	d.consume(s, data)
	if uncaptured := end - s.next; uncaptured > 0 {
		d.skip(s, uncaptured)
	}
}

// Close ends both directions: a record cut by the end of the stream is lost, and
// records still waiting for the server's hello are given up.
func (d *Decryptor) Close() {
	for dir := range d.sides {
		d.processPending(&d.sides[dir], len(d.sides[dir].pending))
	}
	for dir := range d.sides {
		s := &d.sides[dir]
		if s.framing == framingBody && !s.stopped && !d.failed {
			s.rec.whole = false
			d.lostRecord(s, &s.rec, ReasonStreamEnded)
		}
		s.framing = framingLost
	}
	client := &d.sides[flow.ToServer]
	if len(client.queue) > 0 && !d.failed {
		d.problem(client, client.queue[0].offset, "the server's hello was not seen, so the client's protected records cannot be decrypted")
		client.queue = nil
	}
}

func (d *Decryptor) problem(s *side, offset int64, reason string) {
	if len(d.summary.Problems) < maxProblems {
		d.summary.Problems = append(d.summary.Problems, Problem{Dir: s.dir, Offset: offset, Reason: reason})
	}
}

// stop ends decryption in one direction.
func (d *Decryptor) stop(s *side, offset int64, reason string) {
	if s.stopped {
		return
	}
	s.stopped = true
	s.summary.StoppedAt = offset
	s.summary.StopReason = reason
	s.queue = nil
	d.problem(s, offset, reason)
}

// fail ends decryption in both directions, for a reason of the whole connection.
func (d *Decryptor) fail(offset int64, s *side, reason string) {
	d.failed = true
	for dir := range d.sides {
		other := &d.sides[dir]
		at := other.next
		if other == s {
			at = offset
		}
		if other.stopped {
			continue
		}
		other.stopped = true
		other.summary.StoppedAt = at
		other.summary.StopReason = reason
		other.queue = nil
	}
	d.problem(s, offset, reason)
}

// noKeys ends decryption quietly: the key log does not cover the connection.
func (d *Decryptor) noKeys(reason string) {
	d.failed = true
	d.summary.NoKeysReason = reason
	for dir := range d.sides {
		d.sides[dir].queue = nil
	}
}

// consume frames captured bytes starting at s.next.
func (d *Decryptor) consume(s *side, data []byte) {
	for len(data) > 0 && !s.stopped && !d.failed {
		switch s.framing {
		case framingHeader:
			if s.headerN == 0 {
				s.rec.offset = s.next
				s.rec.firstNs, s.rec.lastNs = s.timeNs, s.timeNs
			}
			s.rec.lastNs = max(s.rec.lastNs, s.timeNs)
			n := copy(s.rec.header[s.headerN:], data)
			s.headerN += n
			s.next += int64(n)
			data = data[n:]
			if s.headerN < tlsrec.RecordHeaderBytes {
				return
			}
			s.headerN = 0
			if !d.startRecord(s) {
				return
			}
		case framingBody:
			n := int(min(s.rec.end()-s.next, int64(len(data))))
			s.rec.lastNs = max(s.rec.lastNs, s.timeNs)
			if s.rec.whole {
				s.rec.body = append(s.rec.body, data[:n]...)
			}
			s.next += int64(n)
			data = data[n:]
			if s.next == s.rec.end() {
				d.endRecord(s)
			}
		default:
			s.next += int64(len(data))
			return
		}
	}
}

// skip accounts for n stream bytes that were not captured.
func (d *Decryptor) skip(s *side, n int64) {
	for n > 0 && !s.stopped && !d.failed {
		switch s.framing {
		case framingHeader:
			offset := s.next
			if s.headerN > 0 {
				offset = s.rec.offset
			}
			if !s.decided {
				// The stream's first bytes are missing: nothing says where records start.
				s.framing = framingNotTLS
				return
			}
			d.stop(s, offset, "a record header was not captured (capture hole or snaplen), so record boundaries and sequence numbers are unknown from here on")
			s.framing = framingLost
		case framingBody:
			step := min(s.rec.end()-s.next, n)
			s.rec.whole = false
			s.rec.lastNs = max(s.rec.lastNs, s.timeNs)
			s.next += step
			n -= step
			if s.next == s.rec.end() {
				d.endRecord(s)
			}
		default:
			s.next += n
			return
		}
	}
	if s.stopped || d.failed {
		s.next += n
	}
}

// startRecord judges a complete record header; it reports whether framing goes on.
func (d *Decryptor) startRecord(s *side) bool {
	h := s.rec.header[:]
	if !s.decided {
		s.decided = true
		if !tlsrec.PlausibleHeader(h) {
			s.framing = framingNotTLS
			return false
		}
	}
	if !tlsrec.PlausibleHeader(h) {
		d.stop(s, s.rec.offset, fmt.Sprintf("implausible record header %x: record framing lost", h))
		s.framing = framingLost
		return false
	}
	s.rec.length = int(binary.BigEndian.Uint16(h[3:5]))
	s.rec.body = s.rec.body[:0]
	s.rec.whole = true
	s.framing = framingBody
	if s.rec.length == 0 {
		d.endRecord(s)
	}
	return true
}

// endRecord handles a framed record.
func (d *Decryptor) endRecord(s *side) {
	s.framing = framingHeader
	s.rec.lastNs = max(s.rec.lastNs, s.timeNs)
	if !s.rec.whole {
		s.rec.body = s.rec.body[:0]
	}
	d.record(s, &s.rec)
}

// record handles one framed record: a cleartext one updates the state, a
// protected one is decrypted, or queued until the server's hello says how.
func (d *Decryptor) record(s *side, r *rawRecord) {
	if s.stopped || d.failed {
		return
	}
	if !d.setup {
		d.trySetup(s, r)
		if d.failed {
			return
		}
	}
	contentType := r.header[0]
	if s.dir == flow.ToServer && !d.clientHelloSeen && contentType == tlsrec.ContentHandshake {
		d.clientHelloSeen = true
		d.earlyDataOffered = r.whole && offersEarlyData(r.body)
	}
	if !d.setup {
		mayBeProtected := contentType == tlsrec.ContentApplicationData ||
			(s.changeCipherSpec && contentType != tlsrec.ContentChangeCipherSpec)
		if s.dir == flow.ToClient && mayBeProtected {
			d.fail(r.offset, s, "the server's hello was not captured whole, so its version and cipher suite are unknown")
			return
		}
		if mayBeProtected || len(s.queue) > 0 {
			d.enqueue(s, r)
			return
		}
		if contentType == tlsrec.ContentChangeCipherSpec {
			s.changeCipherSpec = true
		}
		return
	}
	if !d.protected(s, contentType) {
		if contentType == tlsrec.ContentChangeCipherSpec && d.summary.Version == tlsrec.VersionTLS12 {
			d.changeCipherSpec12(s, r)
		}
		return
	}
	d.decrypt(s, r)
}

// enqueue keeps a copy of a client record that cannot be judged yet.
func (d *Decryptor) enqueue(s *side, r *rawRecord) {
	if s.queueBytes+len(r.body) > MaxQueuedBytes {
		d.stop(s, r.offset, fmt.Sprintf("more than %d bytes of protected records before the server's hello", MaxQueuedBytes))
		return
	}
	q := *r
	q.body = append([]byte(nil), r.body...)
	s.queue = append(s.queue, q)
	s.queueBytes += len(q.body)
}

// protected reports whether a record of contentType is protected, once the
// version is known.
func (d *Decryptor) protected(s *side, contentType uint8) bool {
	if d.summary.Version == tlsrec.VersionTLS13 {
		// Everything protected travels as application data; the
		// middlebox-compatibility ChangeCipherSpec and the hellos do not.
		return contentType == tlsrec.ContentApplicationData
	}
	return s.changeCipherSpec
}

// trySetup derives the keys once the server's hello is known. It is called for
// every record until then.
func (d *Decryptor) trySetup(s *side, r *rawRecord) {
	server := d.sides[flow.ToClient].hello.Hello()
	if !server.Found || server.IsClient || server.NegotiatedVersion == 0 || server.CipherSuite == 0 {
		return
	}
	client := d.sides[flow.ToServer].hello.Hello()
	d.setup = true
	d.summary.Version = server.NegotiatedVersion
	d.summary.CipherSuite = server.CipherSuite
	if len(server.ALPN) == 1 {
		d.summary.ALPN = server.ALPN[0]
	}
	if client.Random == nil {
		d.fail(r.offset, s, "the ClientHello's random was not captured, so the key log cannot be searched")
		return
	}
	d.summary.ClientRandom = client.Random
	version := server.NegotiatedVersion
	if version != tlsrec.VersionTLS12 && version != tlsrec.VersionTLS13 {
		d.noKeys(fmt.Sprintf("TLS version %s is not decrypted (only 1.2 and 1.3)", versionName(version)))
		return
	}
	d.suite = suites[server.CipherSuite]
	if d.suite == nil || d.suite.tls13 != (version == tlsrec.VersionTLS13) {
		d.noKeys(fmt.Sprintf("cipher suite %s is not decrypted", SuiteName(server.CipherSuite)))
		return
	}
	if version == tlsrec.VersionTLS13 {
		d.setup13(client.Random)
	} else {
		d.setup12(client.Random, server.Random, r, s)
	}
	if d.failed {
		return
	}
	// Replay the client's records that waited for the hello.
	c := &d.sides[flow.ToServer]
	queued := c.queue
	c.queue, c.queueBytes = nil, 0
	for i := range queued {
		d.record(c, &queued[i])
	}
}

func versionName(v uint16) string {
	if name := tlsrec.VersionString(v); name != "" {
		return name
	}
	return fmt.Sprintf("0x%04x", v)
}

func (d *Decryptor) setup12(clientRandom, serverRandom []byte, r *rawRecord, s *side) {
	master, ok := d.cfg.Keys.Secret(keylog.ClientRandom, clientRandom)
	if !ok {
		d.noKeys("the key log has no CLIENT_RANDOM line for client random " + hex.EncodeToString(clientRandom))
		return
	}
	if serverRandom == nil {
		d.fail(r.offset, s, "the ServerHello's random was not captured, so the TLS 1.2 keys cannot be derived")
		return
	}
	if len(master) != 48 {
		d.fail(r.offset, s, fmt.Sprintf("the key log's master secret has %d bytes, want 48", len(master)))
		return
	}
	d.summary.Keys = true
	client, server := keyBlock12(d.suite, master, clientRandom, serverRandom)
	var err error
	if d.pending12[flow.ToServer], err = newCipher12(d.suite, client); err == nil {
		d.pending12[flow.ToClient], err = newCipher12(d.suite, server)
	}
	if err != nil {
		d.fail(r.offset, s, err.Error())
		return
	}
	// A side whose ChangeCipherSpec came before the server's hello was complete
	// (the client's, when its stream is fed first) is protected already.
	for dir := range d.sides {
		if side := &d.sides[dir]; side.changeCipherSpec && side.cipher == nil {
			side.cipher, side.epoch = d.pending12[dir], EpochApplication
		}
	}
}

func (d *Decryptor) setup13(clientRandom []byte) {
	labels := [2][2]string{
		flow.ToServer: {keylog.ClientHandshakeTrafficSecret, keylog.ClientTrafficSecret0},
		flow.ToClient: {keylog.ServerHandshakeTrafficSecret, keylog.ServerTrafficSecret0},
	}
	found := 0
	for dir := range d.sides {
		var ok1, ok2 bool
		d.hsSecret[dir], ok1 = d.cfg.Keys.Secret(labels[dir][0], clientRandom)
		d.trafficSecret[dir], ok2 = d.cfg.Keys.Secret(labels[dir][1], clientRandom)
		if ok1 {
			found++
		}
		if ok2 {
			found++
		}
	}
	d.earlySecret, _ = d.cfg.Keys.Secret(keylog.ClientEarlyTrafficSecret, clientRandom)
	if found == 0 {
		d.noKeys("the key log has no TLS 1.3 traffic secrets for client random " + hex.EncodeToString(clientRandom))
		return
	}
	d.summary.Keys = true
	for dir := range d.sides {
		s := &d.sides[dir]
		switch {
		case s.dir == flow.ToServer && d.earlySecret != nil && d.earlyDataOffered:
			d.enter13(s, EpochEarly, d.earlySecret)
		case d.hsSecret[dir] != nil:
			d.enter13(s, EpochHandshake, d.hsSecret[dir])
		default:
			d.stop(s, s.next, "the key log has no handshake traffic secret for this side")
		}
	}
}

// enter13 switches a side to new TLS 1.3 keys, from sequence number 0.
func (d *Decryptor) enter13(s *side, epoch Epoch, secret []byte) bool {
	c, err := newCipher13(d.suite, secret)
	if err != nil {
		d.stop(s, s.next, err.Error())
		return false
	}
	s.cipher, s.epoch, s.secret = c, epoch, secret
	s.authenticated = false
	s.lostEnds = s.lostEnds[:0]
	return true
}

// nextCipher13 is the cipher a side switches to after the current epoch, and
// that epoch (nil when there is none to try).
func (d *Decryptor) nextCipher13(s *side) (*recordCipher, Epoch, []byte) {
	var secret []byte
	var epoch Epoch
	switch s.epoch {
	case EpochEarly:
		secret, epoch = d.hsSecret[s.dir], EpochHandshake
	case EpochHandshake:
		secret, epoch = d.trafficSecret[s.dir], EpochApplication
	case EpochApplication:
		secret, epoch = nextSecret13(d.suite, s.secret), EpochApplication
	}
	if secret == nil {
		return nil, 0, nil
	}
	c, err := newCipher13(d.suite, secret)
	if err != nil {
		return nil, 0, nil
	}
	return c, epoch, secret
}

// changeCipherSpec12 turns a TLS 1.2 side's protection on.
func (d *Decryptor) changeCipherSpec12(s *side, r *rawRecord) {
	s.changeCipherSpec = true
	s.cipher = d.pending12[s.dir]
	s.epoch = EpochApplication
	if s.cipher == nil {
		d.stop(s, r.end(), "no keys for this side")
	}
}

// lostRecord reports a protected record that was not decrypted, and counts its
// sequence number.
func (d *Decryptor) lostRecord(s *side, r *rawRecord, reason string) {
	out := &s.out
	*out = Record{
		Dir: s.dir, Offset: r.offset, End: r.end(), FirstNs: r.firstNs, LastNs: r.lastNs,
		Epoch: s.epoch, KeyPhase: s.keyPhase, OuterType: r.header[0], PlaintextLength: -1,
		AfterHandshake: s.handshakeDone, Lost: true, Reason: reason,
	}
	if s.cipher != nil {
		out.Seq = s.cipher.seq
		out.PlaintextLength = s.cipher.plaintextLength(r.length)
		s.cipher.seq++
	}
	tls13 := d.summary.Version == tlsrec.VersionTLS13
	if !tls13 {
		out.ContentType = r.header[0]
	}
	s.summary.Lost++
	d.problem(s, r.offset, reason)
	if tls13 {
		s.lostEnds = append(s.lostEnds, r.end())
		s.messages.lose()
	} else if !s.handshakeDone {
		// TLS 1.2: the first protected record is the Finished, lost or not.
		d.endHandshake(s, r.end(), false)
	} else if r.header[0] == tlsrec.ContentHandshake {
		s.messages.lose()
	}
	d.emit(out)
}

func (d *Decryptor) emit(r *Record) {
	if d.cfg.OnRecord != nil {
		d.cfg.OnRecord(r)
	}
}

func (d *Decryptor) endHandshake(s *side, end int64, inferred bool) {
	s.handshakeDone = true
	s.summary.HandshakeEnd = end
	s.summary.HandshakeEndInferred = inferred
}

// decrypt removes a protected record's protection and reports it.
func (d *Decryptor) decrypt(s *side, r *rawRecord) {
	if s.cipher == nil {
		d.stop(s, r.offset, "no keys for this side")
		return
	}
	if !r.whole {
		d.lostRecord(s, r, ReasonNotCaptured)
		return
	}
	header := r.header[:]
	plaintext, contentType, err := s.cipher.open(s.plaintext[:0], s.cipher.seq, header, r.body)
	if err != nil && d.summary.Version == tlsrec.VersionTLS13 {
		plaintext, contentType, err = d.tryNextKeys13(s, r)
		if err == errSkipped {
			return
		}
	}
	if err != nil {
		epoch := s.epoch.String() + " keys"
		if d.summary.Version == tlsrec.VersionTLS12 {
			epoch = "keys of the key log's master secret"
		}
		d.stop(s, r.offset, fmt.Sprintf("record %d of this side (sequence number %d) did not decrypt under the %s: %v; the key log's secrets may not belong to this connection, or the capture changed the bytes",
			s.summary.Decrypted+s.summary.Lost+1, s.cipher.seq, epoch, err))
		return
	}
	s.plaintext = plaintext
	out := &s.out
	*out = Record{
		Dir: s.dir, Offset: r.offset, End: r.end(), FirstNs: r.firstNs, LastNs: r.lastNs,
		Epoch: s.epoch, KeyPhase: s.keyPhase, Seq: s.cipher.seq, OuterType: r.header[0], ContentType: contentType,
		Plaintext: plaintext, PlaintextLength: len(plaintext), AfterHandshake: s.handshakeDone,
		HandshakeTypes: out.HandshakeTypes[:0],
	}
	s.cipher.seq++
	s.authenticated = true
	s.lostEnds = s.lostEnds[:0]
	s.summary.Decrypted++

	var switchTo Epoch
	var nextSecret []byte
	keyUpdate := false
	if contentType == tlsrec.ContentHandshake {
		s.messages.feed(plaintext, func(messageType uint8, body []byte) {
			out.HandshakeTypes = append(out.HandshakeTypes, messageType)
			switch messageType {
			case tlsrec.HandshakeFinished:
				if !s.handshakeDone {
					d.endHandshake(s, r.end(), false)
					if d.summary.Version == tlsrec.VersionTLS13 {
						switchTo, nextSecret = EpochApplication, d.trafficSecret[s.dir]
					}
				}
			case tlsrec.HandshakeEndOfEarlyData:
				if s.epoch == EpochEarly {
					switchTo, nextSecret = EpochHandshake, d.hsSecret[s.dir]
				}
			case tlsrec.HandshakeKeyUpdate:
				if s.epoch == EpochApplication && d.summary.Version == tlsrec.VersionTLS13 {
					switchTo, nextSecret = EpochApplication, nextSecret13(d.suite, s.secret)
					keyUpdate = true
				}
			case tlsrec.HandshakeEncryptedExtensions:
				if alpn := parseEncryptedExtensionsALPN(body); alpn != "" {
					d.summary.ALPN = alpn
				}
			}
		})
	} else if d.summary.Version == tlsrec.VersionTLS12 && s.handshakeDone && contentType == tlsrec.ContentChangeCipherSpec {
		// A renegotiation's new keys are not followed.
		d.emit(out)
		d.stop(s, r.end(), "TLS 1.2 renegotiation: the records after this side's second ChangeCipherSpec use keys that are not followed")
		return
	} else if d.summary.Version == tlsrec.VersionTLS12 && !s.handshakeDone {
		// The first protected record must be the Finished.
		d.endHandshake(s, r.end(), false)
		d.problem(s, r.offset, fmt.Sprintf("the first protected record has content type %d, not a handshake message", contentType))
	}
	d.emit(out)

	if switchTo != 0 {
		if nextSecret == nil {
			d.stop(s, r.end(), fmt.Sprintf("the key log has no %s traffic secret for this side", switchTo))
			return
		}
		if d.enter13(s, switchTo, nextSecret) && keyUpdate {
			s.keyPhase++
		}
	}
}

// errSkipped says a record was reported lost and decryption goes on.
var errSkipped = fmt.Errorf("skipped")

// tryNextKeys13 handles a TLS 1.3 record that did not authenticate under the
// current keys: the key change may have been in a lost record, or the client's
// early data ended unseen, or the record is 0-RTT data without its secret.
func (d *Decryptor) tryNextKeys13(s *side, r *rawRecord) ([]byte, uint8, error) {
	header := r.header[:]
	next, epoch, secret := d.nextCipher13(s)
	// Records lost since the last one that authenticated may have carried the key
	// change: then this record is the next keys' number len(lostEnds)-k-1 for the
	// k-th lost record holding it. Without lost records, only the end of early
	// data can pass unseen (the server rejected it, or EndOfEarlyData was not
	// needed).
	tries := len(s.lostEnds)
	if s.epoch == EpochEarly && tries == 0 {
		tries = 1
	}
	if next != nil {
		for seq := range uint64(tries) {
			plaintext, contentType, err := next.open(s.plaintext[:0], seq, header, r.body)
			if err != nil {
				continue
			}
			// The key change happened at the end of lost record number
			// len(lostEnds)-1-seq (or, for early data, just before this one).
			changeAt := r.offset
			if k := len(s.lostEnds) - 1 - int(seq); k >= 0 && k < len(s.lostEnds) {
				changeAt = s.lostEnds[k]
			}
			if s.epoch == EpochHandshake && !s.handshakeDone {
				d.endHandshake(s, changeAt, true)
			}
			keyUpdate := s.epoch == EpochApplication
			s.cipher, s.epoch, s.secret = next, epoch, secret
			if keyUpdate {
				s.keyPhase++
			}
			s.authenticated = false
			s.lostEnds = s.lostEnds[:0]
			next.seq = seq
			return plaintext, contentType, nil
		}
	}
	// 0-RTT data the key log has no secret for: the client's records before its
	// first handshake record.
	if s.dir == flow.ToServer && s.epoch == EpochHandshake && !s.authenticated && d.earlyDataOffered && d.earlySecret == nil {
		out := &s.out
		*out = Record{Dir: s.dir, Offset: r.offset, End: r.end(), FirstNs: r.firstNs, LastNs: r.lastNs,
			Epoch: EpochEarly, OuterType: r.header[0], PlaintextLength: -1, Lost: true, Reason: ReasonEarlyDataNoKeys}
		s.summary.Lost++
		d.problem(s, r.offset, ReasonEarlyDataNoKeys)
		d.emit(out)
		return nil, 0, errSkipped
	}
	return nil, 0, errAuthentication
}

// extensionEarlyData is the early_data extension (RFC 8446, section 4.2.10).
const extensionEarlyData = 42

// offersEarlyData reports whether a record body holding a whole ClientHello
// offers 0-RTT data.
func offersEarlyData(record []byte) bool {
	if len(record) < 4 || record[0] != tlsrec.HandshakeClientHello {
		return false
	}
	body := record[4:]
	skip := func(n int) bool {
		if n > len(body) {
			return false
		}
		body = body[n:]
		return true
	}
	vector := func(lengthBytes int) bool {
		if len(body) < lengthBytes {
			return false
		}
		n := int(body[0])
		if lengthBytes == 2 {
			n = int(binary.BigEndian.Uint16(body))
		}
		return skip(lengthBytes + n)
	}
	// version, random, session id, cipher suites, compression methods
	if !skip(2+32) || !vector(1) || !vector(2) || !vector(1) || len(body) < 2 {
		return false
	}
	extensions := body[2:min(len(body), 2+int(binary.BigEndian.Uint16(body)))]
	for len(extensions) >= 4 {
		extType := binary.BigEndian.Uint16(extensions)
		extLen := int(binary.BigEndian.Uint16(extensions[2:]))
		if extType == extensionEarlyData {
			return true
		}
		if 4+extLen > len(extensions) {
			return false
		}
		extensions = extensions[4+extLen:]
	}
	return false
}

// parseEncryptedExtensionsALPN returns the protocol the server chose in a TLS 1.3
// EncryptedExtensions message body, "" if none.
func parseEncryptedExtensionsALPN(body []byte) string {
	if len(body) < 2 {
		return ""
	}
	extensions := body[2:min(len(body), 2+int(binary.BigEndian.Uint16(body)))]
	for len(extensions) >= 4 {
		extType := binary.BigEndian.Uint16(extensions)
		extLen := int(binary.BigEndian.Uint16(extensions[2:]))
		if 4+extLen > len(extensions) {
			return ""
		}
		ext := extensions[4 : 4+extLen]
		extensions = extensions[4+extLen:]
		if extType != 16 || len(ext) < 3 {
			continue
		}
		// ProtocolNameList with exactly one name.
		nameLen := int(ext[2])
		if 3+nameLen <= len(ext) {
			return string(ext[3 : 3+nameLen])
		}
	}
	return ""
}

// messageReader frames handshake messages in decrypted handshake content.
type messageReader struct {
	header  [4]byte
	headerN int
	inBody  bool
	lost    bool
	msgType uint8
	left    int
	keep    bool
	body    []byte
}

// lose gives up the message framing (a handshake record was lost).
func (m *messageReader) lose() {
	m.lost = true
	m.headerN = 0
	m.inBody = false
	m.body = m.body[:0]
}

// feed reads one record's handshake content; visit gets each message that ends
// in it (body nil when longer than maxMessageBytes). After a loss, a record is
// trusted again only if it starts with a message header whose messages tile it.
func (m *messageReader) feed(data []byte, visit func(messageType uint8, body []byte)) {
	if m.lost {
		if !tilesWithMessages(data) {
			return
		}
		m.lost = false
	}
	for len(data) > 0 {
		if !m.inBody {
			n := copy(m.header[m.headerN:], data)
			m.headerN += n
			data = data[n:]
			if m.headerN < 4 {
				return
			}
			m.headerN = 0
			m.msgType = m.header[0]
			m.left = int(m.header[1])<<16 | int(m.header[2])<<8 | int(m.header[3])
			m.keep = m.left <= maxMessageBytes
			m.body = m.body[:0]
			m.inBody = true
		}
		n := min(m.left, len(data))
		if m.keep {
			m.body = append(m.body, data[:n]...)
		}
		m.left -= n
		data = data[n:]
		if m.left == 0 {
			m.inBody = false
			body := m.body
			if !m.keep {
				body = nil
			}
			visit(m.msgType, body)
		}
	}
}

// tilesWithMessages reports whether data is a whole number of handshake messages.
func tilesWithMessages(data []byte) bool {
	for len(data) >= 4 {
		n := 4 + (int(data[1])<<16 | int(data[2])<<8 | int(data[3]))
		if n > len(data) {
			return false
		}
		data = data[n:]
	}
	return len(data) == 0
}
