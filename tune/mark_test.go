package tune

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMarks: a change that replaced a route is recorded with the route's
// initcwnd before and after; one that changed nothing is not recorded; the
// journal reads back in order, past a line cut short by a crash, which does
// not swallow the next one.
func TestMarks(t *testing.T) {
	before := Route{Family: "inet", Type: "unicast", Destination: "default", Metrics: []Metric{{Name: "initcwnd", Value: 10}}}
	after := before
	after.Metrics = []Metric{{Name: "initcwnd", Value: 32}, {Name: "initrwnd", Value: 32}}
	if m := markOf("apply", "", "b.json", []Change{{Before: before, After: before, Unchanged: true}}, nil); m != nil {
		t.Errorf("a change of nothing was recorded: %+v", m)
	}
	m := markOf("apply", "web1", "b.json", []Change{{Before: before, After: after}, {Before: before, After: before, Unchanged: true}}, nil)
	if m == nil || len(m.Routes) != 1 {
		t.Fatalf("mark %+v, want one route", m)
	}
	if r := m.Routes[0]; r.InitCwndBefore != 10 || r.InitCwndAfter != 32 || r.InitRwndBefore != 0 || r.InitRwndAfter != 32 {
		t.Errorf("route %+v, want initcwnd 10 → 32, initrwnd 0 → 32", r)
	}
	path := filepath.Join(t.TempDir(), "dir", MarksFileName)
	if marks, err := ReadMarks(path); err != nil || len(marks) != 0 {
		t.Fatalf("a missing journal: %v, %v", marks, err)
	}
	if err := AppendMark(path, *m); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"schema":"slowstart.tune-mark/v1","time":"2026-`) // a write cut by a crash
	f.Close()
	second := *m
	second.Action = "revert"
	if err := AppendMark(path, second); err != nil {
		t.Fatal(err)
	}
	marks, err := ReadMarks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 2 || marks[0].Netns != "web1" || marks[0].Key() != m.Key() || marks[1].Action != "revert" {
		t.Errorf("read %+v, want the two whole marks, apply then revert", marks)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v (%v), want 0600", st.Mode(), err)
	}
}
