package watch

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slowstart/slowstart/report"
)

func ptr[T any](v T) *T { return &v }

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "watch.db")
	s, err := OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestStoreRoundTrip(t *testing.T) {
	s, path := openTemp(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 20, 14, 0, 0, 123456789, time.UTC)
	full := Row{Time: t0, URL: "https://a.example/", SummaryRow: report.SummaryRow{IW: report.IWReading{Segments: ptr(10), Verdict: "exact"},
		HandshakeRTTMs: ptr(151.25), TLSMs: ptr(302.5), FirstByteMs: ptr(460.0), LastByteMs: ptr(1210.75), RoundTrips: ptr(7),
		BodyBytes: ptr(int64(163840))}}
	failed := Row{Time: t0.Add(5 * time.Minute), URL: "https://a.example/", Error: "the server did not answer in time"}
	other := Row{Time: t0.Add(10 * time.Minute), URL: "http://b.example/", SummaryRow: report.SummaryRow{LastByteMs: ptr(80.0)}}
	for _, r := range []Row{full, failed, other} {
		if _, err := s.Insert(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened, as a later compare would.
	s, err := OpenStore(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Rows(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	got := rows[0]
	if !got.Time.Equal(t0) || got.URL != full.URL || *got.IW.Segments != 10 || got.IW.Verdict != "exact" ||
		*got.HandshakeRTTMs != 151.25 || *got.TLSMs != 302.5 || *got.FirstByteMs != 460 || *got.LastByteMs != 1210.75 ||
		*got.RoundTrips != 7 || *got.BodyBytes != 163840 || got.Error != "" || got.ID == 0 {
		t.Errorf("full row came back as %+v", got)
	}
	if f := rows[1]; f.Error != failed.Error || f.IW.Segments != nil || f.LastByteMs != nil || f.TLSMs != nil || f.BodyBytes != nil {
		t.Errorf("failed row came back as %+v", f)
	}
	byURL, err := s.Rows(ctx, Query{URL: "https://a.example/"})
	if err != nil || len(byURL) != 2 {
		t.Errorf("by URL: %d rows, %v", len(byURL), err)
	}
	window, err := s.Rows(ctx, Query{From: t0.Add(time.Minute), To: t0.Add(10 * time.Minute)})
	if err != nil || len(window) != 1 || window[0].Error == "" {
		t.Errorf("window [t0+1m, t0+10m): %+v, %v (want only the failed row: To is exclusive)", window, err)
	}
	urls, err := s.URLs(ctx)
	if err != nil || len(urls) != 2 || urls["https://a.example/"] != 2 {
		t.Errorf("URLs: %v, %v", urls, err)
	}
}

func TestStoreRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenStore(filepath.Join(dir, "missing.db"), true); err == nil {
		t.Error("a missing store opened with mustExist")
	}
	// An SQLite database of something else.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (text TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenStore(other, true); err == nil || !strings.Contains(err.Error(), "not a watch store") {
		t.Errorf("another database: %v", err)
	}
	// A store of a newer version.
	newer := filepath.Join(dir, "newer.db")
	db, err = sql.Open("sqlite", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenStore(newer, true); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("a newer store: %v", err)
	}
}

// TestStorePathsArePaths: a store named with '?', '#' or '%' is that file,
// 0600, and the only one made (the part before '?' was taken for the name,
// with mode 0644, and the named file stayed empty).
func TestStorePathsArePaths(t *testing.T) {
	for _, name := range []string{"w?x.db", "a#b.db", "100%.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			s, err := OpenStore(path, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Insert(context.Background(), Row{Time: time.Now(), URL: "https://a.example/"}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err = OpenStore(path, true)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Rows(context.Background(), Query{})
			s.Close()
			if err != nil || len(rows) != 1 {
				t.Errorf("%d rows read back (%v), want 1", len(rows), err)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), name) {
					t.Errorf("the store %s made %s beside it", name, e.Name())
				}
				if info, err := e.Info(); err == nil && info.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", e.Name(), info.Mode().Perm())
				}
			}
		})
	}
}

// TestRowJSON: a row's JSON is what docs/schemas/watch.json lays out, key by
// key in the order the struct tags of earlier versions wrote it (the
// expected text is written by hand from the schema), and reads back whole.
func TestRowJSON(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 14, 0, 0, 123456789, time.UTC)
	full := Row{ID: 7, Time: t0, URL: "https://a.example/", Label: "edge", SummaryRow: report.SummaryRow{
		IW:             report.IWReading{Segments: ptr(4), SegmentsMax: ptr(10), Verdict: "range"},
		HandshakeRTTMs: ptr(151.25), TLSMs: ptr(302.5), FirstByteMs: ptr(460.0), LastByteMs: ptr(1210.75),
		Status: ptr(200), RoundTrips: ptr(7), BodyBytes: ptr(int64(163840))}}
	empty := Row{ID: 8, Time: t0, URL: "https://a.example/", Error: "refused"}
	for _, tc := range []struct {
		row  Row
		want string
	}{
		{full, `{"id":7,"time":"2026-11-20T14:00:00.123456789Z","url":"https://a.example/","label":"edge","iw_segments":4,"iw_segments_max":10,` +
			`"iw_verdict":"range","handshake_rtt_ms":151.25,"tls_ms":302.5,"first_byte_ms":460,"last_byte_ms":1210.75,"status":200,` +
			`"round_trips":7,"body_bytes":163840,"error":""}`},
		{empty, `{"id":8,"time":"2026-11-20T14:00:00.123456789Z","url":"https://a.example/","iw_segments":null,"iw_verdict":"",` +
			`"handshake_rtt_ms":null,"tls_ms":null,"first_byte_ms":null,"last_byte_ms":null,"status":null,"round_trips":null,` +
			`"body_bytes":null,"error":"refused"}`},
	} {
		data, err := json.Marshal(tc.row)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != tc.want {
			t.Errorf("JSON\n got %s\nwant %s", data, tc.want)
		}
		var back Row
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, tc.row) {
			t.Errorf("read back as %+v, want %+v", back, tc.row)
		}
	}
}
