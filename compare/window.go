package compare

import (
	"fmt"
	"strings"
	"time"
)

// Window is a span of time [From, To); a zero bound is open.
type Window struct {
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// Contains reports whether t falls in the window.
func (w Window) Contains(t time.Time) bool {
	return (w.From.IsZero() || !t.Before(w.From)) && (w.To.IsZero() || t.Before(w.To))
}

func (w Window) String() string {
	f := func(t time.Time) string { return t.Format(time.RFC3339) }
	switch {
	case w.From.IsZero() && w.To.IsZero():
		return "all time"
	case w.From.IsZero():
		return "before " + f(w.To)
	case w.To.IsZero():
		return "from " + f(w.From)
	}
	return f(w.From) + " to " + f(w.To)
}

// ParseWindow reads a window of a watch store for the side "before" or "after":
//   - "A..B": from A up to B; "A..", "..B": open at one end;
//   - a single time T: for "before", everything before T; for "after",
//     everything from T on (so --before T --after T splits the store at T).
//
// Times are RFC3339 ("2026-11-08T14:00:00Z"), "2006-01-02 15:04" or a date
// ("2026-11-08", local time). A date as the end of a range counts the whole day:
// "2026-11-01..2026-11-07" is seven days.
func ParseWindow(spec, side string) (Window, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Window{}, fmt.Errorf("--%s: give a time or a range A..B", side)
	}
	if a, b, ok := strings.Cut(spec, ".."); ok {
		var w Window
		var err error
		if strings.TrimSpace(a) != "" {
			if w.From, _, err = parseTime(a); err != nil {
				return w, fmt.Errorf("--%s %q: %w", side, spec, err)
			}
		}
		if strings.TrimSpace(b) != "" {
			var dateOnly bool
			if w.To, dateOnly, err = parseTime(b); err != nil {
				return w, fmt.Errorf("--%s %q: %w", side, spec, err)
			}
			if dateOnly {
				w.To = w.To.AddDate(0, 0, 1)
			}
		}
		if !w.From.IsZero() && !w.To.IsZero() && !w.From.Before(w.To) {
			return w, fmt.Errorf("--%s %q: the range ends before it starts", side, spec)
		}
		return w, nil
	}
	t, _, err := parseTime(spec)
	if err != nil {
		return Window{}, fmt.Errorf("--%s %q: %w", side, spec, err)
	}
	if side == "before" {
		return Window{To: t}, nil
	}
	return Window{From: t}, nil
}

func parseTime(s string) (t time.Time, dateOnly bool, err error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, false, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, false, nil
		}
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, true, nil
	}
	return time.Time{}, false, fmt.Errorf("%q is not a time: use RFC3339 (2026-11-08T14:00:00Z), \"2026-11-08 14:00\" or a date (2026-11-08)", s)
}

// Overlaps reports whether the two windows share a moment.
func (w Window) Overlaps(o Window) bool {
	wEndsBeforeO := !w.To.IsZero() && !o.From.IsZero() && !w.To.After(o.From)
	oEndsBeforeW := !o.To.IsZero() && !w.From.IsZero() && !o.To.After(w.From)
	return !wEndsBeforeO && !oEndsBeforeW
}
