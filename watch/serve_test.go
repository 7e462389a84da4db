package watch

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/probe"
	"github.com/slowstart/slowstart/report"
)

// TestSecretsStayOut: a watch of a URL with credentials and a token leaves them in
// no row, no error message and no metric, and --label names the series instead.
func TestSecretsStayOut(t *testing.T) {
	const raw = "https://alice:s3cret@example.com/page?token=abc123"
	store, err := OpenStore(filepath.Join(t.TempDir(), "w.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	metrics := NewMetrics("test", "c0ffee")
	calls := 0
	prober := func(_ context.Context, o probe.Options) (*probe.Result, error) {
		calls++
		if calls == 1 {
			return nil, fmt.Errorf("Get %q: dial tcp: lookup example.com: no such host (user %s)", o.URL, "alice:s3cret")
		}
		// The page redirected to a URL with credentials and a token of its
		// own, and that request failed: net/http names the target (its
		// password stripped, its user and query left).
		return nil, fmt.Errorf(`Get "https://bob:***@other.example/next?sig=tok3nvalue": dial tcp 192.0.2.1:443: connect: connection refused`)
	}
	for _, label := range []string{"", "shop-front"} {
		err := Run(context.Background(), Config{Probe: probe.Options{URL: raw}, Every: time.Millisecond, Count: 1,
			Store: store, Metrics: metrics, Label: label, Prober: prober})
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := store.Rows(context.Background(), Query{URL: raw})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v (%v), want 2 found by the raw URL", rows, err)
	}
	var text strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&text, "%+v\n", r)
	}
	if err := metrics.Write(&text); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret", "abc123", "alice", "bob", "tok3nvalue"} {
		if strings.Contains(text.String(), secret) {
			t.Errorf("%q is in the rows or metrics:\n%s", secret, text.String())
		}
	}
	for _, want := range []string{`slowstart_watch_probes_total{url="https://REDACTED@example.com/page?token=REDACTED"} 1`,
		`slowstart_watch_probes_total{label="shop-front"} 1`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the metrics lack %s:\n%s", want, text.String())
		}
	}
	if rows[1].Label != "shop-front" || rows[0].Label != "" {
		t.Errorf("labels %q, %q", rows[0].Label, rows[1].Label)
	}
}

// TestStoreIsPrivate: a new store, its journal files, and an old store opened
// again are readable by their owner only.
func TestStoreIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	s, err := OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(context.Background(), Row{Time: time.Now(), URL: "https://example.com/"}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group and others", e.Name(), info.Mode().Perm())
		}
	}
	s.Close()
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(old, false)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st, _ := os.Stat(old); st.Mode().Perm() != 0o600 {
		t.Errorf("an existing store keeps mode %v, want 0600", st.Mode().Perm())
	}
}

// openOldStore makes a store file with the given SQL (an older version's table
// and rows), then opens it as OpenStore does, which upgrades it; the store is
// closed when the test ends.
func openOldStore(t *testing.T, schema string) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenStore(path, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStoreMigratesVersion1: a store of version 1 (no label column) is read and
// written after its upgrade.
func TestStoreMigratesVersion1(t *testing.T) {
	s := openOldStore(t, `CREATE TABLE probes (id INTEGER PRIMARY KEY AUTOINCREMENT, time_unix_ns INTEGER NOT NULL, url TEXT NOT NULL,
		iw_segments INTEGER, iw_verdict TEXT, handshake_rtt_ms REAL, tls_ms REAL, first_byte_ms REAL, last_byte_ms REAL,
		round_trips INTEGER, body_bytes INTEGER, error TEXT NOT NULL DEFAULT '');
		INSERT INTO probes (time_unix_ns, url) VALUES (1, 'https://example.com/');
		PRAGMA user_version = 1;`)
	if _, err := s.Insert(context.Background(), Row{Time: time.Now(), URL: "https://example.com/", Label: "x"}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Rows(context.Background(), Query{})
	if err != nil || len(rows) != 2 || rows[0].Label != "" || rows[1].Label != "x" {
		t.Errorf("rows %+v (%v)", rows, err)
	}
}

// TestStoreMigratesVersion2: a version-2 store gains iw_segments_max; its rows
// read back without one, and a range written after the upgrade keeps both ends.
func TestStoreMigratesVersion2(t *testing.T) {
	s := openOldStore(t, `CREATE TABLE probes (id INTEGER PRIMARY KEY AUTOINCREMENT, time_unix_ns INTEGER NOT NULL, url TEXT NOT NULL,
		iw_segments INTEGER, iw_verdict TEXT, handshake_rtt_ms REAL, tls_ms REAL, first_byte_ms REAL, last_byte_ms REAL,
		round_trips INTEGER, body_bytes INTEGER, error TEXT NOT NULL DEFAULT '', label TEXT NOT NULL DEFAULT '', status INTEGER);
		INSERT INTO probes (time_unix_ns, url, iw_segments, iw_verdict) VALUES (1, 'https://example.com/', 10, 'exact');
		PRAGMA user_version = 2;`)
	low, high := 4, 10
	if _, err := s.Insert(context.Background(), Row{Time: time.Now(), URL: "https://example.com/", SummaryRow: report.SummaryRow{IW: report.IWReading{Segments: &low, SegmentsMax: &high, Verdict: "range"}}}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Rows(context.Background(), Query{})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v (%v)", rows, err)
	}
	if old := rows[0]; old.IW.Segments == nil || *old.IW.Segments != 10 || old.IW.SegmentsMax != nil || old.IW.Verdict != "exact" {
		t.Errorf("the version-2 row reads back as %+v", old)
	}
	if r := rows[1]; r.IW.Segments == nil || *r.IW.Segments != 4 || r.IW.SegmentsMax == nil || *r.IW.SegmentsMax != 10 {
		t.Errorf("the range reads back as %+v", r)
	}
}

// TestMetricsServer: :PORT listens on loopback only, and the metrics are at
// /metrics with an index at / (package localhttp's test checks the methods
// and the Host headers it answers).
func TestMetricsServer(t *testing.T) {
	if addr, err := MetricsAddress(":0"); err != nil || addr != "127.0.0.1:0" {
		t.Errorf("MetricsAddress(:0) = %q, %v", addr, err)
	}
	if addr, err := MetricsAddress("0.0.0.0:9464"); err != nil || addr != "0.0.0.0:9464" {
		t.Errorf("an explicit address is kept: %q, %v", addr, err)
	}
	m := NewMetrics("test", "c0ffee")
	m.Observe(Row{Time: time.Now(), URL: "https://example.com/"})
	stop, bound, err := ServeMetrics(":0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if host, _, _ := net.SplitHostPort(bound); host != "127.0.0.1" {
		t.Errorf("bound to %s, want 127.0.0.1", bound)
	}
	for path, want := range map[string]string{"/metrics": "slowstart_watch_probes_total", "/": "metrics at /metrics"} {
		resp, err := http.Get("http://" + bound + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %q, want %q", path, resp.StatusCode, body, want)
		}
	}
}
