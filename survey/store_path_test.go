package survey

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/redact"
)

// TestStorePathsArePaths: a store named with '?' or '#' is that file, made
// 0600, and no other file appears beside it (the SQLite store took the part
// before '?' for its name, 0644, and left the named file empty).
func TestStorePathsArePaths(t *testing.T) {
	for _, format := range []string{FormatSQLite, FormatJSONL, FormatCSV} {
		for _, name := range []string{"run?2", "a#b", "100%"} {
			t.Run(format+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, name+"."+format)
				st, err := OpenStore(path, format, StoreMeta{})
				if err != nil {
					t.Fatal(err)
				}
				targets := fakeTargets(3)
				if _, err := Stream(context.Background(), &SliceSource{Targets: targets}, st, Options{NoPassive: true, Done: st.Done,
					measure: func(_ context.Context, tk *task) Row { return fakeRow(tk) }}); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				if rows := readAll(t, path); len(rows) != 3 {
					t.Errorf("%d rows read back from %s, want 3", len(rows), path)
				}
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if n := e.Name(); !strings.HasPrefix(n, filepath.Base(path)) {
						t.Errorf("the store %s made %s beside it", filepath.Base(path), n)
					}
					info, err := e.Info()
					if err == nil && info.Mode().Perm() != 0o600 {
						t.Errorf("%s: mode %v, want 0600", e.Name(), info.Mode().Perm())
					}
				}
			})
		}
	}
}

// TestStoreOfURLsWithSecrets: rows hold the URL redacted, and a survey of
// URLs with credentials and tokens resumes: a target is known done by its
// redacted URL. A store that existed with mode 0644 is made 0600.
func TestStoreOfURLsWithSecrets(t *testing.T) {
	for _, format := range []string{FormatSQLite, FormatJSONL, FormatCSV} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s."+format)
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var targets []Target
			for i := range 4 {
				targets = append(targets, Target{URL: fmt.Sprintf("https://alice:s3cret%d@192.0.2.%d/p?token=tok3n%d", i, i+1, i), Line: i + 1})
			}
			measure := func(_ context.Context, tk *task) Row {
				r := fakeRow(tk)
				r.URL = redact.URL(tk.target.URL) // as measure writes it
				return r
			}
			for round := range 2 {
				st, err := OpenStore(path, format, StoreMeta{})
				if err != nil {
					t.Fatal(err)
				}
				n := 2 + 2*round
				totals, err := Stream(context.Background(), &SliceSource{Targets: targets[:n]}, st, Options{NoPassive: true, Done: st.Done, measure: measure})
				if err != nil {
					t.Fatal(err)
				}
				if want := 2 * round; int(totals.Skipped) != want {
					t.Errorf("round %d: %d targets skipped as done, want %d", round, totals.Skipped, want)
				}
				st.Close()
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{"s3cret", "tok3n", "alice"} {
				if strings.Contains(string(data), secret) {
					t.Errorf("%q is in the store", secret)
				}
			}
			rows := readAll(t, path)
			var urls []string
			for _, r := range rows {
				urls = append(urls, r.URL)
			}
			slices.Sort(urls)
			if len(rows) != 4 || !strings.HasPrefix(urls[0], "https://REDACTED@192.0.2.1/p?token=REDACTED") {
				t.Errorf("rows %q", urls)
			}
			if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", info.Mode().Perm())
			}
		})
	}
}
