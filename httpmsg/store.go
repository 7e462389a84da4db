package httpmsg

import (
	"iter"
	"slices"

	"github.com/slowstart/slowstart/internal/fieldcodec"
)

// messageStore holds the messages a Parser found. The last one, which the
// parser may still change, is a Message; the ones before it change no more and
// are encoded into one append-only buffer of bytes (a varint a field, against
// the message before: a keep-alive connection's messages differ in little but
// their offsets), so that a connection open for thousands of exchanges holds
// some 10 bytes a message instead of a Message's 170 and its strings, in memory
// the collector need not scan. The strings the messages name (targets, hosts,
// content types) are kept once each while they repeat.
type messageStore struct {
	// coded holds messages [0, n) encoded; every markEvery-th is encoded on
	// its own (against the zero message), at the byte marks[k] says, so that
	// one can be read without reading all those before it.
	coded []byte
	marks []uint32
	pred  messagePredictor // the message encoded last (zero before a mark)
	// strs are the strings the encoded messages hold, each referred to by its
	// index.
	strs []string
	last Message // message n, when hasLast
	// n is how many messages are encoded (at most MaxStoredMessages: 32 bits,
	// beside hasLast, save a parser 8 bytes); hasLast: there is a message
	// after them.
	n       int32
	hasLast bool
}

// markEvery is how many messages follow each other between two encoded on
// their own: a message is read after at most markEvery-1 others.
const markEvery = 16

// Len is the number of messages stored.
func (s *messageStore) Len() int {
	if s.hasLast {
		return int(s.n) + 1
	}
	return int(s.n)
}

// Append stores m after the others; the one that was last is encoded.
func (s *messageStore) Append(m Message) {
	if s.hasLast {
		if s.n%markEvery == 0 {
			s.marks = append(s.marks, uint32(len(s.coded)))
			s.pred = messagePredictor{}
		}
		s.coded = s.encode(s.coded, &s.last, &s.pred)
		s.n++
	}
	s.last, s.hasLast = m, true
}

// Last is the last message stored, which may be changed (nil: none).
func (s *messageStore) Last() *Message {
	if !s.hasLast {
		return nil
	}
	return &s.last
}

// At is message i.
func (s *messageStore) At(i int) Message {
	if i == int(s.n) && s.hasLast {
		return s.last
	}
	k := i / markEvery
	buf := s.coded[s.marks[k]:]
	var m Message
	var pred messagePredictor
	for range i - k*markEvery + 1 {
		buf = buf[s.decode(buf, &m, &pred):]
	}
	return m
}

// From yields the messages from index i on, in order.
func (s *messageStore) From(i int) iter.Seq2[int, Message] {
	return func(yield func(int, Message) bool) {
		if i < int(s.n) {
			k := i / markEvery
			buf := s.coded[s.marks[k]:]
			var m Message
			var pred messagePredictor
			for j := k * markEvery; j < int(s.n); j++ {
				if j%markEvery == 0 {
					pred = messagePredictor{}
				}
				buf = buf[s.decode(buf, &m, &pred):]
				if j >= i && !yield(j, m) {
					return
				}
			}
		}
		if s.hasLast && i <= int(s.n) {
			yield(int(s.n), s.last)
		}
	}
}

// All returns every message, in a slice of its own.
func (s *messageStore) All() []Message { return s.AppendAll(nil) }

// AppendAll appends every message to dst and returns the extended slice.
func (s *messageStore) AppendAll(dst []Message) []Message {
	from := len(dst)
	dst = slices.Grow(dst, s.Len())[:from+s.Len()]
	out := dst[from:]
	clear(out)
	buf := s.coded
	var pred messagePredictor
	for i := range s.n {
		if i%markEvery == 0 {
			pred = messagePredictor{}
		}
		buf = buf[s.decode(buf, &out[i], &pred):]
	}
	if s.hasLast {
		out[s.n] = s.last
	}
	return dst
}

// ref is the index of string v in strs, plus one (0: ""); a string stored lately
// is found again rather than stored twice.
func (s *messageStore) ref(v string) int64 {
	if v == "" {
		return 0
	}
	for i := len(s.strs) - 1; i >= max(0, len(s.strs)-recentStrings); i-- {
		if s.strs[i] == v {
			return int64(i + 1)
		}
	}
	s.strs = append(s.strs, v)
	return int64(len(s.strs))
}

// intern returns b as a string: one of the latest strings (the messages
// before named them) when it equals one, else a new string.
func (s *messageStore) intern(b []byte) string {
	for i := len(s.strs) - 1; i >= max(0, len(s.strs)-recentStrings); i-- {
		if string(b) == s.strs[i] {
			return s.strs[i]
		}
	}
	return string(b)
}

// recentStrings is how many of the latest strings a new one is looked for in.
const recentStrings = 8

func (s *messageStore) str(ref int64) string {
	if ref == 0 {
		return ""
	}
	return s.strs[ref-1]
}

