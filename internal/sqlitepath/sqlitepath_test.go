package sqlitepath

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	_ "modernc.org/sqlite"
)

// TestPathsArePaths: SQLite opens exactly the file named, whatever characters
// a URI would give a meaning to, and the pragmas apply; no other file is made.
func TestPathsArePaths(t *testing.T) {
	for _, name := range []string{"plain.db", "runs?2.db", "a#b.db", "100%.db", "q?x=1&y=2#z.db", "sp ace.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			wd, err := os.Getwd()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chdir(dir); err != nil {
				t.Fatal(err)
			}
			defer os.Chdir(wd)
			dsn, err := DSN(name, "journal_mode(WAL)", "busy_timeout(1000)")
			if err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
				t.Fatalf("%s: %v", dsn, err)
			}
			var mode string
			if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal mode %q (%v), want wal: the pragmas were not applied", mode, err)
			}
			db.Close()
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Contains(names, name) {
				t.Errorf("%s was not made; the directory holds %q", name, names)
			}
			for _, n := range names {
				if n != name && n != name+"-wal" && n != name+"-shm" {
					t.Errorf("%s made %s as well", filepath.Join(dir, name), n)
				}
			}
		})
	}
}
