package golden

import (
	"testing"
)

// recorder is a testing.TB that records a failure instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = format
	panic(r)
}

func check(t *testing.T, name string, got []byte) (failed bool) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != any(r) {
			panic(p)
		}
		failed = r.failed
	}()
	Check(r, name, got)
	return r.failed
}

// TestCheck: the same bytes pass; a changed line, a missing last line and an extra
// one fail.
func TestCheck(t *testing.T) {
	if check(t, "sample.txt", []byte("one\ntwo\n")) {
		t.Error("the file's own content failed")
	}
	for _, got := range []string{"one\nTwo\n", "one\n", "one\ntwo\nthree\n", "one\ntwo"} {
		if !check(t, "sample.txt", []byte(got)) {
			t.Errorf("%q passed against %q", got, "one\ntwo\n")
		}
	}
	if !check(t, "missing.txt", []byte("x")) {
		t.Error("a missing golden file passed")
	}
}
