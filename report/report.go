// Package report defines the Report, the versioned JSON contract between the
// analysis and everything that shows it (text, JSON, HTML, the web UI, plots).
// It holds data and renderers only: no packet parsing and no analysis.
package report

// Schema names this version of the Report JSON. Bump it on incompatible changes.
const Schema = "slowstart.report/v1"

// Vantage points.
const (
	VantageClient  = "client"
	VantageServer  = "server"
	VantageUnknown = "unknown"
)

// Round limits: why a round ended.
const (
	LimitCwnd = "cwnd" // the sender stopped with data left and room in the receive window
	LimitRwnd = "rwnd" // bytes in flight reached the client's advertised window
	LimitApp  = "app"  // the sender had nothing more to send yet
	LimitLoss = "loss" // a retransmission happened in the round
	LimitEnd  = "end"  // the response (or the connection's data) finished
	// LimitRate: at the client, the data arrived as one stream at the path's rate,
	// with no idle gap at the round's end: the window's edge is not visible.
	LimitRate = "rate"
	// LimitIncomplete: the last round of a transfer that stopped before its message
	// was complete (the server stalled, or the capture ended).
	LimitIncomplete = "incomplete"
)

// Initial window verdicts.
const (
	VerdictExact       = "exact"        // round 1 was limited by the congestion window
	VerdictLowerBound  = "lower_bound"  // the data ended inside round 1: the IW is at least this
	VerdictRwndLimited = "rwnd_limited" // the receive window capped round 1
	VerdictAmbiguous   = "ambiguous"    // loss, reordering or a capture hole in round 1
	// VerdictRange: the IW lies between segments and segments_max; which end holds
	// depends on what the packets cannot show (e.g. the sender's congestion control).
	VerdictRange = "range"
	VerdictNone  = "none" // no data from the server to judge by
)

// Round phases.
const (
	PhaseTLS  = "tls"  // the server's TLS handshake flight
	PhaseHTTP = "http" // an HTTP response (cleartext or mapped onto TLS records)
	PhaseData = "data" // server data of unknown kind
)

// Report is the result of analyzing one capture or one probe.
type Report struct {
	Schema      string       `json:"schema"`
	Tool        string       `json:"tool"`
	Source      Source       `json:"source"`
	Connections []Connection `json:"connections"`
	Warnings    []string     `json:"warnings"`
	// Runs summarizes repeated probes of one URL (probe --runs N); absent elsewhere.
	Runs *RunSummary `json:"runs,omitempty"`
}

// Source describes where the packets came from.
type Source struct {
	Kind string `json:"kind"` // "file", "live" or "lab"
	Path string `json:"path,omitempty"`
	// Paths lists the files when several were read as one capture (merged in time
	// order); Path is then the first.
	Paths       []string `json:"paths,omitempty"`
	Format      string   `json:"format,omitempty"`     // "pcap" or "pcapng"
	LinkTypes   []string `json:"link_types,omitempty"` // e.g. "Ethernet", "Raw"
	Packets     int64    `json:"packets"`              // records read
	TCPPackets  int64    `json:"tcp_packets"`          // records decoded as TCP
	Snaplen     int      `json:"snaplen,omitempty"`
	Truncated   bool     `json:"truncated"` // the file ended inside a record
	StartUnixNs int64    `json:"start_unix_ns"`
	DurationMs  float64  `json:"duration_ms"`
}

// Endpoint holds what one side announced in its SYN.
type Endpoint struct {
	MSS           int  `json:"mss"`          // 0 when not announced
	WindowScale   int  `json:"window_scale"` // -1 when not announced
	SACKPermitted bool `json:"sack_permitted"`
	Timestamps    bool `json:"timestamps"`
}

// ReceiveWindow summarizes the client's advertised receive window (scaled, bytes).
type ReceiveWindow struct {
	InitialBytes int `json:"initial_bytes"`
	MinBytes     int `json:"min_bytes"`
	MaxBytes     int `json:"max_bytes"`
}