// The strings of a Message that are one of a few constants are coded as their
// place in these lists, plus one (0: ""); any other is a string of strs, coded
// as its reference plus len(list).
var (
	methodCodes  = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"}
	versionCodes = []string{version10, version11}
	reasonCodes  = []string{ReasonStartLineNotCaptured, ReasonHeaderNotCaptured, ReasonChunkNotCaptured, ReasonBadFraming,
		ReasonLineTooLong, ReasonRequestUnknown, ReasonEndedInHeader, ReasonEndedInBody}
)

func (s *messageStore) code(v string, list []string) int64 {
	if v == "" {
		return 0
	}
	for i, c := range list {
		if v == c {
			return int64(i + 1)
		}
	}
	return int64(len(list)) + s.ref(v)
}

func (s *messageStore) uncode(code int64, list []string) string {
	if code <= int64(len(list)) {
		if code == 0 {
			return ""
		}
		return list[code-1]
	}
	return s.str(code - int64(len(list)))
}

func (s *messageStore) encode(buf []byte, m *Message, pred *messagePredictor) []byte {
	c := messageCodec{store: s}
	c.Encode(buf, 1)
	c.visit(m, pred)
	return c.Finish()
}

// decode reads the message at the head of buf, encoded against pred, into m and
// returns the bytes it took.
func (s *messageStore) decode(buf []byte, m *Message, pred *messagePredictor) int {
	*m = Message{}
	c := messageCodec{store: s}
	c.Decode(buf, 1)
	c.visit(m, pred)
	return c.Read()
}

// messagePredictor is what a message is encoded against: the message before
// it, its strings as their codes (messageStore.code).
type messagePredictor struct {
	offset, headerEnd, end, contentLength int64
	// (The anchors need only be the same when encoding and decoding: a value
	// that does not fit an int32 is still encoded exactly, as its difference.)
	status, request         int32
	method, target, version int32
	host, contentType       int32
}

// messageCodec encodes a Message's fields or decodes them, in one pass over them
// (visit), so that both directions read the same fields in the same order
// (package fieldcodec); its strings as numbers (messageStore.code).
type messageCodec struct {
	fieldcodec.Codec
	store *messageStore
}

// str codes a string as a number (its place in list, or its reference in
// strs), against the code of the message before, and returns the code.
func (c *messageCodec) str(p *string, anchor int64, list []string) int64 {
	f := c.Next()
	var v int64
	switch {
	case c.Decoding():
		c.Field64(&v, anchor, f)
		*p = c.store.uncode(v, list)
		return v
	case *p == c.store.uncode(anchor, list):
		// The same string as the message before's: the common case.
		return anchor
	}
	v = c.store.code(*p, list)
	c.Field64(&v, anchor, f)
	return v
}

// rareMessageFieldsFrom is the first of the fields few messages hold (those of
// a message cut by the capture): decoding a message with none of them skips
// them.
const rareMessageFieldsFrom = 14

// visit encodes or decodes every field of m against pred, and makes pred m's.
// The fields from rareMessageFieldsFrom on are anchored on their zero value, so
// that decoding (into a zero m) can skip them. A field added to
// Message must be added here (TestMessageStoreEveryField fails until it is).
func (c *messageCodec) visit(m *Message, pred *messagePredictor) {
	next := pred.offset
	if pred.end >= 0 {
		next = pred.end
	}
	c.I64(&m.Offset, next)
	headerBytes := int64(0)
	if pred.headerEnd >= 0 {
		headerBytes = pred.headerEnd - pred.offset
	}
	c.I64(&m.HeaderEnd, m.Offset+headerBytes)
	c.I64(&m.ContentLength, pred.contentLength)
	end := m.HeaderEnd
	if m.HeaderEnd >= 0 && m.ContentLength > 0 {
		end += m.ContentLength
	}
	c.I64(&m.End, end)
	p := messagePredictor{offset: m.Offset, headerEnd: m.HeaderEnd, end: m.End, contentLength: m.ContentLength}
	p.method = int32(c.str(&m.Method, int64(pred.method), methodCodes))
	p.target = int32(c.str(&m.Target, int64(pred.target), nil))
	p.version = int32(c.str(&m.Version, int64(pred.version), versionCodes))
	c.Int(&m.Status, int64(pred.status))
	p.status = int32(m.Status)
	p.host = int32(c.str(&m.Host, int64(pred.host), nil))
	p.contentType = int32(c.str(&m.ContentType, int64(pred.contentType), nil))
	request := int64(pred.request)
	if request >= 0 {
		request++
	}
	c.Int(&m.Request, request)
	p.request = int32(m.Request)
	c.Flag(&m.KeepAlive)
	c.Flag(&m.Chunked)
	c.Flag(&m.Close)
	*pred = p
	if c.NoneFrom(rareMessageFieldsFrom) {
		return
	}
	c.Flag(&m.EndInferred)
	c.Flag(&m.Incomplete)
	c.str(&m.IncompleteReason, 0, reasonCodes)
	c.Flag(&m.Resynced)
}
