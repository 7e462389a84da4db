package report

import (
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
)

// sizedConnection is a connection whose JSON is size bytes, or the least a
// connection takes when that is more.
func sizedConnection(t *testing.T, index, size int) *Connection {
	t.Helper()
	c := &Connection{Index: index}
	b, err := gojson.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Server = strings.Repeat("s", max(size-len(b), 0))
	return c
}

// TestCollectorKeepsTheFirstByNumber: the page holds the first connections by
// number, whatever order they finish in, and never a later one in the place
// of an earlier one that did not fit.
func TestCollectorKeepsTheFirstByNumber(t *testing.T) {
	empty, err := gojson.Marshal(&Connection{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	unit := len(empty) + 1000 // every size is a multiple of it
	budget := int64(10 * unit)
	for _, tc := range []struct {
		name  string
		order []int       // connection numbers in the order they finish
		sizes map[int]int // in units
		want  []int
	}{
		{"in order", []int{1, 2, 3, 4}, map[int]int{1: 4, 2: 4, 3: 4, 4: 1}, []int{1, 2}},
		{"a later small one after a drop", []int{2, 3, 1, 4}, map[int]int{1: 4, 2: 4, 3: 4, 4: 1}, []int{1, 2}},
		{"an earlier one finishing last pushes later ones out", []int{3, 4, 5, 1, 2}, map[int]int{1: 3, 2: 3, 3: 3, 4: 3, 5: 3}, []int{1, 2, 3}},
		{"everything fits", []int{2, 1, 3}, map[int]int{1: 1, 2: 1, 3: 1}, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := NewCollector(budget)
			// noneAfter: the lowest number after which KeepsAfter said no
			// connection would be kept, at any time.
			noneAfter := 1 << 30
			for _, n := range tc.order {
				if err := k.Add(sizedConnection(t, n, tc.sizes[n]*unit)); err != nil {
					t.Fatal(err)
				}
				for i := 0; i <= 6; i++ {
					if !k.KeepsAfter(i) {
						noneAfter = min(noneAfter, i)
					}
				}
			}
			rep := k.Report("test", Source{}, nil)
			var got []int
			for _, c := range rep.Connections {
				got = append(got, c.Index)
			}
			if !equalInts(got, tc.want) {
				t.Errorf("kept %v; want %v", got, tc.want)
			}
			dropped := len(tc.order) - len(tc.want)
			for _, n := range got {
				if n > noneAfter {
					t.Errorf("connection %d kept after KeepsAfter(%d) said none would be", n, noneAfter)
				}
			}
			if last := tc.want[len(tc.want)-1]; k.KeepsAfter(last) != (dropped == 0) {
				t.Errorf("KeepsAfter(%d) = %v at the end, with %d connections left out", last, k.KeepsAfter(last), dropped)
			}
			if warned := len(rep.Warnings) == 1; warned != (dropped > 0) {
				t.Errorf("warnings %q with %d connections left out", rep.Warnings, dropped)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
