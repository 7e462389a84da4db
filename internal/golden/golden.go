// Package golden compares a test's output with a file committed beside the test
// (testdata/golden/NAME), and rewrites the file when the test runs with -update.
// It is for tests of text renderings whose input is fixed; not for outputs that
// depend on time, the host or the network.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden with the current output")

// Check fails t when got differs from testdata/golden/name, showing the first line
// that differs; with -update it writes got to the file instead.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if line, g, w := FirstDifference(got, want); line > 0 {
		t.Fatalf("output differs from %s at line %d:\n got: %q\nwant: %q\n(run go test -update to accept the new output)", path, line, g, w)
	}
}

// FirstDifference returns the first line (1-based) where got and want differ,
// with that line of each ("" past the end of one), or 0 when they are equal.
func FirstDifference(got, want []byte) (line int, gotLine, wantLine string) {
	if bytes.Equal(got, want) {
		return 0, "", ""
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gotLines), len(wantLines)); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w || i >= len(gotLines) || i >= len(wantLines) {
			return i + 1, g, w
		}
	}
	return 0, "", "" // not reached: unequal bytes differ in some line
}
