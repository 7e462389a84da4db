// Package fieldcodec keeps records of many small fields compactly, each as its
// difference from an anchor: a value the decoder knows by then (a field read
// before it, or the record before). A field equal to its anchor costs one bit
// of the record's bitmap, any other the bit and a varint of the difference;
// booleans are their bit alone.
//
// A record is encoded and decoded by the same function, which visits its
// fields in one order through a Codec (Encode or Decode), so that both
// directions read the same fields the same way. The rounds of a connection
// (package rounds) and its HTTP messages (package httpmsg) are kept so.
//
// The methods' common path (a field equal to its anchor) is small enough to
// be inlined into the visiting function: encoding such a field is one
// comparison.
package fieldcodec

import (
	"encoding/binary"
	"fmt"
)

// Codec encodes a record's fields or decodes them: set by Encode or
// Decode, finished by Finish or Read.
type Codec struct {
	decode bool
	bits   [2]uint64
	field  uint
	words  int
	start  int    // encode: where the record starts in buf
	buf    []byte // encode: the records written; decode: the record's bytes
	pos    int    // decode: bytes of buf read
}

// room is what the bitmap takes at most, reserved before the values.
func room(words int) int { return words * binary.MaxVarintLen64 }

// Encode starts a record appended to buf; Finish returns buf with it. words
// is 1 for records of at most 64 fields, 2 for up to 128 (a word costs at
// least a byte a record). It sets the Codec in place (records are encoded in
// the hot loops of the analysis: a Codec returned by value was built on the
// stack and copied, and the copy stalled on the stack's narrow stores).
func (c *Codec) Encode(buf []byte, words int) {
	*c = Codec{}
	// The values are written after room for the bitmap, which is known only
	// once they are, then moved up against it.
	c.words, c.start = words, len(buf)
	c.buf = append(buf, make([]byte, room(words))...)
}

// Finish returns the buffer given to Encode with the record appended.
func (c *Codec) Finish() []byte {
	var head [2 * binary.MaxVarintLen64]byte
	h := head[:0]
	for w := range c.words {
		h = binary.AppendUvarint(h, c.bits[w])
	}
	buf := c.buf
	n := copy(buf[c.start:], h)
	n += copy(buf[c.start+n:], buf[c.start+room(c.words):])
	return buf[:c.start+n]
}

// Decode starts reading the record at the head of buf, encoded with as many
// words (in place, as Encode).
func (c *Codec) Decode(buf []byte, words int) {
	*c = Codec{}
	c.decode, c.words = true, words
	n := 0
	for w := range words {
		v, k := binary.Uvarint(buf[n:])
		c.bits[w] = v
		n += k
	}
	c.buf, c.pos = buf, n
}

// Read is how many bytes of the buffer given to Decode the record took, once
// every field was visited.
func (c *Codec) Read() int { return c.pos }

// Fields is how many fields were visited.
func (c *Codec) Fields() uint { return c.field }

// Decoding reports whether the Codec decodes.
func (c *Codec) Decoding() bool { return c.decode }

// NoneFrom reports, when decoding, that the record holds none of the fields
// from field f on (they are all their anchors): a record decoded into zero
// values whose fields from f on are anchored on zero is then whole. It is
// called when exactly f fields were visited (it panics otherwise: a field
// added before the rare ones moves the boundary).
func (c *Codec) NoneFrom(f uint) bool {
	if c.field != f {
		panic(fmt.Sprintf("fieldcodec: NoneFrom(%d) called after %d fields", f, c.field))
	}
	return c.none(f)
}

// none reports, when decoding, that no field from f on is set.
func (c *Codec) none(f uint) bool {
	if !c.decode {
		return false
	}
	if f >= 64 {
		return c.bits[1]>>(f-64) == 0
	}
	return c.bits[0]>>f == 0 && c.bits[1] == 0
}

// I64 codes *p against anchor.
func (c *Codec) I64(p *int64, anchor int64) {
	f := c.field
	c.field++
	if c.decode || *p != anchor {
		c.Field64(p, anchor, f)
	}
}

