package privatefile

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestModes: a new file and one that existed with mode 0644 are 0600 once
// opened, whichever way; a device is left as it is.
func TestModes(t *testing.T) {
	dir := t.TempDir()
	for name, open := range map[string]func(string) (*os.File, error){"Create": Create, "Append": Append, "OpenReadWrite": OpenReadWrite} {
		for _, existed := range []bool{false, true} {
			path := filepath.Join(dir, name)
			os.Remove(path)
			if existed {
				if err := os.WriteFile(path, []byte("before\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := open(path)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, err := io.WriteString(f, "secret\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != Mode {
				t.Errorf("%s (existed: %v): mode %v, want %v", name, existed, info.Mode().Perm(), Mode)
			}
			data, _ := os.ReadFile(path)
			want := map[bool]map[string]string{
				false: {"Create": "secret\n", "Append": "secret\n", "OpenReadWrite": "secret\n"},
				true:  {"Create": "secret\n", "Append": "before\nsecret\n", "OpenReadWrite": "secret\n"},
			}[existed][name]
			if string(data) != want {
				t.Errorf("%s (existed: %v): %q, want %q", name, existed, data, want)
			}
		}
	}
	before, err := os.Stat(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Append(os.DevNull)
	if err != nil {
		t.Fatalf("Append(%s): %v", os.DevNull, err)
	}
	f.Close()
	if after, _ := os.Stat(os.DevNull); after.Mode() != before.Mode() {
		t.Errorf("%s changed mode from %v to %v", os.DevNull, before.Mode(), after.Mode())
	}
}
