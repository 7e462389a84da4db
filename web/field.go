package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/slowstart/slowstart/report"
)

// The field view: what a store of `slowstart field` holds, per client
// network, over time. Package field builds a FieldView from its store; the
// page draws a panel per network (the distribution of a quantity in each
// stretch of time, the marks of changes across them).

// FieldViewSchema names the field view's JSON.
const FieldViewSchema = "slowstart.field-view/v1"

// FieldSourceKind is the Report's source kind on a field view's page: the
// page shows the field panel instead of connections.
const FieldSourceKind = "field_store"

// FieldView is a field store's distributions over time, per network.
type FieldView struct {
	Schema string `json:"schema"` // FieldViewSchema
	// Store is the store's file.
	Store string `json:"store"`
	// FromUnixMs and ToUnixMs bound the period shown; BucketSeconds is the
	// stretch of time each bucket covers.
	FromUnixMs    int64   `json:"from_unix_ms"`
	ToUnixMs      int64   `json:"to_unix_ms"`
	BucketSeconds float64 `json:"bucket_seconds"`
	// Networks are all networks pooled first (Network ""), then the busiest.
	Networks        []FieldNetwork `json:"networks"`
	NetworksOmitted int            `json:"networks_omitted"`
	// Marks are the changes recorded in the period (tune apply and revert).
	Marks []FieldMark `json:"marks"`
}

// FieldNetwork is one network's buckets, oldest first (empty stretches left
// out).
type FieldNetwork struct {
	Network     string        `json:"network"`
	Connections uint64        `json:"connections"`
	Buckets     []FieldBucket `json:"buckets"`
}

// FieldBucket is one stretch of time of one network: its first responses'
// distributions.
type FieldBucket struct {
	StartUnixMs int64  `json:"start_unix_ms"`
	EndUnixMs   int64  `json:"end_unix_ms"`
	Connections uint64 `json:"connections"`
	// WindowLimited is the share of first responses whose round 1 a window
	// cut; CutShort those not seen to their end.
	WindowLimited float64 `json:"window_limited"`
	CutShort      uint64  `json:"cut_short"`
	// The quantiles of the handshake RTT, the round trips per first response,
	// round 1's bytes and the response time.
	HandshakeRTTMs FieldQuantiles `json:"handshake_rtt_ms"`
	RoundTrips     FieldQuantiles `json:"round_trips"`
	Round1Bytes    FieldQuantiles `json:"round1_bytes"`
	ResponseMs     FieldQuantiles `json:"response_ms"`
}

// FieldQuantiles are a quantity's 10th, 50th and 90th percentiles and mean in
// a bucket (from its histogram); null without a value.
type FieldQuantiles struct {
	P10    *float64 `json:"p10"`
	Median *float64 `json:"median"`
	P90    *float64 `json:"p90"`
	Mean   *float64 `json:"mean"`
}

// FieldMark is a change at a time, for people.
type FieldMark struct {
	UnixMs int64  `json:"unix_ms"`
	Text   string `json:"text"`
}

// fieldReport is the Report a field view's page loads first: no connections,
// its source saying the page is a field view.
func fieldReport(v *FieldView) *report.Report {
	return &report.Report{Schema: report.Schema, Tool: "slowstart field", Source: report.Source{Kind: FieldSourceKind, Path: v.Store},
		Connections: []report.Connection{}, Warnings: []string{}}
}

func marshalField(v *FieldView) ([]byte, error) {
	if v == nil {
		return nil, errors.New("web: no field view to show")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("web: encoding the field view: %w", err)
	}
	return b, nil
}

// NewFieldHandler serves the field view as NewHandler serves a Report, with
// the view at "/api/field".
func NewFieldHandler(v *FieldView, opts HandlerOptions) (http.Handler, error) {
	data, err := marshalField(v)
	if err != nil {
		return nil, err
	}
	mux, err := newMux(fieldReport(v), nil)
	if err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /api/field", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(data)
	})
	return secure(mux, opts), nil
}

// WriteFieldHTML writes the field view as one self-contained HTML file, as
// WriteHTML does a Report's.
func WriteFieldHTML(w io.Writer, v *FieldView) error {
	data, err := marshalField(v)
	if err != nil {
		return err
	}
	return writeHTML(w, fieldReport(v), nil, inlineData{id: "slowstart-field", data: data})
}
