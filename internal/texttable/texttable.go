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
	"slices"

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

// Table is a table being filled. Its cells are kept one after another in
// one buffer, so that filling a table allocates nothing per cell and a table
// reset is filled again without allocating.
type Table struct {
	indent string
	cols   []Column
	text   []byte  // the cells' text, one after another
	ends   []int32 // where each cell ends in text; len(cols) of them a row
	out    []byte  // the rendering, kept for the next
	widths []int   // the columns' widths, then each header's, at rendering
	cellW  []int32 // each cell's display width, at rendering
}

// New starts a table whose lines begin with indent.
func New(indent string, cols ...Column) *Table {
	return &Table{indent: indent, cols: cols}
}

// Row adds a row: a cell per column (missing ones are empty, extra ones an
// error of the caller's).
func (t *Table) Row(cells ...string) {
	for i := range t.cols {
		if i < len(cells) {
			t.text = append(t.text, cells[i]...)
		}
		t.ends = append(t.ends, int32(len(t.text)))
	}
}

// Buf and EndCell add a cell written in place, without a string made for it:
// append the cell's text to what Buf returns and give the result to EndCell,
// as in tb.EndCell(strconv.AppendInt(tb.Buf(), n, 10)). A row is len(cols)
// cells; a row left short is ended by the next Row, or by the table's end.
func (t *Table) Buf() []byte { return t.text }

// EndCell ends the cell appended to Buf's slice.
func (t *Table) EndCell(b []byte) {
	t.text = b
	t.ends = append(t.ends, int32(len(b)))
}

// Reset empties the table, keeping its columns and its memory.
func (t *Table) Reset() {
	t.text, t.ends = t.text[:0], t.ends[:0]
}

// Len is the number of rows.
func (t *Table) Len() int {
	if len(t.cols) == 0 {
		return 0
	}
	return (len(t.ends) + len(t.cols) - 1) / len(t.cols)
}

// Write renders the table to w.
func (t *Table) Write(w io.Writer) error {
	t.out = t.appendTo(t.out[:0])
	_, err := w.Write(t.out)
	return err
}

// String renders the table.
func (t *Table) String() string { return string(t.appendTo(nil)) }

// cell is the text of cell i, counting along the rows.
func (t *Table) cell(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.text[start:t.ends[i]]
}

// appendTo renders the table onto b: each column as wide as its widest
// cell or header, measured in display columns by displaywidth, with East
// Asian ambiguous runes narrow whatever the locale, so that the text is the
// same on every machine.
func (t *Table) appendTo(b []byte) []byte {
	n := len(t.cols)
	if n == 0 {
		return b
	}
	// A row left short is ended here: the cells it lacks are empty.
	for len(t.ends)%n != 0 {
		t.ends = append(t.ends, int32(len(t.text)))
	}
	t.widths = slices.Grow(t.widths[:0], 2*n)[:2*n]
	widths, headers := t.widths[:n], t.widths[n:]
	for i, c := range t.cols {
		headers[i] = displaywidth.String(c.Name)
		widths[i] = headers[i]
	}
	t.cellW = slices.Grow(t.cellW[:0], len(t.ends))[:len(t.ends)]
	for i := range t.ends {
		t.cellW[i] = int32(cellWidth(t.cell(i)))
		widths[i%n] = max(widths[i%n], int(t.cellW[i]))
	}
	b = append(b, t.indent...)
	for i, c := range t.cols {
		b = appendCell(b, i, c.Align, widths[i], c.Name, headers[i])
	}
	b = endLine(b)
	for i := range t.ends {
		if i%n == 0 {
			b = append(b, t.indent...)
		}
		b = appendCell(b, i%n, t.cols[i%n].Align, widths[i%n], t.cell(i), int(t.cellW[i]))
		if i%n == n-1 {
			b = endLine(b)
		}
	}
	return b
}

// cellWidth is a cell's display width; printable ASCII, most cells, is
// counted without decoding.
func cellWidth(b []byte) int {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			return displaywidth.Bytes(b)
		}
	}
	return len(b)
}

// appendCell appends a cell of column i padded to width w on the side away
// from its alignment, two spaces after the column before.
func appendCell[T string | []byte](b []byte, i int, align Align, width int, text T, w int) []byte {
	if i > 0 {
		b = append(b, "  "...)
	}
	if align == Right {
		b = appendSpaces(b, width-w)
		return append(b, text...)
	}
	b = append(b, text...)
	return appendSpaces(b, width-w)
}

// endLine ends a line without trailing spaces.
func endLine(b []byte) []byte {
	end := len(b)
	for end > 0 && b[end-1] == ' ' {
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
