// Package pageload puts a browser's page load on the connections of a capture of
// it: every request a browser made (from the DevTools protocol, or from a HAR) is
// matched to the TCP connection that carried it and to the rounds its response
// arrived in, every connection is summed up (host, TLS, ALPN, handshake, initial
// window, rounds), and the page's critical path to its first render is counted in
// round trips and milliseconds, with what would have saved them.
//
// It reads a Report (package analysis made it, with the TLS decrypted when the
// key log was given) and a list of requests; it captures nothing, drives no
// browser (package browser does) and reads no HAR files (package har does).
package pageload

import (
	"net/netip"

	"github.com/slowstart/slowstart/report"
)

// Schema names the JSON form of a page load (docs/schemas/pageload.json).
const Schema = "slowstart.pageload/v1"

// Sources of the requests.
const (
	SourceChromium = "chromium" // the DevTools protocol of a browser slowstart drove
	SourceHAR      = "har"      // a HAR file
)

// Render-blocking behaviours, as Chromium names them (DevTools'
// renderBlockingBehavior, a HAR's _renderBlocking), in snake case.
const (
	RenderBlocking         = "blocking"                // the first render waits for it
	RenderInBodyParser     = "in_body_parser_blocking" // a script in the body: blocks the parser
	RenderPotentially      = "potentially_blocking"    // may block (an async script, a font)
	RenderNonBlocking      = "non_blocking"
	RenderNonBlockingDynam = "non_blocking_dynamic"
)

// Resource types (DevTools' and HAR's _resourceType, in lower case).
const (
	TypeDocument   = "document"
	TypeStylesheet = "stylesheet"
	TypeScript     = "script"
	TypeFont       = "font"
	TypeImage      = "image"
)

// Request is what a browser says of one request: the input of Build. Times are
// Unix nanoseconds on the browser's clock; 0 when unknown.
type Request struct {
	ID           string
	URL          string
	Method       string
	Type         string // TypeDocument, TypeStylesheet, ... ("" unknown)
	Status       int
	MimeType     string
	Protocol     string // "h2", "http/1.1", "h3", as the browser says
	RemoteAddr   string // the server's ip:port; "" when unknown
	ConnectionID string // the browser's own id of the connection; "" when unknown
	// InitiatorURL is the document, stylesheet or script that named the request;
	// InitiatorType how ("parser", "script", "other", ...).
	InitiatorURL  string
	InitiatorType string
	// RenderBlocking is one of the Render* constants, "" when unknown.
	RenderBlocking string
	Priority       string
	FromCache      bool   // served from a cache: nothing on the network
	Failed         string // why the request failed, if it did
	// RedirectTo is the Location of a redirect answer: the next hop, which is a
	// request of its own.
	RedirectTo string

	StartNs        int64 // the browser issued the request (DevTools requestWillBeSent)
	ConnectStartNs int64 // a new connection began (its SYN); 0 on a reused one
	ConnectEndNs   int64 // that connection was ready (after TLS)
	SentNs         int64 // the request was sent
	FirstByteNs    int64 // the response's first bytes arrived
	LastByteNs     int64 // the response was complete
	EncodedBytes   int64 // bytes received, headers and body as they travelled
}

// MaxRequests is the most requests of one page Build places (a HAR's page
// with more is refused by package har): a page of the HTTP Archive's largest
// makes a few thousand. Placing them is then bounded in time whatever the
// capture holds.
const MaxRequests = 20000

// Input is a page load as a browser saw it.
type Input struct {
	URL      string
	Source   string // SourceChromium or SourceHAR
	Browser  string // the browser's name and version
	Requests []Request
	Timings  Timings
	// ClockOffsetNs is added to the browser's times to put them on the capture's
	// clock (0 when both come from the same machine).
	ClockOffsetNs int64
	// LeftOut counts the capture's connections left out of the Report before
	// Build saw them, for going to servers no request named (see Servers); the
	// page's warning of connections left out counts them.
	LeftOut int
}

// Servers returns the servers the requests name (their RemoteAddr), and
// whether every request that went to the network names one: then a connection
// to any other server cannot carry a request of the page, and a reader of a
// large capture may leave it out before Build.
func (in *Input) Servers() (servers map[netip.AddrPort]bool, all bool) {
	servers = map[netip.AddrPort]bool{}
	all = true
	for _, r := range in.Requests {
		if r.FromCache {
			continue
		}
		a, ok := parseAddrPort(r.RemoteAddr)
		if !ok {
			all = false
			continue
		}
		servers[a] = true
	}
	return servers, all
}

// ServerOf reads a Report connection's server as Servers names it.
func ServerOf(c *report.Connection) (netip.AddrPort, bool) { return parseAddrPort(c.Server) }