// Next takes the next field's number, for a field coded by the caller with
// Field64 (or left its anchor, when encoding).
func (c *Codec) Next() uint {
	f := c.field
	c.field++
	return f
}

// Field64 decodes field f into p, or encodes p's difference from anchor. (Not
// inlined, so that I64 is.)
//
//go:noinline
func (c *Codec) Field64(p *int64, anchor int64, f uint) {
	bit, w := uint64(1)<<(f&63), f>>6
	if !c.decode {
		c.bits[w] |= bit
		c.buf = binary.AppendVarint(c.buf, *p-anchor)
		return
	}
	*p = anchor
	if c.bits[w]&bit == 0 {
		return
	}
	// Most differences are small: one of a byte (-64 to 63) is read here,
	// without binary.Varint's call and loop (4% of the instructions on
	// bench/shapes.sh edge went to that call).
	if b := c.buf[c.pos]; b < 0x80 {
		c.pos++
		*p += int64(b>>1) ^ -int64(b&1)
		return
	}
	d, n := binary.Varint(c.buf[c.pos:])
	c.pos += n
	*p += d
}

// Int codes *p against anchor.
func (c *Codec) Int(p *int, anchor int64) {
	f := c.field
	c.field++
	if c.decode || int64(*p) != anchor {
		c.fieldInt(p, anchor, f)
	}
}

//go:noinline
func (c *Codec) fieldInt(p *int, anchor int64, f uint) {
	v := int64(*p)
	c.Field64(&v, anchor, f)
	*p = int(v)
}

// U32 codes a 32-bit clock's value as its difference from anchor, modulo 2³².
func (c *Codec) U32(p *uint32, anchor uint32) {
	f := c.field
	c.field++
	if c.decode || *p != anchor {
		c.fieldU32(p, anchor, f)
	}
}

//go:noinline
func (c *Codec) fieldU32(p *uint32, anchor uint32, f uint) {
	v := int64(int32(*p - anchor))
	c.Field64(&v, 0, f)
	*p = anchor + uint32(int32(v))
}

// Flag codes a boolean as its bit.
func (c *Codec) Flag(p *bool) {
	f := c.field
	c.field++
	bit, w := uint64(1)<<(f&63), f>>6
	if c.decode {
		*p = c.bits[w]&bit != 0
	} else if *p {
		c.bits[w] |= bit
	}
}

// String codes a string as its bytes (the empty string as its bit alone).
func (c *Codec) String(p *string) {
	f := c.field
	c.field++
	bit, w := uint64(1)<<(f&63), f>>6
	if c.decode {
		*p = ""
		if c.bits[w]&bit != 0 {
			n, k := binary.Uvarint(c.buf[c.pos:])
			c.pos += k
			*p = string(c.buf[c.pos : c.pos+int(n)])
			c.pos += int(n)
		}
		return
	}
	if *p != "" {
		c.bits[w] |= bit
		c.buf = binary.AppendUvarint(c.buf, uint64(len(*p)))
		c.buf = append(c.buf, *p...)
	}
}

// Int32s codes a list of numbers (an empty list decodes as nil).
func (c *Codec) Int32s(p *[]int32) {
	f := c.field
	c.field++
	bit, w := uint64(1)<<(f&63), f>>6
	if c.decode {
		*p = nil
		if c.bits[w]&bit != 0 {
			n, k := binary.Uvarint(c.buf[c.pos:])
			c.pos += k
			s := make([]int32, n)
			for j := range s {
				v, k := binary.Varint(c.buf[c.pos:])
				c.pos += k
				s[j] = int32(v)
			}
			*p = s
		}
		return
	}
	if len(*p) > 0 {
		c.bits[w] |= bit
		c.buf = binary.AppendUvarint(c.buf, uint64(len(*p)))
		for _, v := range *p {
			c.buf = binary.AppendVarint(c.buf, int64(v))
		}
	}
}
