// Package har reads and writes HTTP Archive (HAR 1.2) files: the JSON format in
// which browsers' developer tools and WebPageTest export a page load. It writes a
// page load of package pageload as a standard HAR whose entries carry extension
// fields (underscore-prefixed, so HAR viewers still open it) with the connection
// and the rounds of each request, and it reads the HARs of Chrome, Firefox and
// WebPageTest (with their extensions where present) into the requests package
// pageload places on a capture's connections.
//
// It parses no capture and computes nothing of the page itself.
package har

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Version is the HAR version written.
const Version = "1.2"

// HAR is a HAR file.
type HAR struct {
	Log Log `json:"log"`
}

// Log is the HAR's only top-level object.
type Log struct {
	Version string   `json:"version"`
	Creator Creator  `json:"creator"`
	Browser *Creator `json:"browser,omitempty"`
	Pages   []Page   `json:"pages,omitempty"`
	Entries []Entry  `json:"entries"`
	Comment string   `json:"comment,omitempty"`
}

// Creator names the program that wrote the HAR (or the browser).
type Creator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Comment string `json:"comment,omitempty"`
}

// Page is one page of the HAR.
type Page struct {
	StartedDateTime string      `json:"startedDateTime"`
	ID              string      `json:"id"`
	Title           string      `json:"title"`
	PageTimings     PageTimings `json:"pageTimings"`
	Comment         string      `json:"comment,omitempty"`
	// Extensions: WebPageTest's first contentful paint (ms from the page's start),
	// and slowstart's critical path.
	FirstContentfulPaint *float64      `json:"_firstContentfulPaint,omitempty"`
	FirstPaint           *float64      `json:"_firstPaint,omitempty"`
	CriticalPath         *CriticalPath `json:"_criticalPath,omitempty"`
}

// PageTimings are ms from the page's start; -1 when not known.
type PageTimings struct {
	OnContentLoad float64 `json:"onContentLoad"`
	OnLoad        float64 `json:"onLoad"`
}

// CriticalPath is slowstart's extension on a page: the critical path to the first
// render (docs/browser.md).
type CriticalPath struct {
	RoundTrips int     `json:"round_trips"`
	Ms         float64 `json:"ms"`
	Requests   []int   `json:"requests"` // entry indexes (0-based) along the path
}

// Entry is one request.
type Entry struct {
	Pageref         string   `json:"pageref,omitempty"`
	StartedDateTime string   `json:"startedDateTime"`
	Time            float64  `json:"time"`
	Request         Request  `json:"request"`
	Response        Response `json:"response"`
	Cache           struct{} `json:"cache"`
	Timings         Timings  `json:"timings"`
	ServerIPAddress string   `json:"serverIPAddress,omitempty"`
	Connection      string   `json:"connection,omitempty"`
	Comment         string   `json:"comment,omitempty"`

	// Extensions of Chrome's HAR export.
	Initiator    json.RawMessage `json:"_initiator,omitempty"` // Chrome: {"type","url",...}; WebPageTest: a URL
	ResourceType string          `json:"_resourceType,omitempty"`
	Priority     string          `json:"_priority,omitempty"`
	FromCache    string          `json:"_fromCache,omitempty"`
	// Extensions of WebPageTest's.
	RenderBlocking string `json:"_renderBlocking,omitempty"`
	RequestType    string `json:"_request_type,omitempty"`
	// Extensions of slowstart's: the TCP connection of the capture that carried
	// the request, the rounds its response arrived in, whether the first render
	// waited for it and whether it is on the critical path, and the capture's
	// times of it (ms from the page's start).
	SlowstartConnection *Connection  `json:"_connection,omitempty"`
	Rounds              []int        `json:"_rounds,omitempty"`
	Blocking            *bool        `json:"_blocking,omitempty"`
	Critical            *bool        `json:"_critical,omitempty"`
	Capture             *CaptureTime `json:"_capture,omitempty"`
}

// Connection is slowstart's description of an entry's TCP connection.
type Connection struct {
	Index          int      `json:"index"` // the connection's index in slowstart's Report
	Client         string   `json:"client"`
	Server         string   `json:"server"`
	New            bool     `json:"new"` // opened for this request
	TLSVersion     string   `json:"tls_version,omitempty"`
	ALPN           string   `json:"alpn,omitempty"`
	HandshakeRTTMs *float64 `json:"handshake_rtt_ms,omitempty"`
	InitialWindow  string   `json:"initial_window,omitempty"`
}

// CaptureTime holds the capture's times of a request, ms from the page's start.
type CaptureTime struct {
	RequestMs   *float64 `json:"request_ms"`
	FirstByteMs *float64 `json:"first_byte_ms"`
	LastByteMs  *float64 `json:"last_byte_ms"`
	Bytes       int64    `json:"bytes"`
}

// Request is an entry's request.
type Request struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []NameValue `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	QueryString []NameValue `json:"queryString"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
}

// Response is an entry's response.
type Response struct {
	Status      int         `json:"status"`
	StatusText  string      `json:"statusText"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []NameValue `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	Content     Content     `json:"content"`
	RedirectURL string      `json:"redirectURL"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
	// TransferSize is Chrome's extension: bytes received, headers and body.
	TransferSize *int64 `json:"_transferSize,omitempty"`
}

// Content describes a response's body.
type Content struct {
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
}

// NameValue is a header, cookie or query parameter.
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Timings are the phases of an entry in ms; -1 for a phase that did not happen
// (blocked, dns, connect and ssl; ssl is included in connect).
type Timings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
}

// timeFormat is ISO 8601 with milliseconds (and more digits when known), as HAR
// writers give startedDateTime.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// formatTime writes a Unix time in ns as a HAR date.
func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(timeFormat) }

// parseTime reads a HAR date.
func parseTime(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("date %q is not ISO 8601: %w", s, err)
	}
	return t.UnixNano(), nil
}

// Write writes the HAR as indented JSON.
func Write(w io.Writer, h *HAR) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(h)
}

// Read decodes a HAR file (a UTF-8 byte order mark, as some tools write, is
// skipped).
func Read(r io.Reader) (*HAR, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("more than %d MiB: too large for the HAR of one page load (save it without the responses' content)", MaxFileBytes>>20)
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var h HAR
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("not a HAR file (JSON with a log object): %w", err)
	}
	if h.Log.Version == "" && len(h.Log.Entries) == 0 {
		return nil, fmt.Errorf("not a HAR file: no log.version and no entries")
	}
	return &h, nil
}

// MaxFileBytes is the largest HAR Read reads: a page's HAR is a few MB, tens
// with the responses' content saved in it.
const MaxFileBytes = 128 << 20

// ReadFile reads a HAR file from disk.
func ReadFile(path string) (*HAR, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
