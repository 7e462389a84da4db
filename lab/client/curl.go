package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/slowstart/slowstart/lab/netlab"
)

// curlTLSVersionPattern finds the negotiated version in curl's verbose output, e.g.
// "* SSL connection using TLSv1.3 / TLS_AES_256_GCM_SHA384".
var curlTLSVersionPattern = regexp.MustCompile(`SSL connection using TLSv(1\.[0-3])`)

// curlReport holds the fields of curl's --write-out '%{json}' (curl 7.70 and later) that
// the Result needs. Times are seconds since the start of the transfer, name lookup included.
type curlReport struct {
	HTTPCode          int         `json:"http_code"`
	HTTPVersion       string      `json:"http_version"` // "1.1", "2", ...
	SizeDownload      int64       `json:"size_download"`
	LocalIP           string      `json:"local_ip"`
	LocalPort         int         `json:"local_port"`
	RemoteIP          string      `json:"remote_ip"`
	RemotePort        int         `json:"remote_port"`
	ErrorMessage      *string     `json:"errormsg"`
	ExitCode          int         `json:"exitcode"`
	TimeNameLookup    json.Number `json:"time_namelookup"`
	TimeConnect       json.Number `json:"time_connect"`
	TimeAppConnect    json.Number `json:"time_appconnect"`
	TimePreTransfer   json.Number `json:"time_pretransfer"`
	TimeStartTransfer json.Number `json:"time_starttransfer"`
	TimeTotal         json.Number `json:"time_total"`
}

// FetchCurl fetches cfg.URL with curl (7.70 or later) over one new connection and reports
// curl's own timers in a Result:
//
//	connect start   = time_namelookup (curl's times start before name resolution)
//	ConnectNs       = time_connect - time_namelookup
//	TLSNs           = time_appconnect - time_namelookup (0 over cleartext)
//	RequestWrittenNs= time_pretransfer - time_namelookup (the request is about to be sent)
//	FirstByteNs     = time_starttransfer - time_namelookup
//	LastByteNs      = time_total - time_namelookup
//
// curl's timers have microsecond resolution. StartUnixNs is estimated from the wall clock
// when curl exited, less its total time, so it is late by curl's exit time.
//
// The connection goes to the URL's host and port; with cfg.ServerName set, curl is given
// that name in the URL (for SNI, verification and Host) and --resolve to the URL's IP.
// wrap, when not nil, may rewrite the command before it starts, e.g. to run it through
// `ip netns exec NAME`. cfg.Dial is not used. Like Fetch, it returns the Result with an
// error on an HTTP error status or a protocol other than the one asked for.
func FetchCurl(ctx context.Context, cfg FetchConfig, wrap func(*exec.Cmd)) (Result, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	binary := cfg.CurlBinary
	if binary == "" {
		binary = "curl"
	}
	binaryPath, err := exec.LookPath(binary)
	if err != nil {
		return Result{}, fmt.Errorf("finding curl: %w (install Debian's curl package)", err)
	}
	args, cleanup, err := curlArguments(cfg)
	if err != nil {
		return Result{}, err
	}
	defer cleanup()

	cmd := exec.CommandContext(ctx, binaryPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if wrap != nil {
		wrap(cmd)
	}
	runErr := cmd.Run()
	exitedAt := time.Now()

	var report curlReport
	decoder := json.NewDecoder(&stdout)
	decoder.UseNumber()
	if err := decoder.Decode(&report); err != nil {
		return Result{}, fmt.Errorf("running %s: %v; no JSON report from curl (%w): %s",
			strings.Join(cmd.Args, " "), runErr, err, lastLines(stderr.String(), 5))
	}
	if runErr != nil || report.ExitCode != 0 {
		message := ""
		if report.ErrorMessage != nil {
			message = *report.ErrorMessage
		}
		return Result{}, fmt.Errorf("curl failed fetching %s (exit code %d: %s): %v", cfg.URL, report.ExitCode, message, runErr)
	}
	result, err := curlResult(report, cfg.URL, exitedAt)
	if err != nil {
		return Result{}, err
	}
	if match := curlTLSVersionPattern.FindStringSubmatch(stderr.String()); match != nil {
		result.TLSVersion = match[1]
	}
	logger.Debug("fetched with curl", "url", cfg.URL, "status", result.Status, "bytes", result.Bytes,
		"protocol", result.Protocol, "tls", result.TLSVersion, "fct_user_ns", result.FCTUserNs)
	return result, checkResult(result, cfg)
}

// curlArguments builds curl's command line; cleanup removes the CA file it writes.
func curlArguments(cfg FetchConfig) (args []string, cleanup func(), err error) {
	cleanup = func() {}
	target, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, cleanup, fmt.Errorf("parsing the URL to fetch: %w", err)
	}
	if target.Scheme != "http" && target.Scheme != "https" {
		return nil, cleanup, fmt.Errorf("URL %q: only http:// and https:// are supported", cfg.URL)
	}
	args = []string{"--silent", "--show-error", "--verbose", "--output", "/dev/null", "--write-out", "%{json}"}
	switch {
	case cfg.HTTP2 && target.Scheme == "http":
		args = append(args, "--http2-prior-knowledge")
	case cfg.HTTP2:
		args = append(args, "--http2")
	default:
		args = append(args, "--http1.1")
	}
	if target.Scheme == "https" {
		switch cfg.TLSVersion {
		case "":
			args = append(args, "--tlsv1.2")
		case "1.2":
			args = append(args, "--tlsv1.2", "--tls-max", "1.2")
		case "1.3":
			args = append(args, "--tlsv1.3", "--tls-max", "1.3")
		default:
			return nil, cleanup, fmt.Errorf("TLS version %q is not supported: use \"1.2\", \"1.3\" or \"\"", cfg.TLSVersion)
		}
		if len(cfg.RootCAPEM) == 0 {
			return nil, cleanup, fmt.Errorf("fetching %s with curl needs FetchConfig.RootCAPEM (see server.Chain.RootPEM)", cfg.URL)
		}
		// Marked as this process's, so that `slowstart clean` can remove the
		// directory of a run that was killed.
		dir, err := netlab.MakeTempDir("curl")
		if err != nil {
			return nil, cleanup, fmt.Errorf("making a temporary directory for curl's CA file: %w", err)
		}
		cleanup = func() { _ = netlab.RemoveTempDir(dir) }
		caFile := filepath.Join(dir, "roots.pem")
		if err := os.WriteFile(caFile, cfg.RootCAPEM, 0o600); err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("writing curl's CA file: %w", err)
		}
		args = append(args, "--cacert", caFile)
	}
	fetchURL := cfg.URL
	if cfg.ServerName != "" && cfg.ServerName != target.Hostname() {
		port := target.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[target.Scheme]
		}
		ip, err := netip.ParseAddr(target.Hostname())
		if err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("URL %q: with ServerName set, the URL's host must be the server's IP address for curl --resolve", cfg.URL)
		}
		resolveIP := ip.String()
		if ip.Is6() {
			resolveIP = "[" + resolveIP + "]"
		}
		args = append(args, "--resolve", cfg.ServerName+":"+port+":"+resolveIP)
		named := *target
		named.Host = net.JoinHostPort(cfg.ServerName, port)
		fetchURL = named.String()
	}
	args = append(args, fetchURL)
	return args, cleanup, nil
}

