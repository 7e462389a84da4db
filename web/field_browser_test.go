package web

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fieldView makes a field view of three networks over an hour of minutes,
// the last network seen only in the second half, with a mark at the half.
func fieldView() *FieldView {
	v := &FieldView{Schema: FieldViewSchema, Store: "/var/lib/slowstart/field.db", FromUnixMs: 1_800_000_000_000,
		ToUnixMs: 1_800_003_600_000, BucketSeconds: 60}
	f := func(x float64) *float64 { return &x }
	for n, name := range []string{"", "AS64500", "198.51.100.0/24"} {
		net := FieldNetwork{Network: name}
		for i := range 60 {
			if n == 2 && i < 30 {
				continue
			}
			rounds := 3.0
			if i >= 30 {
				rounds = 1
			}
			start := v.FromUnixMs + int64(i)*60_000
			net.Buckets = append(net.Buckets, FieldBucket{StartUnixMs: start, EndUnixMs: start + 60_000, Connections: 100, WindowLimited: rounds / 3,
				HandshakeRTTMs: FieldQuantiles{f(20), f(40 + float64(n)*10), f(90), f(45)},
				RoundTrips:     FieldQuantiles{f(1), f(rounds), f(rounds + 1), f(rounds)},
				Round1Bytes:    FieldQuantiles{f(2000), f(5792), f(5792), f(5000)},
				ResponseMs:     FieldQuantiles{f(20), f(rounds * 40), f(rounds * 60), f(rounds * 45)}})
			net.Connections += 100
		}
		v.Networks = append(v.Networks, net)
	}
	v.Marks = []FieldMark{{UnixMs: v.FromUnixMs + 30*60_000, Text: "2027-01-15 08:30:00 tune apply: initcwnd 4 → 32"}}
	return v
}

// TestFieldBrowser opens the field view served and as a file in headless
// Chromium (test/field.mjs) and checks what it draws against the view.
func TestFieldBrowser(t *testing.T) {
	node := requireBrowser(t)
	dir := t.TempDir()
	v := fieldView()
	h, err := NewFieldHandler(v, HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var html bytes.Buffer
	if err := WriteFieldHTML(&html, v); err != nil {
		t.Fatal(err)
	}
	htmlPath := filepath.Join(dir, "field.html")
	if err := os.WriteFile(htmlPath, html.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	type network struct {
		Network string `json:"network"`
		Points  int    `json:"points"`
	}
	var nets []network
	for _, n := range v.Networks {
		nets = append(nets, network{n.Network, len(n.Buckets)})
	}
	cases := []map[string]any{
		{"name": "served", "url": srv.URL + "/", "networks": nets, "marks": len(v.Marks)},
		{"name": "file", "url": "file://" + htmlPath, "networks": nets, "marks": len(v.Marks)},
	}
	config, err := json.Marshal(map[string]any{"chromium": chromiumPath, "artifacts": mustAbs(t, filepath.Join("test", "artifacts")), "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, "test/field.mjs", configPath).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the field view's browser checks failed: %v", err)
	}
}

// TestFieldHandler: the field view's page serves its view at api/field, and
// a Report that says the page is a field view.
func TestFieldHandler(t *testing.T) {
	h, err := NewFieldHandler(fieldView(), HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for path, want := range map[string]string{"/api/field": FieldViewSchema, "/api/report": FieldSourceKind} {
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("%s: %d, %q does not hold %q", path, res.StatusCode, b.String()[:min(b.Len(), 200)], want)
		}
	}
	if _, err := NewFieldHandler(nil, HandlerOptions{}); err == nil {
		t.Error("a nil view served")
	}
}
