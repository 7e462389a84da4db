package compare

import (
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	local := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.Local) }
	cases := []struct {
		spec, side string
		want       Window
	}{
		{"2026-11-08T14:00:00Z", "before", Window{To: utc("2026-11-08T14:00:00Z")}},
		{"2026-11-08T14:00:00Z", "after", Window{From: utc("2026-11-08T14:00:00Z")}},
		{"2026-11-01..2026-11-07", "before", Window{From: local(2026, 11, 1), To: local(2026, 11, 8)}},
		{"2026-11-09..", "after", Window{From: local(2026, 11, 9)}},
		{"..2026-11-08T00:00:00+01:00", "before", Window{To: utc("2026-11-07T23:00:00Z")}},
		{"2026-11-08 14:30", "after", Window{From: time.Date(2026, 11, 8, 14, 30, 0, 0, time.Local)}},
	}
	for _, c := range cases {
		got, err := ParseWindow(c.spec, c.side)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if !got.From.Equal(c.want.From) || !got.To.Equal(c.want.To) {
			t.Errorf("%q (%s): %v, want %v", c.spec, c.side, got, c.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-11-08..2026-11-01", "2026-13-01", "..soon"} {
		if _, err := ParseWindow(bad, "before"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	w, _ := ParseWindow("2026-11-01..2026-11-07", "before")
	if !w.Contains(time.Date(2026, 11, 7, 23, 59, 0, 0, time.Local)) || w.Contains(local(2026, 11, 8)) || w.Contains(local(2026, 10, 31)) {
		t.Errorf("%v contains the wrong days", w)
	}
}
