package field

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/slowstart/slowstart/tune"

	// The pure-Go SQLite driver: no cgo, so the binary stays static.
	_ "modernc.org/sqlite"
)

// StoreVersion is the schema version of the store (SQLite's user_version).
const StoreVersion = 1

// storeApplicationID marks an SQLite file as a field store (SQLite's
// application_id, "slfd"), so that compare and view tell it from a watch store.
const storeApplicationID = 0x736c6664

// storeSchema creates the store's tables. Times are Unix nanoseconds (UTC).
// docs/field.md describes every column.
const storeSchema = `
CREATE TABLE IF NOT EXISTS intervals (
	start_unix_ns       INTEGER NOT NULL,
	end_unix_ns         INTEGER NOT NULL,
	network             TEXT    NOT NULL,
	connections         INTEGER NOT NULL,
	cut_short           INTEGER NOT NULL,
	cut_counts          TEXT    NOT NULL,
	retransmitted       INTEGER NOT NULL,
	limit_cwnd          INTEGER NOT NULL,
	limit_rwnd          INTEGER NOT NULL,
	limit_app           INTEGER NOT NULL,
	limit_end           INTEGER NOT NULL,
	limit_unknown       INTEGER NOT NULL,
	rtt_ms_sum          REAL    NOT NULL,
	rtt_ms_counts       TEXT    NOT NULL,
	round_trips_sum     REAL    NOT NULL,
	round_trips_counts  TEXT    NOT NULL,
	round1_bytes_sum    REAL    NOT NULL,
	round1_bytes_counts TEXT    NOT NULL,
	response_ms_sum     REAL    NOT NULL,
	response_ms_counts  TEXT    NOT NULL,
	PRIMARY KEY (network, start_unix_ns)
);
CREATE INDEX IF NOT EXISTS intervals_time ON intervals (start_unix_ns);
CREATE TABLE IF NOT EXISTS conns (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	time_unix_ns     INTEGER NOT NULL,
	network          TEXT    NOT NULL,
	weight           REAL    NOT NULL,
	handshake_rtt_us INTEGER,
	mss              INTEGER NOT NULL,
	initial_window   INTEGER NOT NULL,
	cwnd_at_request  INTEGER NOT NULL,
	rwnd_at_request  INTEGER NOT NULL,
	response_bytes   INTEGER NOT NULL,
	round1_bytes     INTEGER,
	round1_cwnd      INTEGER,
	round_trips      INTEGER,
	response_ms      REAL,
	round1_limit     TEXT    NOT NULL,
	cut_short        TEXT    NOT NULL DEFAULT '',
	retransmitted    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conns_time ON conns (time_unix_ns);
CREATE TABLE IF NOT EXISTS status (
	start_unix_ns   INTEGER PRIMARY KEY,
	end_unix_ns     INTEGER NOT NULL,
	source          TEXT    NOT NULL,
	followed        INTEGER NOT NULL,
	measured        INTEGER NOT NULL,
	no_request      INTEGER NOT NULL,
	no_response     INTEGER NOT NULL,
	events_read     INTEGER NOT NULL,
	events_lost     INTEGER NOT NULL,
	not_followed    INTEGER NOT NULL,
	pooled          INTEGER NOT NULL,
	packets_dropped INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS marks (
	key          TEXT PRIMARY KEY,
	time_unix_ns INTEGER NOT NULL,
	action       TEXT NOT NULL,
	netns        TEXT NOT NULL,
	mark         TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`

// Store is a field store: an SQLite file of intervals (counts and histograms
// per network), a weighted sample of connections, the source's status, and
// the marks of changes.
type Store struct {
	db   *sql.DB
	path string
}

// ErrNotStore says a file is not a field store.
var ErrNotStore = errors.New("not a slowstart field store")

// IsStore says whether path is a field store (an SQLite file marked as one).
func IsStore(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	magic := make([]byte, 16)
	_, err = f.ReadAt(magic, 0)
	f.Close()
	if err != nil || string(magic) != "SQLite format 3\x00" {
		return false
	}
	s, err := OpenStore(path, false)
	if err != nil {
		return false
	}
	s.Close()
	return true
}

