package tlsrec

import (
	"encoding/binary"
	"iter"

	"github.com/slowstart/slowstart/internal/fieldcodec"
)

// recordStore holds the records a Stream found. Those that may still change (the
// record in progress, and the one a handshake message header that is not yet
// whole began in) are Records; the ones before them change no more and are
// encoded into one append-only buffer (a varint a field, against the record
// before: a connection's records differ in little but their lengths), some 3
// bytes a record instead of a Record's 72. A long HTTPS connection captured
// whole carries a record every few kilobytes, tens of thousands of them.
type recordStore struct {
	coded []byte
	n     int             // records [0, n) are in coded
	pred  recordPredictor // the record encoded last (zero before the first)
	open  []Record        // records [n, n+len(open))
}

// Len is the number of records stored.
func (s *recordStore) Len() int { return s.n + len(s.open) }

// AppendZero adds a zero record after the others, as record Len()-1, and
// returns it, to be filled in place.
func (s *recordStore) AppendZero() *Record {
	s.open = append(s.open, Record{})
	return &s.open[len(s.open)-1]
}

// At is record i while it may still change, nil once it is encoded (or when
// there is no such record).
func (s *recordStore) At(i int) *Record {
	if i < s.n || i >= s.Len() {
		return nil
	}
	return &s.open[i-s.n]
}

// FreezeBefore encodes the records before i: they will not be changed again.
func (s *recordStore) FreezeBefore(i int) {
	k := min(i-s.n, len(s.open))
	if k <= 0 {
		return
	}
	for j := range k {
		s.coded = appendRecord(s.coded, &s.open[j], &s.pred)
	}
	s.n += k
	rest := copy(s.open, s.open[k:])
	clear(s.open[rest:])
	s.open = s.open[:rest]
}

// All yields the records in order, with their indexes.
func (s *recordStore) All() iter.Seq2[int, Record] {
	return func(yield func(int, Record) bool) {
		buf := s.coded
		var pred recordPredictor
		var r Record
		for i := range s.n {
			var c recordCodec
			c.Decode(buf, 1)
			r = Record{}
			c.visit(&r, &pred)
			buf = buf[c.Read():]
			if !yield(i, r) {
				return
			}
		}
		for j, r := range s.open {
			if !yield(s.n+j, r) {
				return
			}
		}
	}
}

// appendRecord appends r encoded against pred, and makes pred r's. A record
// that follows the one before in the stream, of its type and version, captured
// as whole as it, without the rare fields (most of a connection's), is written
// here: its bitmap in a byte and its length's difference, what visit writes
// for it (TestAppendRecordAsVisit), without a Codec.
func appendRecord(buf []byte, r *Record, pred *recordPredictor) []byte {
	if r.Offset != pred.nextOffset() || int64(r.ContentType) != pred.contentType ||
		int64(r.Version) != pred.version || r.CapturedBytes != pred.captured(r.Length) || r.Resynced || len(r.HandshakeTypes) > 0 {
		var c recordCodec
		c.Encode(buf, 1)
		c.visit(r, pred)
		return c.Finish()
	}
	// The fields' bits (visit's order): Length is field 3, Encrypted 5.
	var bits byte
	delta := int64(r.Length) - pred.length
	if delta != 0 {
		bits |= 1 << 3
	}
	if r.Encrypted {
		bits |= 1 << 5
	}
	buf = append(buf, bits)
	if delta != 0 {
		buf = binary.AppendVarint(buf, delta)
	}
	pred.offset, pred.length, pred.whole = r.Offset, int64(r.Length), r.CapturedBytes == RecordHeaderBytes+r.Length
	return buf
}

// recordPredictor is what a record's fields are predicted from: the record
// encoded before it.
type recordPredictor struct {
	offset, length int64
	contentType    int64
	version        int64
	// whole: the record before was captured whole, so this one likely is.
	whole bool
}

// nextOffset is where a record that follows the predicted one begins.
func (p *recordPredictor) nextOffset() int64 { return p.offset + RecordHeaderBytes + p.length }

// captured is the captured bytes predicted for a record of length bytes: all
// of it after a record captured whole, its header otherwise.
func (p *recordPredictor) captured(length int) int {
	if p.whole {
		return RecordHeaderBytes + length
	}
	return RecordHeaderBytes
}

// recordCodec encodes a Record's fields or decodes them, in one pass over them
// (visit), so that both directions read the same fields in the same order
// (package fieldcodec).
type recordCodec struct{ fieldcodec.Codec }

// rareRecordFieldsFrom is the first of the fields few records hold (the
// handshake messages of the records in the clear, a resynchronization).
const rareRecordFieldsFrom = 6

// visit encodes or decodes every field of r against pred, and makes pred r's.
func (c *recordCodec) visit(r *Record, pred *recordPredictor) {
	c.I64(&r.Offset, pred.nextOffset())
	contentType, version := int(r.ContentType), int(r.Version)
	c.Int(&contentType, pred.contentType)
	c.Int(&version, pred.version)
	r.ContentType, r.Version = uint8(contentType), uint16(version)
	c.Int(&r.Length, pred.length)
	c.Int(&r.CapturedBytes, int64(pred.captured(r.Length)))
	// Field by field: a composite literal copied into *pred stalls on the
	// stack's narrow stores.
	pred.offset, pred.length, pred.contentType = r.Offset, int64(r.Length), int64(r.ContentType)
	pred.version, pred.whole = int64(r.Version), r.CapturedBytes == RecordHeaderBytes+r.Length
	c.Flag(&r.Encrypted)
	if c.NoneFrom(rareRecordFieldsFrom) {
		return
	}
	c.Flag(&r.Resynced)
	types := string(r.HandshakeTypes)
	c.String(&types)
	if c.Decoding() && types != "" {
		r.HandshakeTypes = []uint8(types)
	}
}
