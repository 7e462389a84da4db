package survey

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/slowstart/slowstart/internal/textsafe"
	"github.com/slowstart/slowstart/probe/exact"
	"github.com/slowstart/slowstart/report"
)

// WriteCSV writes a header and one line per row (RFC 4180). Unknown values are
// empty cells; sizes are bytes, times milliseconds. The columns are those of
// CSVHeader, named after the JSON keys.
func WriteCSV(w io.Writer, res *Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader()); err != nil {
		return err
	}
	record := make([]string, len(columns))
	for i := range res.Rows {
		values, err := rowValues(&res.Rows[i])
		if err != nil {
			return err
		}
		for j, c := range columns {
			record[j] = cellText(c, values[j])
		}
		if err := cw.Write(record); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the Result as one indented JSON document (schema
// slowstart.survey/v1).
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// WriteText writes the rows as a table for people, then a line that sums up.
func WriteText(w io.Writer, res *Result) error {
	ew := &report.ErrWriter{W: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	var head []string
	head = append(head, "LABEL", "URL")
	if res.Settings.Exact {
		head = append(head, "IW (EXACT)", "IW BYTES", "VERDICT")
	}
	if res.Settings.Passive {
		head = append(head, "IW (PAGE LOAD)", "FIRST ROUND", "TLS FLIGHT", "ROUND TRIPS", "HANDSHAKE RTT")
	}
	head = append(head, "ERROR")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i := range res.Rows {
		r := &res.Rows[i]
		// The list and the servers wrote these: no control character reaches the terminal.
		cells := []string{dash(textsafe.Escape(r.Label)), textsafe.Escape(r.URL)}
		if res.Settings.Exact {
			cells = append(cells, exactIWText(r), bytesText(r.ExactIWBytes), dash(r.ExactVerdict))
		}
		if res.Settings.Passive {
			cells = append(cells, passiveIWText(r), sizeText(r.FirstRoundBytes), sizeText(r.TLSFlightBytes),
				roundTripsText(r), msText(r.HandshakeRTTMs))
		}
		cells = append(cells, textsafe.Escape(r.Error))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil && ew.Err == nil {
		ew.Err = err
	}
	if res.Settings.Exact {
		ew.Printf("\nIW (EXACT): the server's initial window in segments, counted on the TLS server flight over https and on\n"+
			"the response over http, with a %d-byte MSS announced and no ACKs (IW BYTES at that MSS); ≥: a lower bound.\n", res.Settings.MSS)
	}
	if res.Settings.Passive {
		if !res.Settings.Exact {
			ew.Printf("\n")
		}
		ew.Printf("IW (PAGE LOAD): the same window as a normal page load shows it; FIRST ROUND: the response's first round;\n" +
			"ROUND TRIPS: TCP + TLS + data rounds of the page load (TLS round trips in brackets).\n")
	}
	measured := len(res.Rows)
	switch {
	case res.Interrupted:
		ew.Printf("Interrupted: %d of %d URLs measured, %d with errors.\n", measured, res.Total, res.Failed)
	case res.Failed > 0:
		ew.Printf("%d URLs measured, %d with errors.\n", measured, res.Failed)
	default:
		ew.Printf("%d URLs measured.\n", measured)
	}
	return ew.Err
}

func exactIWText(r *Row) string {
	if r.ExactIWSegments == nil {
		return "-"
	}
	if r.ExactVerdict == exact.VerdictExact {
		return strconv.Itoa(*r.ExactIWSegments)
	}
	return "≥ " + strconv.Itoa(*r.ExactIWSegments)
}

// passiveIWText is the page load's reading as report.IWReading writes it (a range
// shows both ends, never one alone); the verdict when it gives no number.
func passiveIWText(r *Row) string {
	reading := report.IWReading{Verdict: r.PassiveVerdict, Segments: r.PassiveIWSegments, SegmentsMax: r.PassiveIWSegmentsMax}
	if text := reading.Text(); text != "" {
		return text
	}
	return dash(r.PassiveVerdict)
}

func roundTripsText(r *Row) string {
	if r.RoundTrips == nil {
		return "-"
	}
	if r.TLSRoundTrips != nil && *r.TLSRoundTrips > 0 {
		return fmt.Sprintf("%d (%d)", *r.RoundTrips, *r.TLSRoundTrips)
	}
	return strconv.Itoa(*r.RoundTrips)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func bytesText(n *int) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprintf("%d B", *n)
}

func sizeText(n *int) string {
	if n == nil {
		return "-"
	}
	return report.Size(int64(*n))
}

func msText(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", *v)
}

func optInt(n *int) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(*n)
}