// Connection is everything known of one TCP connection.
type Connection struct {
	Index          int           `json:"index"` // 1-based, in order of first packet
	Client         string        `json:"client"`
	Server         string        `json:"server"`
	Vantage        string        `json:"vantage"`
	StartMs        float64       `json:"start_ms"` // first packet, from the capture's start
	DurationMs     float64       `json:"duration_ms"`
	HandshakeRTTMs *float64      `json:"handshake_rtt_ms"` // null without a handshake
	MinRTTMs       float64       `json:"min_rtt_ms"`
	MSS            int           `json:"mss"` // effective sender MSS (bytes of payload per full segment)
	ClientSYN      Endpoint      `json:"client_syn"`
	ServerSYN      Endpoint      `json:"server_syn"`
	ClientWindow   ReceiveWindow `json:"client_window"`
	MidStream      bool          `json:"mid_stream"` // the capture started after the handshake
	Closed         string        `json:"closed"`     // "fin", "rst" or "open"
	BytesToServer  int64         `json:"bytes_to_server"`
	BytesToClient  int64         `json:"bytes_to_client"`
	// MissingBytesToServer and MissingBytesToClient are stream bytes below the
	// highest one seen that the capture never saw (capture loss, or bytes the other
	// side acknowledged that were not captured); not counted in bytes_to_*.
	MissingBytesToServer int64          `json:"missing_bytes_to_server"`
	MissingBytesToClient int64          `json:"missing_bytes_to_client"`
	Retransmission       int            `json:"retransmissions"`
	OutOfOrder           int            `json:"out_of_order"`
	TLS                  *TLS           `json:"tls"`
	InitialWindow        *InitialWindow `json:"initial_window"`
	RoundTrips           RoundTrips     `json:"round_trips"`
	RoundMethod          string         `json:"round_method"` // "ack_clock", "timestamps" or "gaps"
	Rounds               []Round        `json:"rounds"`
	HTTP                 []HTTPMessage  `json:"http"`
	Notes                []string       `json:"notes"`
	// Packets lists every packet of the connection, for timelines and
	// time-sequence graphs; present only when asked for (view, --packets).
	Packets []Packet `json:"packets,omitempty"`
	// PacketStride, when above 1, says packets lists one packet in that many: the
	// connection had more than the list's bound (its first packet, then every
	// PacketStride-th).
	PacketStride int `json:"packet_stride,omitempty"`
	// ClientTiming is what the client that opened the connection measured (probe
	// only); absent when the Report comes from a capture file.
	ClientTiming *ClientTiming `json:"client_timing,omitempty"`
	// Diagnoses are the round trips the connection could have saved, and why (probe).
	Diagnoses []Diagnosis `json:"diagnoses,omitempty"`

	// QUIC connections (see the QUIC block at the end of this file).
	Transport string `json:"transport,omitempty"` // "tcp" or "quic"; empty: tcp
	QUIC      *QUIC  `json:"quic,omitempty"`
}

// Packet is one packet of a connection, with sequence numbers as stream offsets.
type Packet struct {
	TimeMs float64 `json:"t_ms"` // from the connection's start, like the rounds
	Dir    string  `json:"dir"`  // "c2s" (client to server) or "s2c"
	Seq    int64   `json:"seq"`  // stream offset of the first payload byte
	Len    int     `json:"len"`  // payload bytes (true length, even if the snaplen cut them)
	// Ack is the cumulative acknowledgement as an offset into the other direction's
	// stream; -1 when the ACK flag is off.
	Ack   int64  `json:"ack"`
	Win   int    `json:"win"`   // advertised window, scaled, bytes
	Flags string `json:"flags"` // e.g. "S", "SA", "A", "PA", "FA", "R"
	Retx  bool   `json:"retx,omitempty"`
	OOO   bool   `json:"ooo,omitempty"`
	Round int    `json:"round,omitempty"` // server data: the round it belongs to
}

// RoundTrips counts the round trips of the connection by phase.
type RoundTrips struct {
	TCP   int `json:"tcp"`   // the handshake: 1, or 0 when not seen
	TLS   int `json:"tls"`   // TLS handshake round trips
	HTTP  int `json:"http"`  // data rounds of HTTP responses (after the request)
	Total int `json:"total"` // TCP + TLS + HTTP
}

