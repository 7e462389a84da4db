package inorder

import (
	"bytes"
	"testing"
)

func TestPast(t *testing.T) {
	data := []byte("abcdefgh")
	for _, c := range []struct {
		name         string
		next, offset int64
		data         []byte
		length       int
		gap, end     int64
		fresh        []byte
		ok           bool
	}{
		{"in order", 10, 10, data, 8, 0, 18, data, true},
		{"after a hole", 10, 14, data, 8, 4, 22, data, true},
		{"overlapping the start", 10, 7, data, 8, 0, 15, []byte("defgh"), true},
		{"overlap beyond what was captured", 10, 7, data[:2], 8, 0, 15, nil, true},
		{"wholly before", 10, 2, data, 8, 0, 10, nil, false},
		{"uncaptured tail", 10, 10, data[:3], 8, 0, 18, data[:3], true},
	} {
		gap, fresh, end, ok := Past(c.next, c.offset, c.data, c.length)
		if gap != c.gap || end != c.end || ok != c.ok || !bytes.Equal(fresh, c.fresh) || (fresh == nil) != (c.fresh == nil) {
			t.Errorf("%s: Past(%d, %d, %q, %d) = %d, %q, %d, %v; want %d, %q, %d, %v",
				c.name, c.next, c.offset, c.data, c.length, gap, fresh, end, ok, c.gap, c.fresh, c.end, c.ok)
		}
	}
}
