package main

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompare holds compare to what the two captures hold: the same packets
// in another order within a direction or across the two are the same packets
// (in the "other" order, the farthest stamp distance said), a packet changed
// or missing is not.
func TestCompare(t *testing.T) {
	k := endpoints{netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.2:4000")}
	base := func() *conn {
		return &conn{dir: []byte{1, 0, 0, 1, 0}, prints: []uint64{11, 21, 22, 12, 23}, stamps: []int64{100, 200, 300, 400, 500}}
	}
	cases := []struct {
		name  string
		b     func(*conn)
		same  bool
		facts string
	}{
		{"identical", func(*conn) {}, true, "10.0.0.1:80 10.0.0.2:4000 same 0\n"},
		{"stamped apart", func(c *conn) { c.stamps[2] += 7 }, true, "10.0.0.1:80 10.0.0.2:4000 same 7\n"},
		{"across directions", func(c *conn) {
			c.dir[2], c.dir[3] = c.dir[3], c.dir[2]
			c.prints[2], c.prints[3] = c.prints[3], c.prints[2]
			c.stamps[2], c.stamps[3] = c.stamps[3]-50, c.stamps[2]
		}, true, "10.0.0.1:80 10.0.0.2:4000 other 50\n"},
		{"within a direction", func(c *conn) {
			c.prints[1], c.prints[2] = c.prints[2], c.prints[1]
			c.stamps[1], c.stamps[2] = 300-40, 200
		}, true, "10.0.0.1:80 10.0.0.2:4000 other 40\n"},
		{"changed", func(c *conn) { c.prints[4] = 99 }, false, ""},
		{"missing", func(c *conn) { c.dir, c.prints, c.stamps = c.dir[:4], c.prints[:4], c.stamps[:4] }, false, ""},
		{"duplicated", func(c *conn) {
			c.dir, c.prints, c.stamps = append(c.dir, 0), append(c.prints, 23), append(c.stamps, 600)
		}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := base()
			tc.b(b)
			path := filepath.Join(t.TempDir(), "connections")
			same, err := compare(io.Discard, map[endpoints]*conn{k: base()}, map[endpoints]*conn{k: b}, 5, len(b.dir), path)
			if err != nil {
				t.Fatal(err)
			}
			facts, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if same != tc.same || string(facts) != tc.facts {
				t.Errorf("same %v, facts %q; want %v, %q", same, facts, tc.same, tc.facts)
			}
		})
	}
	// A connection only one capture holds.
	other := endpoints{netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.2:4001")}
	var out strings.Builder
	same, err := compare(&out, map[endpoints]*conn{k: base()}, map[endpoints]*conn{k: base(), other: base()}, 5, 10, "")
	if err != nil || same || !strings.Contains(out.String(), "different: 10.0.0.1:80 10.0.0.2:4001") {
		t.Errorf("a connection only the second holds: same %v, err %v, output %q", same, err, out.String())
	}
}
