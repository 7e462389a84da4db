// Package texttable renders the tables of every verb's text output one way:
// a header line of lower-case column names, then a line per row; words
// aligned left and numbers right, under a header aligned as its column;
// columns two spaces apart; no borders and no trailing spaces. It is a thin
// front end over github.com/olekukonko/tablewriter, which measures cells by
// their display width (×, →, ≥ count as one column). It is not for CSV or
// JSON, nor for text that wraps.
package texttable

import (
	"bytes"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
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
	_, err := io.WriteString(w, t.String())
	return err
}

// String renders the table.
func (t *Table) String() string {
	aligns := make([]tw.Align, len(t.cols))
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		aligns[i], names[i] = tw.AlignLeft, c.Name
		if c.Align == Right {
			aligns[i] = tw.AlignRight
		}
	}
	var buf bytes.Buffer
	table := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenRows: tw.Off, BetweenColumns: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoFormat(tw.Off),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
		tablewriter.WithPadding(tw.Padding{Left: "", Right: "  ", Overwrite: true}),
		tablewriter.WithTrimSpace(tw.Off),
	)
	table.Header(names)
	for _, r := range t.rows {
		_ = table.Append(r) // a row of strings is always appended
	}
	_ = table.Render()
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		out.WriteString(t.indent)
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteString("\n")
	}
	return out.String()
}
