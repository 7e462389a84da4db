// Package textsafe makes text from elsewhere (a survey list, a server's headers, a
// capture's HTTP requests, an error that quotes them) safe to print on a terminal:
// control characters, which could move the cursor, rewrite what was printed before
// or fake a line of the result, are written as visible escapes instead.
//
// It is for text meant for people; JSON and CSV carry the data as it was.
package textsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafe reports whether r must not reach a terminal as it is: the C0 controls
// (all of them, newline and tab included: a field is one line), DEL, the C1
// controls, and the Unicode controls that reorder text (bidirectional overrides and
// isolates) or that are invisible line breaks.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// Escape returns s with every unsafe character written as an escape: \n, \r, \t,
// \xNN for the other bytes below 0x20 and DEL, \u{NNNN} for the others; bytes that
// are not UTF-8 as \xNN. A safe string is returned as it is.
func Escape(s string) string {
	if !needsEscape(s, false) {
		return s
	}
	var b strings.Builder
	escapeTo(&b, s, false)
	return b.String()
}

func needsEscape[T string | []byte](s T, keepLines bool) bool {
	for i := 0; i < len(s); {
		// Printable ASCII, most of any output, needs no decoding.
		if c := s[i]; c >= 0x20 && c < 0x7f || keepLines && (c == '\n' || c == '\t') {
			i++
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return true
		}
		if unsafe(r) && !(keepLines && (r == '\n' || r == '\t')) {
			return true
		}
		i += size
	}
	return false
}

// decodeRune is utf8.DecodeRune of a string or bytes.
func decodeRune[T string | []byte](s T) (rune, int) {
	switch s := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(s)
	case []byte:
		return utf8.DecodeRune(s)
	}
	panic("unreachable")
}

func escapeTo(b *strings.Builder, s string, keepLines bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(b, `\u{%04x}`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
}

// Writer returns a writer that escapes, in everything written through it, the
// unsafe characters other than newline and tab: a last guard in front of a
// terminal. It keeps a multi-byte character cut between two writes whole.
func Writer(w io.Writer) io.Writer { return &writer{w: w} }

type writer struct {
	w       io.Writer
	pending []byte // the start of a character cut at the end of the last write
}

func (t *writer) Write(p []byte) (int, error) {
	data := p // not copied unless a character cut by the last write waits
	if len(t.pending) > 0 {
		data = append(t.pending, p...)
	}
	t.pending = nil
	// Hold back an incomplete UTF-8 sequence at the end for the next write.
	if cut := incompleteTail(data); cut > 0 {
		t.pending = append([]byte(nil), data[len(data)-cut:]...)
		data = data[:len(data)-cut]
	}
	if !needsEscape(data, true) { // most output: written as it is
		if _, err := t.w.Write(data); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	var b strings.Builder
	escapeTo(&b, string(data), true)
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// incompleteTail returns the length of a UTF-8 sequence cut at the end of b (0 when
// b ends on a whole character or on bytes that can't start one).
func incompleteTail(b []byte) int {
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c&0xc0 != 0x80 { // a start byte (or ASCII)
			if c >= 0xc0 && !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}
