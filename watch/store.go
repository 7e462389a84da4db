package watch

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	// The pure-Go SQLite driver: no cgo, so the binary stays static.
	_ "modernc.org/sqlite"

	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/internal/sqlitepath"
	"github.com/slowstart/slowstart/report"
)

// StoreVersion is the schema version of the store (SQLite's user_version).
// Version 2 added the label and status columns, version 3 iw_segments_max.
const StoreVersion = 3

// schema creates the store's one table. Times are Unix nanoseconds (UTC);
// milliseconds are REAL; a column is NULL where the probe gave no value.
const schema = `
CREATE TABLE IF NOT EXISTS probes (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	time_unix_ns     INTEGER NOT NULL,
	url              TEXT    NOT NULL,
	iw_segments      INTEGER,
	iw_segments_max  INTEGER,
	iw_verdict       TEXT,
	handshake_rtt_ms REAL,
	tls_ms           REAL,
	first_byte_ms    REAL,
	last_byte_ms     REAL,
	round_trips      INTEGER,
	body_bytes       INTEGER,
	error            TEXT    NOT NULL DEFAULT '',
	label            TEXT    NOT NULL DEFAULT '',
	status           INTEGER
);
CREATE INDEX IF NOT EXISTS probes_url_time ON probes (url, time_unix_ns);
`

// Row is one probe as stored.
type Row struct {
	ID   int64
	Time time.Time
	// URL is the URL probed, as redact.URL writes it: no credentials, no query values.
	URL string
	// Label names the watch (--label); "" when none was given.
	Label string
	// SummaryRow holds the probe's values, those of Columns: the page's final
	// hop as report.Summary projects it. The initial window keeps what its
	// verdict allows (the window when exact, both ends of a range, a lower
	// bound for lower_bound and rwnd_limited, no number for ambiguous and
	// none; "" as verdict without a reading); FirstByteMs and LastByteMs count
	// from the start of the request (before any DNS lookup), like curl's
	// time_starttransfer and time_total; a Status of 400 or more makes the row
	// an error, with its values measured all the same; BodyBytes is the body as
	// received (compressed if it was).
	report.SummaryRow
	// Error says why the probe failed; "" when it did not.
	Error string
}

// column is one of the probe's values as the store, the JSON and the metrics
// carry it: a column of report.SummaryColumns, under its name.
type column struct {
	report.SummaryColumn
	omitEmpty bool // left out of the JSON when it has no value
}

// Columns are the values of a probe that a store keeps, in the order of the
// JSON (docs/schemas/watch.json).
var Columns = columnsNamed("iw_segments", "iw_segments_max,omitempty", "iw_verdict", "handshake_rtt_ms", "tls_ms",
	"first_byte_ms", "last_byte_ms", "status", "round_trips", "body_bytes")

func columnsNamed(names ...string) []column {
	out := make([]column, len(names))
	for i, n := range names {
		name, omit := strings.CutSuffix(n, ",omitempty")
		c, ok := report.SummaryColumnNamed(name)
		if !ok {
			panic("watch: no summary column " + name)
		}
		out[i] = column{SummaryColumn: c, omitEmpty: omit}
	}
	return out
}

// value is the column's value in row: nil, float64, int, int64 or string.
func (c column) value(row *report.SummaryRow) any {
	switch p := c.Field(row).(type) {
	case **float64:
		if *p != nil {
			return **p
		}
	case **int:
		if *p != nil {
			return **p
		}
	case **int64:
		if *p != nil {
			return **p
		}
	case *string:
		if *p != "" {
			return *p
		}
	}
	return nil
}

// set stores v (nil, int64, float64, string or []byte, as SQLite gives it) in
// the column of row.
func (c column) set(row *report.SummaryRow, v any) error {
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	if v == nil {
		return nil
	}
	bad := fmt.Errorf("column %s: %v (%T) is not its kind", c.Name, v, v)
	switch p := c.Field(row).(type) {
	case **float64:
		switch x := v.(type) {
		case float64:
			*p = &x
		case int64:
			f := float64(x)
			*p = &f
		default:
			return bad
		}
	case **int:
		x, ok := v.(int64)
		if !ok {
			return bad
		}
		n := int(x)
		*p = &n
	case **int64:
		x, ok := v.(int64)
		if !ok {
			return bad
		}
		*p = &x
	case *string:
		x, ok := v.(string)
		if !ok {
			return bad
		}
		*p = x
	}
	return nil
}

// keep copies the stored columns of from into a row of its own: what is not
// stored is not kept (a row reads the same before and after the store).
func keep(from report.SummaryRow) report.SummaryRow {
	var to report.SummaryRow
	for _, c := range Columns {
		c.set(&to, sqlValue(c.value(&from)))
	}
	return to
}

// sqlValue is a column's value as the store writes it.
func sqlValue(v any) any {
	if n, ok := v.(int); ok {
		return int64(n)
	}
	return v
}

