package streamtest

import (
	"reflect"
	"testing"
)

func TestSegmentize(t *testing.T) {
	s := []byte("abcdefghij")
	got := Segmentize(s, 4, 2, 1)
	want := []Piece{{0, []byte("ab"), 4}, {8, []byte("ij"), 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Segmentize(%q, 4, 2, hole 1) = %+v, want %+v", s, got, want)
	}
	if got := Segmentize(s, 3, 0); len(got) != 4 || string(got[3].Data) != "j" || got[3].Length != 1 {
		t.Errorf("Segmentize(%q, 3, 0) = %+v: want 4 pieces, the last one %q", s, got, "j")
	}
}

func TestPlan(t *testing.T) {
	s := []byte("abcdefghijklmnop")
	// 4 bytes whole, 4 half captured, 2 not captured, 3 a hole, the rest whole.
	got := Plan(s, []byte{3, 0x40 | 3, 0x80 | 1, 0xc0 | 2}, false)
	want := []Piece{{0, []byte("abcd"), 4}, {4, []byte("ef"), 4}, {8, nil, 2}, {13, []byte("nop"), 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Plan = %+v, want %+v", got, want)
	}
	all := Plan(s, []byte{3, 0x40 | 3, 0x80 | 1, 0xc0 | 2}, true)
	var joined []byte
	for _, p := range all {
		if len(p.Data) != p.Length || p.Offset != int64(len(joined)) {
			t.Fatalf("Plan with allCaptured gave %+v", all)
		}
		joined = append(joined, p.Data...)
	}
	if string(joined) != string(s) {
		t.Errorf("Plan with allCaptured covers %q, want %q", joined, s)
	}
}
