package texttable

import "testing"

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
	if got := tb.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if tb.Len() != 4 {
		t.Errorf("Len %d", tb.Len())
	}
}
