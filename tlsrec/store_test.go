package tlsrec

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRecordStoreSameAsSlice drives a recordStore and a plain slice with the
// same random appends, changes to open records and freezes, and reads both back:
// every field of every record must survive its encoding, whatever the record
// before it was.
func TestRecordStoreSameAsSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var s recordStore
		var want []Record
		offset := int64(rng.IntN(1000))
		for range rng.IntN(300) {
			r := Record{
				Offset:      offset,
				ContentType: uint8(20 + rng.IntN(5)),
				Version:     uint16(0x0301 + rng.IntN(3)),
				Length:      rng.IntN(MaxRecordLength + 1),
				Encrypted:   rng.IntN(3) > 0,
				Resynced:    rng.IntN(20) == 0,
			}
			if rng.IntN(4) == 0 {
				r.ContentType = ContentApplicationData
			}
			r.CapturedBytes = RecordHeaderBytes + r.Length
			if rng.IntN(5) == 0 {
				r.CapturedBytes = RecordHeaderBytes + rng.IntN(r.Length+1)
			}
			if rng.IntN(6) == 0 {
				r.HandshakeTypes = []uint8{uint8(rng.IntN(25))}
			}
			offset = r.Offset + RecordHeaderBytes + int64(r.Length)
			if rng.IntN(10) == 0 {
				offset += int64(rng.IntN(5000)) - 100 // a gap, or a resync behind
			}
			*s.AppendZero() = r
			want = append(want, r)
			// Change a record that is still open, as the parser does.
			if i := s.n + rng.IntN(len(s.open)); rng.IntN(3) == 0 {
				got := s.At(i)
				if got == nil {
					t.Fatalf("trial %d: At(%d) of an open record is nil", trial, i)
				}
				got.CapturedBytes++
				got.HandshakeTypes = append(got.HandshakeTypes, HandshakeFinished)
				want[i].CapturedBytes++
				want[i].HandshakeTypes = append(want[i].HandshakeTypes, HandshakeFinished)
			}
			if rng.IntN(2) == 0 {
				s.FreezeBefore(s.n + rng.IntN(len(s.open)+1))
			}
		}
		if s.Len() != len(want) {
			t.Fatalf("trial %d: Len %d, want %d", trial, s.Len(), len(want))
		}
		var got []Record
		for i, r := range s.All() {
			if i != len(got) {
				t.Fatalf("trial %d: index %d after %d records", trial, i, len(got))
			}
			got = append(got, r)
		}
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("trial %d: record %d is %+v, want %+v", trial, i, got[i], want[i])
				}
			}
			t.Fatalf("trial %d: records differ", trial)
		}
		if s.n > 0 && s.At(s.n-1) != nil {
			t.Fatalf("trial %d: an encoded record is given out to be changed", trial)
		}
	}
}

// TestLongConnectionRecordsCompact: a connection's application data records,
// captured whole, are given back (the first MaxStoredRecords), and kept in a
// few bytes each (a Record is 72).
func TestLongConnectionRecordsCompact(t *testing.T) {
	s := NewStream()
	appData := record(ContentApplicationData, bytes.Repeat([]byte{0xee}, 1400))
	const n = MaxStoredRecords + 1000
	var offset int64
	for range n {
		s.Write(offset, appData, len(appData))
		offset += int64(len(appData))
	}
	if got := s.RecordCount(); got != n {
		t.Fatalf("RecordCount %d, want %d", got, n)
	}
	i := 0
	for j, r := range s.EachRecord() {
		want := Record{Offset: int64(j * len(appData)), ContentType: ContentApplicationData, Version: VersionTLS12,
			Length: 1400, Encrypted: true, CapturedBytes: len(appData)}
		if j != i || !reflect.DeepEqual(r, want) {
			t.Fatalf("record %d (index %d) is %+v, want %+v", i, j, r, want)
		}
		i++
	}
	if i != MaxStoredRecords {
		t.Fatalf("%d records, want %d", i, MaxStoredRecords)
	}
	if perRecord := float64(len(s.records.coded)) / MaxStoredRecords; perRecord > 4 {
		t.Errorf("%.1f bytes a record kept, want at most 4", perRecord)
	}
	if len(s.records.open) > 1 {
		t.Errorf("%d records open after whole records, want at most 1", len(s.records.open))
	}
}

// TestAppendRecordAsVisit: appendRecord writes every record as the general
// codec does, whether it takes its short way or not, and leaves the same
// prediction.
func TestAppendRecordAsVisit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var fast, slow []byte
	var fastPred, slowPred recordPredictor
	offset := int64(0)
	shortWay := 0
	for i := range 100_000 {
		r := Record{Offset: offset, ContentType: ContentApplicationData, Version: VersionTLS12,
			Length: 1000 + rng.IntN(3)*200, Encrypted: rng.IntN(10) > 0}
		r.CapturedBytes = RecordHeaderBytes + r.Length
		switch rng.IntN(12) {
		case 0:
			r.CapturedBytes = RecordHeaderBytes + rng.IntN(r.Length)
		case 1:
			r.ContentType = ContentHandshake
			r.HandshakeTypes = []uint8{HandshakeFinished}
		case 2:
			r.Offset += int64(rng.IntN(100))
		case 3:
			r.Resynced = true
		case 4:
			r.Version = VersionTLS10
		}
		offset = r.Offset + RecordHeaderBytes + int64(r.Length)
		n := len(fast)
		fast = appendRecord(fast, &r, &fastPred)
		var c recordCodec
		c.Encode(slow, 1)
		c.visit(&r, &slowPred)
		slow = c.Finish()
		if !bytes.Equal(fast, slow) || fastPred != slowPred {
			t.Fatalf("record %d %+v: appendRecord wrote % x (prediction %+v), the codec % x (%+v)",
				i, r, fast[n:], fastPred, slow[n:], slowPred)
		}
		if len(fast)-n <= 3 {
			shortWay++
		}
	}
	if shortWay < 50_000 {
		t.Errorf("only %d of 100,000 records took 3 bytes or fewer", shortWay)
	}
}
