package textsafe

import (
	"bytes"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"a\x1b[2J\x1b[Hfake", `a\x1b[2J\x1b[Hfake`},
		{"line\nInitial window: 100 segments (exact)", `line\nInitial window: 100 segments (exact)`},
		{"cr\roverwrite\ttab\x07bell\x7f", `cr\roverwrite\ttab\x07bell\x7f`},
		{"c1 \u009b31m", `c1 \u{009b}31m`},
		{"bidi \u202eevil\u2066", `bidi \u{202e}evil\u{2066}`},
		{"bad \xff utf8", `bad \xff utf8`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestWriterKeepsLinesAndCutCharacters(t *testing.T) {
	var out bytes.Buffer
	w := Writer(&out)
	// "é" (0xc3 0xa9) cut between two writes, and an escape sequence.
	for _, part := range []string{"row\tcaf\xc3", "\xa9\n\x1b[31mred\n"} {
		if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
			t.Fatalf("Write(%q) = %d, %v", part, n, err)
		}
	}
	if want := "row\tcafé\n\\x1b[31mred\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}