// TLS describes the TLS handshake seen in the clear.
type TLS struct {
	Version              string         `json:"version"` // "1.0" .. "1.3", "" if unknown
	ServerFlightBytes    int            `json:"server_flight_bytes"`
	ServerFlightSegments int            `json:"server_flight_segments"`
	HandshakeRoundTrips  int            `json:"handshake_round_trips"`
	InitialWindow        *InitialWindow `json:"initial_window"` // the reading from the server flight
}

// InitialWindow is the server's initial congestion window as inferred.
type InitialWindow struct {
	Segments int `json:"segments"`
	Bytes    int `json:"bytes"`
	// SegmentsMax and BytesMax are the upper end of a range (verdict "range").
	SegmentsMax int    `json:"segments_max,omitempty"`
	BytesMax    int    `json:"bytes_max,omitempty"`
	Verdict     string `json:"verdict"`
	Source      string `json:"source"` // "http" (the first data flight) or "tls" (the server's handshake flight)
	Reason      string `json:"reason"` // a sentence for people
	// ExactIf, on a range, names the congestion control under which the IW would be
	// exactly segments_max: "linux_cubic_or_reno" (Linux's CUBIC and Reno grow no
	// window while at most half of it is in use; BBR, and other stacks' slow start
	// such as gVisor's, grow it on every acknowledgement). The packets do not show
	// which one the server runs.
	ExactIf string `json:"exact_if,omitempty"`
	// Evidence lists, for an exact reading (and what a range rests on), each proof
	// obligation (Obligation*) with the packets that prove it.
	Evidence []Proof `json:"evidence,omitempty"`
	// Unproven names the obligations the packets did not prove, the reason the
	// reading is not exact (the first is the one the reason explains); empty for
	// an exact reading.
	Unproven []string `json:"unproven,omitempty"`
}

// ExactIfLinuxCubicOrReno is InitialWindow.ExactIf for a range whose upper end is the
// window of a server running Linux's CUBIC or Reno.
const ExactIfLinuxCubicOrReno = "linux_cubic_or_reno"

// Proof is one obligation of an initial-window reading and the packets that prove it.
type Proof struct {
	Obligation string `json:"obligation"`
	Detail     string `json:"detail"`
}

// The proof obligations of an initial-window reading: a reading is exact only when
// the packets prove every one (docs/algorithms.md says how each is proven).
const (
	// ObligationStartSeen: the capture holds the connection's handshake and its
	// first round.
	ObligationStartSeen = "start_seen"
	// ObligationCompleteRound: no retransmission, reordering, loss or capture gap
	// in the round or right after it.
	ObligationCompleteRound = "complete_round"
	// ObligationRoundsSeparable: the method that split the rounds resolves the
	// path's round trip (the ACK clock or a fast enough timestamp clock, on a path
	// long enough to tell rounds apart).
	ObligationRoundsSeparable = "rounds_separable"
	// ObligationEndToEnd: the data's round trip agrees with the handshake's:
	// nothing near the capture (a split-TCP middlebox, a proxy) answered for the
	// server.
	ObligationEndToEnd = "end_to_end"
	// ObligationSegmentSize: the server's full segment size is known from the
	// client's MSS option and proven by the server's own frames.
	ObligationSegmentSize = "segment_size"
	// ObligationFullSegments: every frame of the round carried whole segments.
	ObligationFullSegments = "full_segments"
	// ObligationReleasedByAck: the next data left as soon as the round's first
	// acknowledgement reached the server: not later, not at the path's pace, not
	// answering new client data, not a timer's.
	ObligationReleasedByAck = "released_by_ack"
	// ObligationDataQueued: the server had a full segment or more to send at the
	// cut (a TLS record spans it, or the next round began with a full segment).
	ObligationDataQueued = "data_queued"
	// ObligationWindowFilled: the round went out in one stretch and the next grew
	// as slow start grows a full window.
	ObligationWindowFilled = "window_filled"
	// ObligationReceiveWindowRoom: the client's receive window had room for
	// another full segment at the cut.
	ObligationReceiveWindowRoom = "receive_window_room"
	// ObligationWindowUngrown: nothing acknowledged before the round could have
	// grown the window (a round after the TLS handshake).
	ObligationWindowUngrown = "window_ungrown"
)

