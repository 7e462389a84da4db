package survey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// columnKind is how a column's values are written and read back.
type columnKind int

const (
	kindInt  columnKind = iota // an integer; empty/NULL when unknown
	kindReal                   // a number
	kindText                   // a string
	kindList                   // a list of words, space-separated
)

// column is one column of the CSV and SQLite forms of a row: named after the
// row's JSON key, so that the three forms say the same thing in the same words.
type column struct {
	name string
	kind columnKind
}

// columns are the row's columns, in order.
var columns = []column{
	{"index", kindInt}, {"line", kindInt}, {"label", kindText}, {"url", kindText},
	{"vantage", kindText}, {"shard", kindText}, {"address", kindText},
	{"exact_phase", kindText}, {"exact_verdict", kindText}, {"exact_iw_segments", kindInt}, {"exact_iw_bytes", kindInt},
	{"exact_mss", kindInt}, {"exact_retry", kindText}, {"exact_outcomes", kindList}, {"exact_reason", kindText},
	{"passive_verdict", kindText}, {"passive_iw_segments", kindInt}, {"passive_iw_segments_max", kindInt}, {"passive_iw_exact_if", kindText},
	{"first_round_bytes", kindInt}, {"tls_flight_bytes", kindInt}, {"tls_round_trips", kindInt}, {"round_trips", kindInt},
	{"handshake_rtt_ms", kindReal}, {"mss", kindInt}, {"status", kindInt}, {"protocol", kindText}, {"body_bytes", kindInt},
	{"last_byte_ms", kindReal}, {"final_url", kindText},
	{"duration_ms", kindReal}, {"finished_at", kindText},
	{"error_kind", kindText}, {"exact_error", kindText}, {"passive_error", kindText}, {"error", kindText},
}

// vantageColumn is the index of "vantage" in columns.
const vantageColumn = 4

// CSVHeader returns the names of the CSV columns.
func CSVHeader() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return names
}

// rowValues returns the row's values by column: nil where unknown, int64,
// float64, string.
func rowValues(r *Row) ([]any, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	out := make([]any, len(columns))
	for i, c := range columns {
		v, ok := m[c.name]
		if !ok || v == nil {
			continue
		}
		switch c.kind {
		case kindInt:
			n, err := v.(json.Number).Int64()
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.name, err)
			}
			out[i] = n
		case kindReal:
			f, err := v.(json.Number).Float64()
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.name, err)
			}
			out[i] = f
		case kindText:
			out[i] = v.(string)
		case kindList:
			var words []string
			for _, w := range v.([]any) {
				words = append(words, w.(string))
			}
			out[i] = strings.Join(words, " ")
		}
	}
	return out, nil
}

// rowFromValues is rowValues' inverse: values by column (nil, int64, float64,
// string, []byte) back into a row.
func rowFromValues(values []any) (Row, error) {
	m := map[string]any{}
	for i, c := range columns {
		v := values[i]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		if v == nil {
			continue
		}
		switch c.kind {
		case kindList:
			s, _ := v.(string)
			if s != "" {
				m[c.name] = strings.Fields(s)
			}
		case kindText:
			s, ok := v.(string)
			if !ok {
				return Row{}, fmt.Errorf("column %s: %v is not text", c.name, v)
			}
			if s != "" {
				m[c.name] = s
			}
		default:
			m[c.name] = v
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return Row{}, err
	}
	var r Row
	if err := json.Unmarshal(data, &r); err != nil {
		return Row{}, err
	}
	return r, nil
}

// cellText writes a value as a CSV cell.
func cellText(c column, v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		if c.name == "duration_ms" {
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// cellValue reads a CSV cell back as a value of its column.
func cellValue(c column, cell string) (any, error) {
	if cell == "" {
		return nil, nil
	}
	switch c.kind {
	case kindInt:
		n, err := strconv.ParseInt(cell, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not an integer", c.name, cell)
		}
		return n, nil
	case kindReal:
		f, err := strconv.ParseFloat(cell, 64)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not a number", c.name, cell)
		}
		return f, nil
	}
	return cell, nil
}