// OpenStore opens the store at path; with create, it makes it when missing
// (readable by its owner only, as are SQLite's files beside it).
func OpenStore(path string, create bool) (*Store, error) {
	if !create {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("opening the field store: %w", err)
		}
	} else if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("opening the field store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("opening the field store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path}
	if err := s.init(create); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *Store) init(create bool) error {
	var version, app int64
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("%w: %v", ErrNotStore, err)
	}
	if err := s.db.QueryRow("PRAGMA application_id").Scan(&app); err != nil {
		return fmt.Errorf("%w: %v", ErrNotStore, err)
	}
	if version > StoreVersion {
		return fmt.Errorf("store version %d is newer than this slowstart knows (%d)", version, StoreVersion)
	}
	if app != storeApplicationID {
		var tables int
		if err := s.db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table'").Scan(&tables); err != nil {
			return err
		}
		if tables > 0 || !create {
			return fmt.Errorf("%w (an SQLite file of something else)", ErrNotStore)
		}
	}
	if !create {
		return nil
	}
	if _, err := s.db.Exec(storeSchema); err != nil {
		return err
	}
	_, err := s.db.Exec(fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d", storeApplicationID, StoreVersion))
	return err
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// SetMeta records what the store was written with (the ports, the grouping).
func (s *Store) SetMeta(ctx context.Context, values map[string]string) error {
	for k, v := range values {
		if _, err := s.db.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", k, v); err != nil {
			return fmt.Errorf("writing to the field store %s: %w", s.path, err)
		}
	}
	return nil
}

