// Package sqlitepath turns a file path into the data source name the SQLite
// driver (modernc.org/sqlite) opens, so that a path is always a path: a store
// named "runs?2.db" or "a#b.db" is that file, not "runs" with options. The
// driver hands a "file:" name to SQLite as a URI, where '?' starts the
// options, '#' a fragment, '%' an escape, and "//" an authority; the path is
// made absolute and those characters escaped.
//
// It opens nothing itself and knows nothing of the stores' tables.
package sqlitepath

import (
	"fmt"
	"path/filepath"
	"strings"
)

// uriEscaper escapes what SQLite's URI filenames give a meaning to.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// DSN is the data source name of the SQLite file at path with the given
// pragmas (each NAME(VALUE), as _pragma=NAME(VALUE) options).
func DSN(path string, pragmas ...string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("no path given for the SQLite file")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	var b strings.Builder
	b.WriteString("file:")
	b.WriteString(uriEscaper.Replace(abs))
	for i, p := range pragmas {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString("_pragma=" + p)
	}
	return b.String(), nil
}