// Round is one round trip of the server's sending.
type Round struct {
	Index     int     `json:"index"`    // 1-based
	StartMs   float64 `json:"start_ms"` // from the connection's start
	EndMs     float64 `json:"end_ms"`
	StartRTTs float64 `json:"start_rtts"` // start_ms in round trips (min RTT)
	Segments  int     `json:"segments"`   // ceil(bytes / mss)
	// LossProbeSegments of Segments were a tail loss probe the server sent after a
	// silence with nothing acknowledged, beyond the congestion window.
	LossProbeSegments int   `json:"loss_probe_segments,omitempty"`
	Bytes             int   `json:"bytes"` // new sequence bytes first sent in the round
	CumulativeBytes   int64 `json:"cumulative_bytes"`
	Packets           int   `json:"packets"` // captured frames (may differ from segments under GRO/TSO)
	Retransmissions   int   `json:"retransmissions"`
	// CaptureGaps counts places where the capture missed bytes of the round or right
	// after it (a gap in the sequence, bytes acknowledged but never captured): the
	// round's size is unknown.
	CaptureGaps        int    `json:"capture_gaps,omitempty"`
	InFlightBytes      int    `json:"in_flight_bytes"`      // unacknowledged bytes at the round's end
	ReceiveWindowBytes int    `json:"receive_window_bytes"` // client's window at the round's start
	WindowFull         bool   `json:"window_full"`
	Limit              string `json:"limit"`
	Phase              string `json:"phase"`
}

// HTTPMessage is one request and its response.
type HTTPMessage struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Authority is the request's Host header or HTTP/2 :authority; empty when
	// not captured.
	Authority string `json:"authority,omitempty"`
	// Protocol is "http/1.1" or "h2"; Stream the HTTP/2 stream (0 for HTTP/1.x);
	// Pushed a response the server pushed; EarlyData a request sent as TLS 1.3
	// 0-RTT data.
	Protocol  string `json:"protocol,omitempty"`
	Stream    uint32 `json:"stream,omitempty"`
	Pushed    bool   `json:"pushed,omitempty"`
	EarlyData bool   `json:"early_data,omitempty"`
	Status    int    `json:"status"` // 0 if no response was seen
	// ContentType is the response's Content-Type.
	ContentType string `json:"content_type,omitempty"`
	// Rounds are the indexes of the rounds the response's bytes arrived in (over
	// TLS, the rounds of the records that carried them).
	Rounds      []int    `json:"rounds,omitempty"`
	RequestMs   *float64 `json:"request_ms"`
	FirstByteMs *float64 `json:"first_byte_ms"`
	LastByteMs  *float64 `json:"last_byte_ms"`
	Bytes       int64    `json:"bytes"` // response bytes on the wire (headers and body)
	BodyBytes   int64    `json:"body_bytes"`
	Chunked     bool     `json:"chunked"`
	Incomplete  bool     `json:"incomplete"` // the capture or the snaplen cut what was needed
	// IncompleteReason says what was missing, when known.
	IncompleteReason string `json:"incomplete_reason,omitempty"`
}

