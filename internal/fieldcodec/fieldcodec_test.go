package fieldcodec

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// record has one field of each kind, the last two rare (anchored on zero).
type record struct {
	a, b   int64
	n      int
	ts     uint32
	on     bool
	s      string
	list   []int32
	rare   int64
	rareOn bool
}

const rareFrom = 7

func visit(c *Codec, r *record, prev *record) {
	c.I64(&r.a, prev.a)
	c.I64(&r.b, r.a) // anchored on a field read before it
	c.Int(&r.n, int64(prev.n))
	c.U32(&r.ts, prev.ts)
	c.Flag(&r.on)
	c.String(&r.s)
	c.Int32s(&r.list)
	if c.NoneFrom(rareFrom) {
		return
	}
	c.I64(&r.rare, 0)
	c.Flag(&r.rareOn)
}

// TestRoundTrip: records encoded one after the other against the one before
// decode as they were, a field equal to its anchor costs no byte, and a 32-bit
// clock wraps.
func TestRoundTrip(t *testing.T) {
	records := []record{
		{a: 1000, b: 1000, n: 3, ts: 4294967290, s: "x"},
		{a: 1000, b: 1000, n: 3, ts: 5}, // ts wrapped; the rest as before
		{a: -7, b: 12, n: -1 << 40, on: true, list: []int32{1, -2, 1 << 30}, rare: 9},
		{a: -7, b: -7, rareOn: true},
		{},
	}
	var buf []byte
	var prev record
	sizes := []int{}
	for i := range records {
		before := len(buf)
		var c Codec
		c.Encode(buf, 1)
		visit(&c, &records[i], &prev)
		buf = c.Finish()
		sizes = append(sizes, len(buf)-before)
		prev = records[i]
	}
	if sizes[1] != 2 {
		t.Errorf("a record equal to its anchors but one 32-bit clock took %d bytes, want 2 (bitmap, delta)", sizes[1])
	}
	prev = record{}
	for i, want := range records {
		var c Codec
		c.Decode(buf, 1)
		var got record
		visit(&c, &got, &prev)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("record %d decoded as %+v, want %+v", i, got, want)
		}
		buf = buf[c.Read():]
		prev = got
	}
	if len(buf) != 0 {
		t.Errorf("%d bytes left after the last record", len(buf))
	}
}

// TestTwoWords: a field past the 64th is kept in the second word, and
// NoneFrom sees it.
func TestTwoWords(t *testing.T) {
	vals := make([]int64, 100)
	vals[99] = 5
	var c Codec
	c.Encode(nil, 2)
	for i := range vals {
		c.I64(&vals[i], 0)
	}
	buf := c.Finish()
	var d Codec
	d.Decode(buf, 2)
	if !d.none(100) || d.none(99) || d.none(70) || d.none(3) {
		t.Errorf("NoneFrom wrong for a record whose only field set is the 100th")
	}
	got := make([]int64, 100)
	for i := range got {
		d.I64(&got[i], 0)
	}
	if !reflect.DeepEqual(got, vals) || d.Read() != len(buf) {
		t.Errorf("decoded %v (%d of %d bytes read)", got[95:], d.Read(), len(buf))
	}
	defer func() {
		if recover() == nil {
			t.Errorf("NoneFrom(3) after 100 fields did not panic")
		}
	}()
	d.NoneFrom(3)
}

// TestOneByteVarints: a field's value is binary.AppendVarint's bytes of its
// difference from the anchor (the records' format), read back whole, on both
// sides of each length's boundary.
func TestOneByteVarints(t *testing.T) {
	for d := int64(-300); d <= 300; d++ {
		for _, v := range []int64{d, d << 20, d<<56 | 3} {
			const anchor = 1000
			var c Codec
			c.Encode(nil, 1)
			x := anchor + v
			c.Field64(&x, anchor, c.Next())
			buf := c.Finish()
			want := binary.AppendVarint([]byte{1}, v) // bitmap: field 0
			if !bytes.Equal(buf, want) {
				t.Fatalf("%d encoded as % x, want % x", v, buf, want)
			}
			c.Decode(buf, 1)
			var got int64
			c.Field64(&got, anchor, c.Next())
			if got != anchor+v || c.Read() != len(buf) {
				t.Fatalf("%d decoded as %d (%d of %d bytes)", v, got-anchor, c.Read(), len(buf))
			}
		}
	}
}
