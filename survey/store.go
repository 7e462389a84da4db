package survey

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Store formats.
const (
	FormatSQLite = "sqlite"
	FormatJSONL  = "jsonl"
	FormatCSV    = "csv"
)

// StoreSchema names the stores' layout (SQLite's meta table records it).
const StoreSchema = "slowstart.survey-store/v1"

// FormatOf returns the store format of path: explicit when given, else by the
// file's extension (.db, .sqlite, .sqlite3: SQLite; .jsonl, .ndjson: JSONL;
// .csv: CSV), else SQLite.
func FormatOf(path, explicit string) (string, error) {
	switch explicit {
	case FormatSQLite, FormatJSONL, FormatCSV:
		return explicit, nil
	case "":
	default:
		return "", fmt.Errorf("store format %q: use sqlite, jsonl or csv", explicit)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".csv":
		return FormatCSV, nil
	}
	return FormatSQLite, nil
}

// StoreMeta describes the survey a store holds. SQLite stores keep it (their
// meta table); JSONL and CSV stores hold rows only.
type StoreMeta struct {
	Schema    string    `json:"schema"`
	Tool      string    `json:"tool"`
	StartedAt time.Time `json:"started_at"`
	Settings  Settings  `json:"settings"`
	// ListSHA256 and ListTargets describe the list surveyed (CheckList).
	ListSHA256  string `json:"list_sha256,omitempty"`
	ListTargets int    `json:"list_targets,omitempty"`
	// ShardTargets is the number of the list's targets in the survey's shard.
	ShardTargets int `json:"shard_targets,omitempty"`
}

// Store is where a survey's rows go as they finish, and how a resumed survey
// knows what was measured: a row is written once, when its target is done,
// and a target with a row is never measured again.
type Store interface {
	Sink
	// Done says whether the target has a row.
	Done(Target) (bool, error)
	// Rows is the number of rows in the store.
	Rows() int
	// Meta is what the store says of its survey (zero for JSONL and CSV).
	Meta() StoreMeta
	Close() error
}

// OpenStore opens the store at path for a survey described by meta, making
// it when missing and resuming it otherwise. A SQLite store of another list,
// shard, vantage or measurement settings is refused: its rows would not be
// comparable. A JSONL or CSV file cut in the middle of a row (a killed
// survey) loses that row, which is measured again.
func OpenStore(path, format string, meta StoreMeta) (Store, error) {
	switch format {
	case FormatSQLite:
		return openSQLiteStore(path, meta)
	case FormatJSONL:
		return openJSONLStore(path)
	case FormatCSV:
		return openCSVStore(path)
	}
	return nil, fmt.Errorf("store format %q: use sqlite, jsonl or csv", format)
}

// ReadStore calls fn for every row of the store at path (format as FormatOf
// says with explicit ""), and returns the store's meta (zero for JSONL, CSV).
func ReadStore(path string, fn func(Row) error) (StoreMeta, error) {
	format, err := FormatOf(path, "")
	if err != nil {
		return StoreMeta{}, err
	}
	switch format {
	case FormatSQLite:
		return readSQLite(path, fn)
	case FormatJSONL:
		return StoreMeta{}, readJSONL(path, fn)
	default:
		return StoreMeta{}, readCSV(path, fn)
	}
}

// StoreMismatchError is a store that holds another survey than the one asked
// for: resuming into it would mix rows that cannot be compared.
type StoreMismatchError struct {
	Path, What string
}

func (e *StoreMismatchError) Error() string {
	return fmt.Sprintf("%s holds a survey with another %s: resume it with the same list and options, or give a new store", e.Path, e.What)
}

// checkResume compares the survey asked for with the one a store holds.
func checkResume(path string, held, asked StoreMeta) error {
	a, h := asked.Settings, held.Settings
	switch {
	case held.ListSHA256 != "" && asked.ListSHA256 != "" && held.ListSHA256 != asked.ListSHA256:
		return &StoreMismatchError{path, "list (the file changed)"}
	case h.Shard != a.Shard:
		return &StoreMismatchError{path, fmt.Sprintf("shard (%q, not %q)", h.Shard, a.Shard)}
	case h.Vantage != a.Vantage:
		return &StoreMismatchError{path, fmt.Sprintf("vantage (%q, not %q)", h.Vantage, a.Vantage)}
	case h.Exact != a.Exact || h.Passive != a.Passive:
		return &StoreMismatchError{path, "choice of methods (--no-exact, --no-passive)"}
	case h.MSS != a.MSS || h.ExactRuns != a.ExactRuns || h.Retries != a.Retries:
		return &StoreMismatchError{path, "exact measurement (--exact-mss, --exact-runs, --no-retries)"}
	}
	return nil
}

var errStoreClosed = errors.New("the store is closed")