// Timings are the page's own events, Unix nanoseconds on the browser's clock (0
// when unknown).
type Timings struct {
	NavigationStartNs      int64
	FirstPaintNs           int64
	FirstContentfulPaintNs int64
	DOMContentLoadedNs     int64
	LoadNs                 int64
}

// Page is a page load on its connections (the JSON form, Schema). Times ending in
// _ms count from the start of the navigation.
type Page struct {
	Schema  string `json:"schema"`
	URL     string `json:"url"`
	Source  string `json:"source"`
	Browser string `json:"browser,omitempty"`
	// StartUnixNs is the navigation's start (the page's time 0), on the capture's
	// clock; CaptureStartMs is where the Report's time 0 (its first packet) lies on
	// the page's time axis.
	StartUnixNs    int64   `json:"start_unix_ns"`
	CaptureStartMs float64 `json:"capture_start_ms"`

	FirstPaintMs           *float64 `json:"first_paint_ms"`
	FirstContentfulPaintMs *float64 `json:"first_contentful_paint_ms"`
	DOMContentLoadedMs     *float64 `json:"dom_content_loaded_ms"`
	LoadMs                 *float64 `json:"load_ms"`

	Requests     []PageRequest    `json:"requests"`
	Connections  []PageConnection `json:"connections"`
	CriticalPath CriticalPath     `json:"critical_path"`
	Agreement    Agreement        `json:"timing_agreement"`
	Warnings     []string         `json:"warnings"`
	// Report holds the connections of the page load, with their rounds and HTTP
	// messages (docs/report.md).
	Report *report.Report `json:"report"`
}

