package survey

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	// The pure-Go SQLite driver: no cgo, so the binary stays static.
	_ "modernc.org/sqlite"

	"github.com/slowstart/slowstart/internal/privatefile"
	"github.com/slowstart/slowstart/internal/redact"
	"github.com/slowstart/slowstart/internal/sqlitepath"
)

// sqliteStore keeps rows in a SQLite file: table rows (one column per row
// field, named as in JSON), table meta (the survey's settings and list). Each
// row is committed as it is written (WAL, synchronous=NORMAL: a killed process
// loses nothing committed; a power cut may lose the last rows, which are then
// measured again).
type sqliteStore struct {
	db     *sql.DB
	tx     *sql.Tx // when writing in one transaction (begin, commit)
	insert *sql.Stmt
	done   *sql.Stmt
	meta   StoreMeta
	rows   atomic.Int64
}

func sqliteSchema() string {
	var cols []string
	for _, c := range columns {
		typ := "TEXT"
		switch c.kind {
		case kindInt:
			typ = "INTEGER"
		case kindReal:
			typ = "REAL"
		}
		cols = append(cols, fmt.Sprintf("%q %s", c.name, typ))
	}
	return `CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (` + strings.Join(cols, ", ") + `);
CREATE UNIQUE INDEX IF NOT EXISTS rows_target ON rows ("vantage", "index", "url");`
}

func openSQLiteDB(path string) (*sql.DB, error) {
	dsn, err := sqlitepath.DSN(path, "busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

func openSQLiteStore(path string, meta StoreMeta) (_ *sqliteStore, err error) {
	f, err := privatefile.OpenReadWrite(path) // made 0600, or tightened to it
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	f.Close()
	db, err := openSQLiteDB(path)
	if err != nil {
		return nil, fmt.Errorf("opening the store %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	if _, err := db.Exec(sqliteSchema()); err != nil {
		return nil, fmt.Errorf("%s is not a survey store (SQLite): %w", path, err)
	}
	s := &sqliteStore{db: db}
	held, found, err := readSQLiteMeta(db)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if found {
		if err := checkResume(path, held, meta); err != nil {
			return nil, err
		}
		s.meta = held
	} else {
		meta.Schema = StoreSchema
		data, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		if _, err := db.Exec(`INSERT INTO meta (key, value) VALUES ('survey', ?)`, string(data)); err != nil {
			return nil, fmt.Errorf("writing the store %s: %w", path, err)
		}
		s.meta = meta
	}
	var count int64
	if err := db.QueryRow(`SELECT count(*) FROM rows`).Scan(&count); err != nil {
		return nil, fmt.Errorf("reading the store %s: %w", path, err)
	}
	s.rows.Store(count)
	names := make([]string, len(columns))
	marks := make([]string, len(columns))
	for i, c := range columns {
		names[i], marks[i] = fmt.Sprintf("%q", c.name), "?"
	}
	if s.insert, err = db.Prepare(`INSERT INTO rows (` + strings.Join(names, ", ") + `) VALUES (` + strings.Join(marks, ", ") + `)`); err != nil {
		return nil, err
	}
	if s.done, err = db.Prepare(`SELECT 1 FROM rows WHERE "vantage" = ? AND "index" = ? AND "url" = ? LIMIT 1`); err != nil {
		return nil, err
	}
	return s, nil
}

func readSQLiteMeta(db *sql.DB) (StoreMeta, bool, error) {
	var value string
	err := db.QueryRow(`SELECT value FROM meta WHERE key = 'survey'`).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return StoreMeta{}, false, nil
	}
	if err != nil {
		return StoreMeta{}, false, err
	}
	var m StoreMeta
	if err := json.Unmarshal([]byte(value), &m); err != nil {
		return m, false, fmt.Errorf("the store's description is not JSON: %w", err)
	}
	if m.Schema != StoreSchema {
		return m, false, fmt.Errorf("the store's layout is %q, not %s", m.Schema, StoreSchema)
	}
	return m, true, nil
}

func (s *sqliteStore) Write(r Row) error {
	if s.db == nil {
		return errStoreClosed
	}
	values, err := rowValues(&r)
	if err != nil {
		return err
	}
	if values[vantageColumn] == nil {
		values[vantageColumn] = "" // not NULL: the unique index treats NULLs as distinct
	}
	insert := s.insert
	if s.tx != nil {
		insert = s.tx.Stmt(s.insert)
	}
	if _, err := insert.Exec(values...); err != nil {
		return err
	}
	s.rows.Add(1)
	return nil
}

// begin makes the writes that follow one transaction, until commit: many
// rows at once (a merge), not a survey's rows as they finish.
func (s *sqliteStore) begin() error {
	tx, err := s.db.Begin()
	s.tx = tx
	return err
}

func (s *sqliteStore) commit() error {
	tx := s.tx
	s.tx = nil
	return tx.Commit()
}

func (s *sqliteStore) Done(t Target) (bool, error) {
	var one int
	err := s.done.QueryRow(s.meta.Settings.Vantage, t.Index, redact.URL(t.URL)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (s *sqliteStore) Rows() int       { return int(s.rows.Load()) }
func (s *sqliteStore) Meta() StoreMeta { return s.meta }

func (s *sqliteStore) Close() error {
	if s.db == nil {
		return nil
	}
	s.insert.Close()
	s.done.Close()
	err := s.db.Close()
	s.db = nil
	return err
}

// readSQLite reads every row of a SQLite store, in the list's order.
func readSQLite(path string, fn func(Row) error) (StoreMeta, error) {
	if _, err := os.Stat(path); err != nil {
		return StoreMeta{}, err
	}
	db, err := openSQLiteDB(path)
	if err != nil {
		return StoreMeta{}, err
	}
	defer db.Close()
	meta, found, err := readSQLiteMeta(db)
	if err != nil || !found {
		if err == nil {
			err = errors.New("no survey description (meta table)")
		}
		return meta, fmt.Errorf("%s is not a survey store: %w", path, err)
	}
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = fmt.Sprintf("%q", c.name)
	}
	rows, err := db.Query(`SELECT ` + strings.Join(names, ", ") + ` FROM rows ORDER BY "vantage", "index", "url"`)
	if err != nil {
		return meta, fmt.Errorf("reading %s: %w", path, err)
	}
	defer rows.Close()
	values := make([]any, len(columns))
	ptrs := make([]any, len(columns))
	for i := range values {
		ptrs[i] = &values[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return meta, err
		}
		r, err := rowFromValues(values)
		if err != nil {
			return meta, fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(r); err != nil {
			return meta, err
		}
	}
	return meta, rows.Err()
}
