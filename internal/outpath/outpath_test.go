package outpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/fault"
)

func TestCheckFile(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "new.html")
	dir := filepath.Dir(fresh)
	if err := CheckFile("html", fresh); err != nil {
		t.Fatalf("a new file in a writable directory: %v", err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("the check left %s behind (%v)", fresh, err)
	}
	existing := filepath.Join(dir, "old.html")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile("html", existing); err != nil {
		t.Fatalf("an existing writable file: %v", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("the check changed an existing file: %q", b)
	}
	err := CheckFile("pcap", filepath.Join(dir, "no", "such", "dir", "x.pcap"))
	if err == nil || fault.Of(err) != fault.File || !strings.HasPrefix(err.Error(), "--pcap ") || strings.Count(err.Error(), "x.pcap") != 1 {
		t.Errorf("a file in a missing directory: %v (kind %v)", err, fault.Of(err))
	}
	for _, p := range []string{"", "-"} {
		if err := CheckFile("html", p); err != nil {
			t.Errorf("CheckFile(%q): %v", p, err)
		}
	}
}

func TestCheckDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := CheckDir("out", dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("CheckDir made %s with %d entries (%v), want it empty", dir, len(entries), err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir("out", file); err == nil || fault.Of(err) != fault.File {
		t.Errorf("a file given as a directory: %v", err)
	}
}
