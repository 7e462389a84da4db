package texttable

import (
	"strconv"
	"strings"
	"testing"
)

// TestLayout: words left, numbers right, headers as their columns, two
// spaces between columns, display widths (×, → one column, 名前 four) not
// bytes nor runes, the indent on every line, empty cells, and no trailing
// spaces.
func TestLayout(t *testing.T) {
	tb := New("  ", R("round"), L("limit"), R("growth"), L("note"))
	tb.Row("1", "cwnd", "-", "")
	tb.Row("12", "end", "2.0×", "a → b")
	tb.Row("3")
	tb.Row("4", "名前", "±1")
	want := "" +
		"  round  limit  growth  note\n" +
		"      1  cwnd        -\n" +
		"     12  end      2.0×  a → b\n" +
		"      3\n" +
		"      4  名前       ±1\n"
	checkTable(t, tb, want, 4)
}

// checkTable holds a table to its rendering and its count of rows.
func checkTable(t *testing.T, tb *Table, want string, rows int) {
	t.Helper()
	if got := tb.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if tb.Len() != rows {
		t.Errorf("Len %d, want %d", tb.Len(), rows)
	}
}

// TestCellsInPlace: cells written through Buf and EndCell lay out as Row's
// strings do, a row left short is ended with empty cells, and a reset table
// is filled again from nothing (no row of the first filling stays).
func TestCellsInPlace(t *testing.T) {
	tb := New("", R("n"), L("what"))
	tb.Row("1", "first")
	tb.EndCell(strconv.AppendInt(tb.Buf(), 22, 10))
	tb.EndCell(append(tb.Buf(), "second →"...))
	tb.EndCell(append(tb.Buf(), "333"...)) // a row one cell short
	want := "" +
		"  n  what\n" +
		"  1  first\n" +
		" 22  second →\n" +
		"333\n"
	checkTable(t, tb, want, 3)
	tb.Reset()
	tb.Row("4", "again")
	var out strings.Builder
	if err := tb.Write(&out); err != nil {
		t.Fatal(err)
	}
	if want := "n  what\n4  again\n"; out.String() != want {
		t.Errorf("after Reset got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestNoColumns: a table of no columns has no rows and renders nothing.
func TestNoColumns(t *testing.T) {
	tb := New("  ")
	tb.Row("ignored")
	if tb.Len() != 0 || tb.String() != "" {
		t.Errorf("a table of no columns: Len %d, %q", tb.Len(), tb.String())
	}
}