// MarshalJSON writes the row with the keys of docs/schemas/watch.json, in
// its order: id, time, url, label (when set), Columns, error.
func (r Row) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	field := func(key string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%q:", key)
		b.Write(data)
		return nil
	}
	b.WriteByte('{')
	head := []struct {
		key string
		v   any
	}{{"id", r.ID}, {"time", r.Time}, {"url", r.URL}}
	if r.Label != "" {
		head = append(head, struct {
			key string
			v   any
		}{"label", r.Label})
	}
	for _, f := range head {
		if err := field(f.key, f.v); err != nil {
			return nil, err
		}
	}
	for _, c := range Columns {
		v := c.value(&r.SummaryRow)
		if v == nil && c.omitEmpty {
			continue
		}
		if _, text := c.Field(&r.SummaryRow).(*string); text && v == nil {
			v = ""
		}
		if err := field(c.Name, v); err != nil {
			return nil, err
		}
	}
	if err := field("error", r.Error); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Row) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*r = Row{}
	targets := map[string]any{"id": &r.ID, "time": &r.Time, "url": &r.URL, "label": &r.Label, "error": &r.Error}
	for _, c := range Columns {
		targets[c.Name] = c.Field(&r.SummaryRow)
	}
	for key, raw := range m {
		if t, ok := targets[key]; ok {
			if err := json.Unmarshal(raw, t); err != nil {
				return fmt.Errorf("watch row, %s: %w", key, err)
			}
		}
	}
	return nil
}

// Schema names the JSON of watch --list (docs/schemas/watch.json).
const Schema = "slowstart.watch/v1"

// ListOutput is what watch --list --json prints: the rows of a store.
type ListOutput struct {
	Schema string `json:"schema"` // Schema
	Rows   []Row  `json:"rows"`
}

// Store is a watch store: an SQLite file with one row per probe.
type Store struct {
	db   *sql.DB
	path string
}

// OpenStore opens the store at path, creating it unless mustExist. A store is
// readable by its owner only (0600, as are SQLite's journal files beside it): it
// holds the URLs watched and what they answered.
func OpenStore(path string, mustExist bool) (*Store, error) {
	if mustExist {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("opening the watch store: %w", err)
		}
	} else {
		// Made 0600, or a store made before tightened to it.
		f, err := privatefile.OpenReadWrite(path)
		if err != nil {
			return nil, fmt.Errorf("opening the watch store %s: %w", path, err)
		}
		f.Close()
	}
	dsn, err := sqlitepath.DSN(path, "busy_timeout(5000)", "journal_mode(WAL)")
	if err != nil {
		return nil, fmt.Errorf("opening the watch store: %w", err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening the watch store %s: %w", path, err)
	}
	// One connection: SQLite serializes writers anyway, and the store is small.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path}
	if err := s.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s is not a watch store: %w", path, err)
	}
	return s, nil
}

func (s *Store) init() error {
	var version int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > StoreVersion {
		return fmt.Errorf("store version %d is newer than this slowstart knows (%d)", version, StoreVersion)
	}
	var added []string // columns later versions added
	switch version {
	case 1:
		added = []string{"label TEXT NOT NULL DEFAULT ''", "status INTEGER", "iw_segments_max INTEGER"}
	case 2:
		added = []string{"iw_segments_max INTEGER"}
	}
	for _, column := range added {
		if _, err := s.db.Exec("ALTER TABLE probes ADD COLUMN " + column); err != nil {
			return err
		}
	}
	if version == 0 {
		var tables int
		if err := s.db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").Scan(&tables); err != nil {
			return err
		}
		if tables > 0 {
			return errors.New("the file is an SQLite database of something else")
		}
	}
	if _, err := s.db.Exec(schema); err != nil {
		return err
	}
	_, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", StoreVersion))
	return err
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Insert appends a row and returns its id.
func (s *Store) Insert(ctx context.Context, r Row) (int64, error) {
	names := []string{"time_unix_ns", "url", "error", "label"}
	values := []any{r.Time.UnixNano(), r.URL, r.Error, r.Label}
	for _, c := range Columns {
		names = append(names, c.Name)
		values = append(values, sqlValue(c.value(&r.SummaryRow)))
	}
	res, err := s.db.ExecContext(ctx, "INSERT INTO probes ("+strings.Join(names, ", ")+") VALUES (?"+strings.Repeat(", ?", len(names)-1)+")", values...)
	if err != nil {
		return 0, fmt.Errorf("writing to the watch store %s: %w", s.path, err)
	}
	return res.LastInsertId()
}

// Query selects rows.
type Query struct {
	URL  string    // only this URL; all when ""
	From time.Time // at or after; no bound when zero
	To   time.Time // before; no bound when zero
}

// Rows returns the rows that match q, oldest first.
func (s *Store) Rows(ctx context.Context, q Query) ([]Row, error) {
	where, args := "1=1", []any{}
	if q.URL != "" {
		where += " AND url = ?"
		args = append(args, redact.URL(q.URL))
	}
	if !q.From.IsZero() {
		where += " AND time_unix_ns >= ?"
		args = append(args, q.From.UnixNano())
	}
	if !q.To.IsZero() {
		where += " AND time_unix_ns < ?"
		args = append(args, q.To.UnixNano())
	}
	names := []string{"id", "time_unix_ns", "url", "error", "label"}
	for _, c := range Columns {
		names = append(names, c.Name)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM probes WHERE "+where+" ORDER BY time_unix_ns, id", args...)
	if err != nil {
		return nil, fmt.Errorf("reading the watch store %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var ns int64
		values := make([]any, len(Columns))
		dest := []any{&r.ID, &ns, &r.URL, &r.Error, &r.Label}
		for i := range values {
			dest = append(dest, &values[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("reading the watch store %s: %w", s.path, err)
		}
		r.Time = time.Unix(0, ns).UTC()
		for i, c := range Columns {
			if err := c.set(&r.SummaryRow, values[i]); err != nil {
				return nil, fmt.Errorf("reading the watch store %s: %w", s.path, err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// URLs returns the distinct URLs in the store with their number of rows.
func (s *Store) URLs(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT url, count(*) FROM probes GROUP BY url")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var u string
		var n int
		if err := rows.Scan(&u, &n); err != nil {
			return nil, err
		}
		out[u] = n
	}
	return out, rows.Err()
}