// curlResult converts curl's report into a Result.
func curlResult(report curlReport, rawURL string, exitedAt time.Time) (Result, error) {
	seconds := map[string]json.Number{
		"time_namelookup":    report.TimeNameLookup,
		"time_connect":       report.TimeConnect,
		"time_appconnect":    report.TimeAppConnect,
		"time_pretransfer":   report.TimePreTransfer,
		"time_starttransfer": report.TimeStartTransfer,
		"time_total":         report.TimeTotal,
	}
	nanoseconds := make(map[string]int64, len(seconds))
	for name, value := range seconds {
		parsed, err := strconv.ParseFloat(value.String(), 64)
		if err != nil {
			return Result{}, fmt.Errorf("curl reported %s = %q, not a number of seconds: %w", name, value, err)
		}
		nanoseconds[name] = int64(math.Round(parsed*1e6)) * 1000
	}
	start := nanoseconds["time_namelookup"]
	sinceStart := func(name string) int64 {
		if nanoseconds[name] == 0 {
			return 0 // curl reports 0 for steps that did not happen (appconnect over cleartext)
		}
		return nanoseconds[name] - start
	}
	result := Result{
		Client:           ClientCurl,
		URL:              rawURL,
		Status:           report.HTTPCode,
		Bytes:            report.SizeDownload,
		Protocol:         ProtocolHTTP1,
		StartUnixNs:      exitedAt.UnixNano() - nanoseconds["time_total"] + start,
		ConnectNs:        sinceStart("time_connect"),
		TLSNs:            sinceStart("time_appconnect"),
		RequestWrittenNs: sinceStart("time_pretransfer"),
		FirstByteNs:      sinceStart("time_starttransfer"),
		LastByteNs:       sinceStart("time_total"),
		LocalAddr:        net.JoinHostPort(report.LocalIP, strconv.Itoa(report.LocalPort)),
		RemoteAddr:       net.JoinHostPort(report.RemoteIP, strconv.Itoa(report.RemotePort)),
	}
	if report.HTTPVersion == "2" {
		result.Protocol = ProtocolHTTP2
	}
	result.FCTPaperNs = result.LastByteNs - result.FirstByteNs
	result.FCTUserNs = result.LastByteNs
	return result, nil
}

// lastLines returns the last n lines of text, for error messages.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