// ClientTiming is what a probing client measured of one request over one
// connection, from its tracing hooks. Times ending in _at_ms count from the start
// of the request (before any DNS lookup), like curl's -w time_* variables;
// durations are the length of one step.
type ClientTiming struct {
	Run         int    `json:"run"` // 1-based repetition (probe --runs)
	Hop         int    `json:"hop"` // 1-based step in a redirect chain
	URL         string `json:"url"`
	Local       string `json:"local"`  // the client's ip:port, as the kernel gave it
	Remote      string `json:"remote"` // the server's ip:port
	StartUnixNs int64  `json:"start_unix_ns"`
	// DNSMs is the name lookup's duration; null when the host needed none (an IP
	// literal or --resolve).
	DNSMs           *float64 `json:"dns_ms"`
	ConnectMs       float64  `json:"connect_ms"`       // TCP handshake duration
	TLSMs           *float64 `json:"tls_ms"`           // TLS handshake duration; null over cleartext
	ConnectAtMs     float64  `json:"connect_at_ms"`    // TCP connected (curl: time_connect)
	TLSAtMs         *float64 `json:"tls_at_ms"`        // TLS done (curl: time_appconnect)
	RequestSentMs   float64  `json:"request_sent_ms"`  // request written to the socket
	FirstByteAtMs   float64  `json:"first_byte_at_ms"` // first response byte (curl: time_starttransfer)
	LastByteAtMs    float64  `json:"last_byte_at_ms"`  // last body byte (curl: time_total)
	Status          int      `json:"status"`
	Protocol        string   `json:"protocol"`              // "HTTP/1.1" or "HTTP/2"
	TLSVersion      string   `json:"tls_version,omitempty"` // "1.2", "1.3"
	ServerName      string   `json:"server_name,omitempty"` // SNI sent
	ChainBytes      int      `json:"certificate_chain_bytes,omitempty"`
	ContentType     string   `json:"content_type,omitempty"`
	ContentEncoding string   `json:"content_encoding,omitempty"` // e.g. "gzip", "br"; empty: none
	BodyBytes       int64    `json:"body_bytes"`                 // as received (compressed if it was)
	// ExpectedBodyBytes is the Content-Length the response announced (absent when
	// it announced none).
	ExpectedBodyBytes *int64 `json:"expected_body_bytes,omitempty"`
	// Incomplete says why the body ended before it was whole (the server stalled
	// until the timeout, the connection closed early); empty when it was whole.
	Incomplete string `json:"incomplete,omitempty"`
	Location   string `json:"location,omitempty"` // the redirect target, for 3xx answers
	// AltSvc is the response's Alt-Svc header (RFC 7838): where the server says the
	// same site is also served, e.g. h3=":443" for HTTP/3.
	AltSvc string `json:"alt_svc,omitempty"`
}

// Diagnosis is one thing that cost the connection round trips, with its cost.
type Diagnosis struct {
	Kind           string  `json:"kind"` // e.g. "certificate_chain", "initial_window", "redirect"
	Text           string  `json:"text"` // a sentence for people
	CostRoundTrips int     `json:"cost_round_trips"`
	CostMs         float64 `json:"cost_ms"`
}

// RunSummary sums up repeated probes of the same URL over fresh connections.
type RunSummary struct {
	Runs int `json:"runs"`
	// IW readings (segments) of the final hop's connection, one per run; 0 when a
	// run gave none.
	IWSegments     []int    `json:"iw_segments"`
	IWVerdicts     []string `json:"iw_verdicts"`
	IWMin          int      `json:"iw_min"`
	IWMedian       float64  `json:"iw_median"`
	IWMode         int      `json:"iw_mode"`
	IWSpread       int      `json:"iw_spread"` // max - min
	HandshakeRTTMs Spread   `json:"handshake_rtt_ms"`
	FirstByteMs    Spread   `json:"first_byte_ms"`
	LastByteMs     Spread   `json:"last_byte_ms"`
	// Growing: the window grew from run to run, as when the server caches route
	// metrics (net.ipv4.tcp_no_metrics_save=0): the first run is the first visit.
	Growing bool `json:"growing"`
	// Disagree: runs saw different windows without a trend, as behind a fleet or
	// anycast with mixed settings.
	Disagree bool     `json:"disagree"`
	Notes    []string `json:"notes"`
}

// Spread summarizes a sample: min, median, max and standard deviation.
type Spread struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Stddev float64 `json:"stddev"`
}

