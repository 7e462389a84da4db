package compare

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nestedTrials is a lab row inside "trials" nested depth deep, on one line.
func nestedTrials(depth int) string {
	return strings.Repeat(`{"trials":[`, depth) + `{"point":"p","fct_user_ms":1}` + strings.Repeat(`]}`, depth)
}

// TestNestingIsBounded: lab results are at most an array of run outputs of
// trials; values nested deeper than MaxNesting are not slowstart results, and
// are refused without following them (each level took a pass over the bytes).
func TestNestingIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  string
		refuse bool
	}{
		{"a run output", nestedTrials(1), false},
		{"an array of run outputs", "[" + nestedTrials(1) + "," + nestedTrials(1) + "]", false},
		{"at the limit", nestedTrials(MaxNesting - 1), false},
		{"one level more", nestedTrials(MaxNesting), true},
		{"arrays", strings.Repeat("[", MaxNesting+1) + `{"point":"p","fct_user_ms":1}` + strings.Repeat("]", MaxNesting+1), true},
		{"4,500 deep, 40 lines", strings.Repeat(nestedTrials(4500)+"\n", 40), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.input), "in", "", nil)
			if tc.refuse {
				if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "nested") {
					t.Errorf("got %v; want a refusal naming the nesting", err)
				}
				return
			}
			if err != nil || len(s.Values) == 0 {
				t.Errorf("sample %+v, error %v; want a value", s, err)
			}
		})
	}
}

// TestInputIsBounded: a file longer than MaxInputBytes is refused before it is
// read (a regular file) or once that much was read (a pipe, /dev/zero): it
// was read whole into memory.
func TestInputIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxInputBytes + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	if _, err := Load(path, ""); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file of %d bytes: %v; want ErrTooLarge", MaxInputBytes+1, err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := Load("/dev/zero", ""); !errors.Is(err, ErrTooLarge) {
			t.Errorf("/dev/zero: %v; want ErrTooLarge", err)
		}
	}
}
