package report

import (
	"io"
	"strconv"

	"github.com/slowstart/slowstart/internal/texttable"
)

// SummaryTableMaxRows bounds the rows a SummaryTable keeps: a capture of a
// million connections is summed up, not listed (--json, --jsonl and --csv
// list them all).
const SummaryTableMaxRows = 1000

// SummaryTable is the capture's connections one line each, as tshark's
// -z conv,tcp lists them, with what slowstart adds: the handshake's round
// trip, the round trips of the whole exchange and the initial window's
// reading. It keeps a line per connection as they are added (up to
// SummaryTableMaxRows), not the connections.
type SummaryTable struct {
	rows  [][]string
	total int
}

// NewSummaryTable starts an empty table.
func NewSummaryTable() *SummaryTable { return &SummaryTable{} }

// Add adds a connection's line.
func (t *SummaryTable) Add(c *Connection) {
	t.total++
	if len(t.rows) >= SummaryTableMaxRows {
		return
	}
	transport := "TCP"
	if c.Transport == TransportQUIC {
		transport = "QUIC"
	}
	rtt := "-"
	if c.HandshakeRTTMs != nil {
		rtt = strconv.FormatFloat(*c.HandshakeRTTMs, 'f', 1, 64)
	}
	t.rows = append(t.rows, []string{strconv.Itoa(c.Index), transport, c.Client, c.Server,
		strconv.FormatInt(c.BytesToServer, 10), strconv.FormatInt(c.BytesToClient, 10), rtt,
		strconv.Itoa(c.RoundTrips.Total), iwCell(c), c.Closed})
}

// Write writes the table when it holds two connections or more (one is
// summed up by its own report), under a line that says what it is.
func (t *SummaryTable) Write(w io.Writer) error {
	if t.total < 2 {
		return nil
	}
	tb := texttable.New("  ", texttable.R("#"), texttable.L("transport"), texttable.L("client"), texttable.L("server"),
		texttable.R("bytes to server"), texttable.R("bytes to client"), texttable.R("handshake RTT ms"),
		texttable.R("round trips"), texttable.L("IW segments"), texttable.L("closed"))
	for _, r := range t.rows {
		tb.Row(r...)
	}
	ew := &ErrWriter{W: w}
	ew.Printf("Summary of the %s:\n%s", plural(t.total, "connection", "connections"), tb.String())
	if more := t.total - len(t.rows); more > 0 {
		ew.Printf("  … and %s more (--jsonl or --csv lists them all)\n", plural(more, "connection", "connections"))
	}
	ew.Printf("\n")
	return ew.Err
}

// iwCell is the connection's initial-window reading for the table (the
// projection watch, survey and compare use), its verdict when it has no number.
func iwCell(c *Connection) string {
	r := Summary(c).IW
	switch {
	case r.Verdict == "":
		return "-"
	case r.Segments == nil:
		return r.Verdict
	case r.Verdict == VerdictExact:
		return r.Text() + " exact"
	}
	return r.Text()
}