// ---- QUIC (HTTP/3) connections -------------------------------------------------
// Everything below is for connections with Transport "quic" (docs/report.md, "QUIC
// connections"); a TCP connection leaves Transport empty and QUIC nil. A QUIC
// connection fills the common fields as follows: segments are UDP datagrams, bytes
// are UDP payload bytes (whole QUIC packets: what the congestion window and the
// amplification limit count), MSS is the largest datagram the server sent,
// round_trips.tls counts the QUIC handshake's round trips (transport and TLS in one),
// round_trips.tcp is 0.

// Transports.
const (
	TransportTCP  = "tcp"
	TransportQUIC = "quic"
)

// LimitAmplification ends a round in which the server had more to send but had
// already sent three times the bytes it had received from a client whose address
// it had not validated yet (RFC 9000 §8.1).
const LimitAmplification = "amplification"

// LimitPacing ends a round in which the server was still pacing its packets out when
// the first acknowledgement returned: no silence before it, so the round was cut by
// the acknowledgement's arrival, not by the window.
const LimitPacing = "pacing"

// QUIC is what a QUIC connection has that a TCP connection has not.
type QUIC struct {
	Version string `json:"version"` // "1"
	// Decrypted says which packets could be read: "all", or "initial" when the key log
	// lacked this connection (Handshake and 1-RTT packets then stay opaque).
	Decrypted string `json:"decrypted"`
	// ClientInitialBytes: UDP payload bytes the server had received from the client
	// when it sent its first datagram (the client's first flight, padded Initials).
	ClientInitialBytes int `json:"client_initial_bytes"`
	// AmplificationLimitBytes is three times ClientInitialBytes.
	AmplificationLimitBytes int `json:"amplification_limit_bytes"`
	// ServerFirstFlightBytes and ServerFirstFlightDatagrams: what the server sent in
	// round 1, before any acknowledgement from the client had reached it.
	ServerFirstFlightBytes     int `json:"server_first_flight_bytes"`
	ServerFirstFlightDatagrams int `json:"server_first_flight_datagrams"`
	// AmplificationLimited: some round ended by the amplification limit.
	AmplificationLimited bool `json:"amplification_limited"`
	// AddressValidatedMs: when the server could first know the client's address was
	// valid (a Handshake packet from the client reached it); null if never seen.
	AddressValidatedMs *float64 `json:"address_validated_ms"`
	// ServerHandshakeBytes is the server's TLS handshake data (CRYPTO frames, Initial
	// and Handshake spaces); CertificateBytes the TLS Certificate message in it (0
	// when unknown; CompressedCertificate is counted as sent).
	ServerHandshakeBytes  int  `json:"server_handshake_bytes"`
	CertificateBytes      int  `json:"certificate_bytes"`
	CertificateCompressed bool `json:"certificate_compressed"`
	// ServerName and ALPN of the ClientHello.
	ServerName string   `json:"server_name,omitempty"`
	ALPN       []string `json:"alpn,omitempty"`
	// Packets counts the QUIC packets of each direction; Undecrypted those that could
	// not be read; MTUProbes the server's PING+PADDING packets larger than any before
	// (path MTU probes), left out of the rounds' bytes.
	ClientPackets int `json:"client_packets"`
	ServerPackets int `json:"server_packets"`
	Undecrypted   int `json:"undecrypted_packets"`
	MTUProbes     int `json:"mtu_probes"`
	// PacketLog lists every packet with its frames, when asked for (--packets).
	PacketLog []QUICPacket `json:"packet_log,omitempty"`
}

// QUICPacket is one QUIC packet of a connection.
type QUICPacket struct {
	TimeMs   float64 `json:"t_ms"`
	Dir      string  `json:"dir"`   // "c2s" or "s2c"
	Space    string  `json:"space"` // "initial", "handshake", "application"
	Type     string  `json:"type"`  // "initial", "handshake", "0rtt", "1rtt", "retry"
	Number   int64   `json:"number"`
	Bytes    int     `json:"bytes"`
	Datagram int     `json:"datagram"` // index of its datagram in its direction
	// Frames in brief: "CRYPTO 0+1162", "STREAM 0 1200+1100 fin", "ACK 0-5,7", "PADDING 36".
	Frames []string `json:"frames"`
	Round  int      `json:"round,omitempty"` // server packets: the round they belong to
}
