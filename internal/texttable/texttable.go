// Package texttable renders the tables of every verb's text output one way:
// a header line of lower-case column names, then a line per row; words
// aligned left and numbers right, under a header aligned as its column;
// columns two spaces apart; no borders and no trailing spaces. Cells are
// measured by their display width (×, →, ≥ count as one column) with
// github.com/clipperhouse/displaywidth. It is not for CSV or JSON, nor for
// text that wraps.
package texttable

import (
	"io"

	"github.com/clipperhouse/displaywidth"
)

// Align is a column's alignment.
type Align int

const (
	Left  Align = iota // words
	Right              // numbers
)

// Column is a column's name (its header, lower-case) and alignment.
type Column struct {
	Name  string
	Align Align
}

// L and R make a column aligned left or right.
func L(name string) Column { return Column{name, Left} }
func R(name string) Column { return Column{name, Right} }

// Table is a table being filled.
type Table struct {
	indent string
	cols   []Column
	rows   [][]string
}

// New starts a table whose lines begin with indent.
func New(indent string, cols ...Column) *Table {
	return &Table{indent: indent, cols: cols}
}

// Row adds a row: a cell per column (missing ones are empty).
func (t *Table) Row(cells ...string) {
	row := make([]string, len(t.cols))
	copy(row, cells)
	t.rows = append(t.rows, row)
}

// Len is the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// Write renders the table to w.
func (t *Table) Write(w io.Writer) error {
	_, err := w.Write(t.appendTo(nil))
	return err
}

// String renders the table.
func (t *Table) String() string { return string(t.appendTo(nil)) }

// appendTo renders the table onto b: each column as wide as its widest
// cell or header, measured in display columns by displaywidth, with East
// Asian ambiguous runes narrow whatever the locale, so that the text is the
// same on every machine.
func (t *Table) appendTo(b []byte) []byte {
	n := len(t.cols)
	widths := make([]int, 2*n) // a column's width, then its header's
	for i, c := range t.cols {
		widths[n+i] = displaywidth.String(c.Name)
		widths[i] = widths[n+i]
	}
	cellWidths := make([]int32, len(t.rows)*n)
	for r, row := range t.rows {
		for i, cell := range row {
			w := displaywidth.String(cell)
			cellWidths[r*n+i] = int32(w)
			widths[i] = max(widths[i], w)
		}
	}
	b = t.appendLine(b, widths[:n], func(i int) (string, int) { return t.cols[i].Name, widths[n+i] })
	for r, row := range t.rows {
		b = t.appendLine(b, widths[:n], func(i int) (string, int) { return row[i], int(cellWidths[r*n+i]) })
	}
	return b
}

// appendLine appends a line of the table: the indent, each cell padded to
// its column's width on the side away from its alignment, columns two
// spaces apart, and no trailing spaces.
func (t *Table) appendLine(b []byte, widths []int, cell func(int) (string, int)) []byte {
	start := len(b)
	b = append(b, t.indent...)
	for i, c := range t.cols {
		text, w := cell(i)
		if i > 0 {
			b = append(b, "  "...)
		}
		pad := widths[i] - w
		if c.Align == Right {
			b = appendSpaces(b, pad)
			b = append(b, text...)
		} else {
			b = append(b, text...)
			b = appendSpaces(b, pad)
		}
	}
	end := len(b)
	for end > start && b[end-1] == ' ' {
		end--
	}
	return append(b[:end], '\n')
}

func appendSpaces(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}