// Meta reads what SetMeta recorded.
func (s *Store) Meta(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT key, value FROM meta")
	if err != nil {
		return nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// intervalStatus is the status row of an interval.
type intervalStatus struct {
	source                                      string
	followed, measured, noRequest, noResponse   uint64
	eventsRead, eventsLost, notFollowed, pooled uint64
	packetsDropped                              uint64
}

// storedSample is a connection kept in the store, with its network and the
// number of connections it stands for.
type storedSample struct {
	network string
	weight  float64
	sample
}

// interval is what one interval writes.
type interval struct {
	start, end time.Time
	networks   map[string]*netStats // AllNetworks: the pool
	samples    []storedSample
	status     intervalStatus
}

// WriteInterval writes one interval in one transaction and removes what is
// older than retain (0: keeps everything).
func (s *Store) writeInterval(ctx context.Context, iv *interval, retain time.Duration) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing to the field store %s: %w", s.path, err)
	}
	defer tx.Rollback()
	start, end := iv.start.UnixNano(), iv.end.UnixNano()
	ins, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO intervals (start_unix_ns, end_unix_ns, network, connections, cut_short,
		cut_counts, retransmitted, limit_cwnd, limit_rwnd, limit_app, limit_end, limit_unknown, rtt_ms_sum, rtt_ms_counts, round_trips_sum,
		round_trips_counts, round1_bytes_sum, round1_bytes_counts, response_ms_sum, response_ms_counts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("writing to the field store %s: %w", s.path, err)
	}
	defer ins.Close()
	for name, n := range iv.networks {
		if n.Connections == 0 && name != AllNetworks {
			continue
		}
		if _, err := ins.ExecContext(ctx, start, end, name, n.Connections, n.CutShort, countsJSON(n.Cut[:]), n.Retransmitted,
			n.Limits[0], n.Limits[1], n.Limits[2], n.Limits[3], n.Limits[4],
			n.RTT.Sum, countsJSON(n.RTT.Counts), n.RoundTrips.Sum, countsJSON(n.RoundTrips.Counts),
			n.Round1Bytes.Sum, countsJSON(n.Round1Bytes.Counts), n.ResponseMs.Sum, countsJSON(n.ResponseMs.Counts)); err != nil {
			return fmt.Errorf("writing to the field store %s: %w", s.path, err)
		}
	}
	insConn, err := tx.PrepareContext(ctx, `INSERT INTO conns (time_unix_ns, network, weight, handshake_rtt_us, mss, initial_window,
		cwnd_at_request, rwnd_at_request, response_bytes, round1_bytes, round1_cwnd, round_trips, response_ms, round1_limit,
		cut_short, retransmitted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("writing to the field store %s: %w", s.path, err)
	}
	defer insConn.Close()
	for _, c := range iv.samples {
		var rtt, round1, round1Cwnd, rounds, response any
		if c.rttUs > 0 {
			rtt = c.rttUs
		}
		if c.round1Bytes >= 0 {
			round1, round1Cwnd = c.round1Bytes, c.round1Cwnd
		}
		if c.roundTrips >= 0 {
			rounds = c.roundTrips
		}
		if c.responseMs >= 0 {
			response = c.responseMs
		}
		retrans := 0
		if c.retransmitted {
			retrans = 1
		}
		if _, err := insConn.ExecContext(ctx, c.unixNs, c.network, c.weight, rtt, c.mss, c.iw, c.cwndAtRequest, c.rwndAtRequest,
			c.bytes, round1, round1Cwnd, rounds, response, limitOrder[c.limit], cutOrder[c.cut], retrans); err != nil {
			return fmt.Errorf("writing to the field store %s: %w", s.path, err)
		}
	}
	st := iv.status
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO status (start_unix_ns, end_unix_ns, source, followed, measured, no_request,
		no_response, events_read, events_lost, not_followed, pooled, packets_dropped) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		start, end, st.source, st.followed, st.measured, st.noRequest, st.noResponse, st.eventsRead, st.eventsLost,
		st.notFollowed, st.pooled, st.packetsDropped); err != nil {
		return fmt.Errorf("writing to the field store %s: %w", s.path, err)
	}
	if retain > 0 {
		cutoff := iv.end.Add(-retain).UnixNano()
		for _, q := range []string{"DELETE FROM intervals WHERE start_unix_ns < ?", "DELETE FROM conns WHERE time_unix_ns < ?",
			"DELETE FROM status WHERE start_unix_ns < ?"} {
			if _, err := tx.ExecContext(ctx, q, cutoff); err != nil {
				return fmt.Errorf("rolling the field store %s: %w", s.path, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("writing to the field store %s: %w", s.path, err)
	}
	return nil
}

func countsJSON(counts []uint64) string {
	b, _ := json.Marshal(counts)
	return string(b)
}

// AddMarks records marks the store does not hold yet; it returns how many it
// added.
func (s *Store) AddMarks(ctx context.Context, marks []tune.Mark) (int, error) {
	added := 0
	for _, m := range marks {
		data, err := json.Marshal(m)
		if err != nil {
			return added, err
		}
		res, err := s.db.ExecContext(ctx, "INSERT OR IGNORE INTO marks (key, time_unix_ns, action, netns, mark) VALUES (?, ?, ?, ?, ?)",
			m.Key(), m.Time.UnixNano(), m.Action, m.Netns, string(data))
		if err != nil {
			return added, fmt.Errorf("writing to the field store %s: %w", s.path, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			added++
		}
	}
	return added, nil
}

// Query selects a period of a store, and optionally one network.
type Query struct {
	From, To time.Time // [From, To); zero: no bound
	Network  string    // "" for every network
}

func (q Query) where(timeColumn string, withNetwork bool) (string, []any) {
	var conds []string
	var args []any
	if !q.From.IsZero() {
		conds = append(conds, timeColumn+" >= ?")
		args = append(args, q.From.UnixNano())
	}
	if !q.To.IsZero() {
		conds = append(conds, timeColumn+" < ?")
		args = append(args, q.To.UnixNano())
	}
	if withNetwork && q.Network != "" {
		conds = append(conds, "network = ?")
		args = append(args, q.Network)
	}
	if len(conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(conds, " AND "), args
}

// Marks returns the marks of the period, oldest first.
func (s *Store) Marks(ctx context.Context, q Query) ([]tune.Mark, error) {
	where, args := q.where("time_unix_ns", false)
	rows, err := s.db.QueryContext(ctx, "SELECT mark FROM marks WHERE "+where+" ORDER BY time_unix_ns", args...)
	if err != nil {
		return nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
	}
	defer rows.Close()
	marks := []tune.Mark{}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var m tune.Mark
		if err := json.Unmarshal([]byte(data), &m); err == nil {
			marks = append(marks, m)
		}
	}
	return marks, rows.Err()
}

// intervalRow is one row of the intervals table.
type intervalRow struct {
	start, end int64
	network    string
	stats      *netStats
}

// intervals returns the rows of the period (every network, the pool
// included, unless q names one), oldest first.
func (s *Store) intervals(ctx context.Context, q Query) ([]intervalRow, error) {
	where, args := q.where("start_unix_ns", true)
	rows, err := s.db.QueryContext(ctx, `SELECT start_unix_ns, end_unix_ns, network, connections, cut_short, cut_counts, retransmitted, limit_cwnd,
		limit_rwnd, limit_app, limit_end, limit_unknown, rtt_ms_sum, rtt_ms_counts, round_trips_sum, round_trips_counts,
		round1_bytes_sum, round1_bytes_counts, response_ms_sum, response_ms_counts FROM intervals WHERE `+where+
		` ORDER BY start_unix_ns, network`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []intervalRow
	for rows.Next() {
		r := intervalRow{stats: newNetStats(0)}
		n := r.stats
		var cuts, rtt, rounds, round1, response string
		if err := rows.Scan(&r.start, &r.end, &r.network, &n.Connections, &n.CutShort, &cuts, &n.Retransmitted, &n.Limits[0], &n.Limits[1],
			&n.Limits[2], &n.Limits[3], &n.Limits[4], &n.RTT.Sum, &rtt, &n.RoundTrips.Sum, &rounds, &n.Round1Bytes.Sum, &round1,
			&n.ResponseMs.Sum, &response); err != nil {
			return nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
		}
		var cutCounts []uint64
		if err := json.Unmarshal([]byte(cuts), &cutCounts); err == nil {
			copy(n.Cut[:], cutCounts)
		}
		for _, h := range []struct {
			text string
			h    *hist
		}{{rtt, &n.RTT}, {rounds, &n.RoundTrips}, {round1, &n.Round1Bytes}, {response, &n.ResponseMs}} {
			var counts []uint64
			if err := json.Unmarshal([]byte(h.text), &counts); err != nil || len(counts) != len(h.h.Counts) {
				return nil, fmt.Errorf("reading the field store %s: a histogram of %d buckets, want %d", s.path, len(counts), len(h.h.Counts))
			}
			copy(h.h.Counts, counts)
			for _, c := range counts {
				h.h.N += c
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// samples returns the connections kept in the period (of q's network, or of
// every network), oldest first.
func (s *Store) samples(ctx context.Context, q Query) ([]storedSample, error) {
	where, args := q.where("time_unix_ns", true)
	rows, err := s.db.QueryContext(ctx, `SELECT time_unix_ns, network, weight, handshake_rtt_us, mss, initial_window, cwnd_at_request,
		rwnd_at_request, response_bytes, round1_bytes, round1_cwnd, round_trips, response_ms, round1_limit, cut_short, retransmitted
		FROM conns WHERE `+where+` ORDER BY time_unix_ns, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []storedSample
	for rows.Next() {
		var c storedSample
		var rtt, round1, round1Cwnd, rounds sql.NullInt64
		var response sql.NullFloat64
		var limit, cut string
		var retrans int
		if err := rows.Scan(&c.unixNs, &c.network, &c.weight, &rtt, &c.mss, &c.iw, &c.cwndAtRequest, &c.rwndAtRequest, &c.bytes,
			&round1, &round1Cwnd, &rounds, &response, &limit, &cut, &retrans); err != nil {
			return nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
		}
		c.rttUs = uint32(rtt.Int64)
		c.round1Bytes, c.roundTrips, c.responseMs = -1, -1, -1
		if round1.Valid {
			c.round1Bytes, c.round1Cwnd = round1.Int64, uint32(round1Cwnd.Int64)
		}
		if rounds.Valid {
			c.roundTrips = int32(rounds.Int64)
		}
		if response.Valid {
			c.responseMs = response.Float64
		}
		c.limit = uint8(limitIndex(limit))
		c.cut = cutIndex(cut)
		c.retransmitted = retrans != 0
		out = append(out, c)
	}
	return out, rows.Err()
}

// statusSum adds up the status rows of the period.
func (s *Store) statusSum(ctx context.Context, q Query) (intervalStatus, []string, error) {
	where, args := q.where("start_unix_ns", false)
	rows, err := s.db.QueryContext(ctx, `SELECT source, followed, measured, no_request, no_response, events_read, events_lost,
		not_followed, pooled, packets_dropped FROM status WHERE `+where+` ORDER BY start_unix_ns`, args...)
	if err != nil {
		return intervalStatus{}, nil, fmt.Errorf("reading the field store %s: %w", s.path, err)
	}
	defer rows.Close()
	var sum intervalStatus
	var sources []string
	for rows.Next() {
		var r intervalStatus
		if err := rows.Scan(&r.source, &r.followed, &r.measured, &r.noRequest, &r.noResponse, &r.eventsRead, &r.eventsLost,
			&r.notFollowed, &r.pooled, &r.packetsDropped); err != nil {
			return sum, nil, err
		}
		if len(sources) == 0 || sources[len(sources)-1] != r.source {
			sources = append(sources, r.source)
		}
		sum.followed += r.followed
		sum.measured += r.measured
		sum.noRequest += r.noRequest
		sum.noResponse += r.noResponse
		sum.eventsRead += r.eventsRead
		sum.eventsLost += r.eventsLost
		sum.notFollowed += r.notFollowed
		sum.pooled += r.pooled
		sum.packetsDropped += r.packetsDropped
	}
	return sum, sources, rows.Err()
}
