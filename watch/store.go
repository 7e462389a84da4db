package watch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	// The pure-Go SQLite driver: no cgo, so the binary stays static.
	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/internal/sqlitepath"
	"github.com/slowstart/slowstart/report"
	_ "modernc.org/sqlite"
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
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	// URL is the URL probed, as redact.URL writes it: no credentials, no query values.
	URL string `json:"url"`
	// Label names the watch (--label); "" when none was given.
	Label string `json:"label,omitempty"`
	// IWSegments, IWSegmentsMax and IWVerdict are the server's initial window as
	// the page load showed it (report.Summary): the window (exact), both ends of a
	// range, a lower bound (lower_bound, rwnd_limited), and no number for
	// ambiguous and none; "" as verdict without a reading.
	IWSegments    *int   `json:"iw_segments"`
	IWSegmentsMax *int   `json:"iw_segments_max,omitempty"`
	IWVerdict     string `json:"iw_verdict"`
	// HandshakeRTTMs is the TCP handshake's round trip from the capture.
	HandshakeRTTMs *float64 `json:"handshake_rtt_ms"`
	// TLSMs is the TLS handshake's duration; nil over cleartext.
	TLSMs *float64 `json:"tls_ms"`
	// FirstByteMs and LastByteMs count from the start of the request (before any
	// DNS lookup), like curl's time_starttransfer and time_total.
	FirstByteMs *float64 `json:"first_byte_ms"`
	LastByteMs  *float64 `json:"last_byte_ms"`
	// Status is the HTTP status of the page; nil when no response came. A status
	// of 400 or more makes the row an error, with its values measured all the same.
	Status *int `json:"status"`
	// RoundTrips is the total of the page's connection (TCP + TLS + HTTP).
	RoundTrips *int `json:"round_trips"`
	// BodyBytes is the response body as received (compressed if it was).
	BodyBytes *int64 `json:"body_bytes"`
	// Error says why the probe failed; "" when it did not.
	Error string `json:"error"`
}

// IWReading is the row's initial window as report.Summary gave it.
func (r Row) IWReading() report.IWReading {
	return report.IWReading{Verdict: r.IWVerdict, Segments: r.IWSegments, SegmentsMax: r.IWSegmentsMax}
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
	res, err := s.db.ExecContext(ctx, `INSERT INTO probes (time_unix_ns, url, iw_segments, iw_segments_max, iw_verdict, handshake_rtt_ms,
		tls_ms, first_byte_ms, last_byte_ms, round_trips, body_bytes, error, label, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Time.UnixNano(), r.URL, r.IWSegments, r.IWSegmentsMax, nullString(r.IWVerdict), r.HandshakeRTTMs, r.TLSMs, r.FirstByteMs,
		r.LastByteMs, r.RoundTrips, r.BodyBytes, r.Error, r.Label, r.Status)
	if err != nil {
		return 0, fmt.Errorf("writing to the watch store %s: %w", s.path, err)
	}
	return res.LastInsertId()
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
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
	rows, err := s.db.QueryContext(ctx, `SELECT id, time_unix_ns, url, iw_segments, iw_segments_max, iw_verdict, handshake_rtt_ms, tls_ms,
		first_byte_ms, last_byte_ms, round_trips, body_bytes, error, label, status FROM probes WHERE `+where+` ORDER BY time_unix_ns, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the watch store %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var ns int64
		var iw, iwMax, rounds, body, status sql.NullInt64
		var verdict sql.NullString
		var hs, tlsMs, fb, lb sql.NullFloat64
		if err := rows.Scan(&r.ID, &ns, &r.URL, &iw, &iwMax, &verdict, &hs, &tlsMs, &fb, &lb, &rounds, &body, &r.Error, &r.Label, &status); err != nil {
			return nil, fmt.Errorf("reading the watch store %s: %w", s.path, err)
		}
		r.Time = time.Unix(0, ns).UTC()
		r.IWVerdict = verdict.String
		r.IWSegments, r.IWSegmentsMax, r.RoundTrips, r.Status = intPtr(iw), intPtr(iwMax), intPtr(rounds), intPtr(status)
		if body.Valid {
			r.BodyBytes = &body.Int64
		}
		r.HandshakeRTTMs, r.TLSMs, r.FirstByteMs, r.LastByteMs = floatPtr(hs), floatPtr(tlsMs), floatPtr(fb), floatPtr(lb)
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

func intPtr(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}

func floatPtr(v sql.NullFloat64) *float64 {
	if !v.Valid {
		return nil
	}
	return &v.Float64
}