// PageRequest is one request of the page on its connection.
type PageRequest struct {
	Index       int    `json:"index"` // 1-based, in the order the browser issued them
	URL         string `json:"url"`
	Method      string `json:"method"`
	Host        string `json:"host"` // the URL's host[:port]
	Path        string `json:"path"` // path and query
	Type        string `json:"type"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
	// RenderBlocking is what the browser said (Render* constants; "" unknown);
	// Blocking says the first render waited for it (see docs/browser.md), Critical
	// that it is on the critical path.
	RenderBlocking string `json:"render_blocking"`
	Blocking       bool   `json:"blocking"`
	Critical       bool   `json:"critical"`
	// Initiator is the index of the request that named this one (0: none known).
	Initiator int `json:"initiator"`
	// Connection is the index of its connection in the Report (0: not found in the
	// capture), NewConnection that the connection was opened for it (its first
	// request), Message the index of its HTTP message on the connection (0-based;
	// -1 when not decrypted).
	Connection    int    `json:"connection"`
	NewConnection bool   `json:"new_connection"`
	Message       int    `json:"message"`
	Stream        uint32 `json:"stream,omitempty"`
	// Rounds are the connection's rounds its response arrived in (from the
	// decrypted records; by time when the capture could not be decrypted).
	Rounds []int `json:"rounds"`
	// Bytes is the response on the wire (HTTP headers and body) as the capture saw
	// it, else as the browser counted it.
	Bytes int64 `json:"bytes"`
	// StartMs is when the browser issued the request; RequestMs, FirstByteMs and
	// LastByteMs are from the capture (null when not matched).
	StartMs     float64  `json:"start_ms"`
	RequestMs   *float64 `json:"request_ms"`
	FirstByteMs *float64 `json:"first_byte_ms"`
	LastByteMs  *float64 `json:"last_byte_ms"`
	// Browser holds the browser's own timings of the request.
	Browser BrowserTiming `json:"browser"`
	Notes   []string      `json:"notes"`
}

// BrowserTiming is what the browser measured of one request.
type BrowserTiming struct {
	// ConnectStartMs and ConnectEndMs are the connection the browser opened for
	// the request (null on a reused one).
	ConnectStartMs *float64 `json:"connect_start_ms"`
	ConnectEndMs   *float64 `json:"connect_end_ms"`
	RequestMs      *float64 `json:"request_ms"`
	FirstByteMs    *float64 `json:"first_byte_ms"`
	LastByteMs     *float64 `json:"last_byte_ms"`
	ConnectionID   string   `json:"connection_id,omitempty"`
	Remote         string   `json:"remote,omitempty"`
	Bytes          int64    `json:"bytes"`
	Priority       string   `json:"priority,omitempty"`
	FromCache      bool     `json:"from_cache,omitempty"`
	Failed         string   `json:"failed,omitempty"`
}

// PageConnection sums up one connection of the page load.
type PageConnection struct {
	Connection int     `json:"connection"` // index in the Report
	Host       string  `json:"host"`       // the host name of its requests
	Server     string  `json:"server"`
	Client     string  `json:"client"`
	StartMs    float64 `json:"start_ms"`
	// TLSVersion is "" over cleartext; ALPN the protocol its requests used ("h2",
	// "http/1.1").
	TLSVersion     string   `json:"tls_version"`
	ALPN           string   `json:"alpn"`
	HandshakeRTTMs *float64 `json:"handshake_rtt_ms"`
	TLSRoundTrips  int      `json:"tls_round_trips"`
	// InitialWindow is the Report's verdict on the server's initial window.
	InitialWindow *report.InitialWindow `json:"initial_window"`
	Rounds        int                   `json:"rounds"`
	RoundTrips    report.RoundTrips     `json:"round_trips"`
	Requests      []int                 `json:"requests"` // indexes of its requests
}

// CriticalPath is the chain of requests the first render waited for.
type CriticalPath struct {
	// RoundTrips counts the round trips along the chain (handshakes waited for and
	// rounds of the responses); Ms is from the navigation's start to the last byte
	// of its last request.
	RoundTrips int     `json:"round_trips"`
	Ms         float64 `json:"ms"`
	// RTTMs is the document's connection's handshake RTT, for scale.
	RTTMs   float64  `json:"rtt_ms"`
	Steps   []Step   `json:"steps"`
	Savings []Saving `json:"savings"`
	Notes   []string `json:"notes"`
	// Predicted is what package model predicts for the page, when its structure
	// is known (the lab's test page); absent otherwise.
	Predicted *Prediction `json:"predicted,omitempty"`
}

// Prediction is the model's critical path for a page (model.PageLoad): its round
// trips, the fewest and most with every response a little smaller and larger (a
// range where the page sits on a round's boundary), and its time.
type Prediction struct {
	RoundTrips int     `json:"round_trips"`
	Min        int     `json:"min"`
	Max        int     `json:"max"`
	Ms         float64 `json:"ms"`
}

// Step is one request of the critical path and the round trips it added.
type Step struct {
	Request    int    `json:"request"`
	Connection int    `json:"connection"`
	Why        string `json:"why"` // e.g. "the document", "render-blocking stylesheet"
	// HandshakeRoundTrips are the TCP and TLS round trips of a connection opened
	// for it that the chain waited for; DataRoundTrips the rounds of its response
	// it waited for (Partial: only those before the next step was requested, the
	// rest arriving while the chain went on elsewhere).
	HandshakeRoundTrips int     `json:"handshake_round_trips"`
	DataRoundTrips      int     `json:"data_round_trips"`
	RoundTrips          int     `json:"round_trips"`
	FirstRound          int     `json:"first_round"`
	LastRound           int     `json:"last_round"`
	Partial             bool    `json:"partial"`
	StartMs             float64 `json:"start_ms"`
	EndMs               float64 `json:"end_ms"`
	// BrowserMs is how long after what it waited for had arrived the browser
	// asked for it: parsing, running scripts, a busy CPU (0 for the first step).
	BrowserMs float64 `json:"browser_ms"`
}

// Saving is a change that would have shortened the critical path.
type Saving struct {
	Kind           string  `json:"kind"` // SavingInitialWindow, ...
	Request        int     `json:"request"`
	Text           string  `json:"text"`
	CostRoundTrips int     `json:"cost_round_trips"`
	CostMs         float64 `json:"cost_ms"`
}

// Saving kinds.
const (
	SavingInitialWindow    = "initial_window"    // a larger IW on that host
	SavingCertificateChain = "certificate_chain" // the TLS flight did not fit in the IW
	SavingPreconnect       = "preconnect"        // open the connection before the request
	SavingChain            = "chain"             // request it earlier (preload): a shorter chain
	SavingInline           = "inline"            // put it in the document
)

// Agreement compares the browser's timings with the capture's.
type Agreement struct {
	// Compared counts the timings compared (request sent, first and last byte of
	// each request matched on both sides); MaxDiffMs is the largest difference.
	Compared    int            `json:"compared"`
	MaxDiffMs   float64        `json:"max_diff_ms"`
	ToleranceMs float64        `json:"tolerance_ms"`
	Agree       bool           `json:"agree"`
	Differences []Disagreement `json:"differences"`
}

// Disagreement is a timing on which the browser and the capture differ by more
// than the tolerance.
type Disagreement struct {
	Request   int     `json:"request"`
	What      string  `json:"what"` // "request", "first_byte" or "last_byte"
	BrowserMs float64 `json:"browser_ms"`
	CaptureMs float64 `json:"capture_ms"`
}

// AgreementToleranceMs is how far the browser's and the capture's times of the
// same event may lie apart: the browser stamps an event when its network code sees
// it, a little after the kernel (whose stamps the capture holds) received it.
const AgreementToleranceMs = 5.0
