package client

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCurlArguments(t *testing.T) {
	rootPEM := []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	tests := []struct {
		name     string
		cfg      FetchConfig
		want     []string // arguments that must be present, in this order
		wantNot  []string // arguments that must be absent
		wantURL  string
		wantFail bool
	}{
		{
			name:    "cleartext HTTP/1.1",
			cfg:     FetchConfig{URL: "http://10.0.0.2:8080/bytes/5"},
			want:    []string{"--http1.1"},
			wantNot: []string{"--cacert", "--resolve", "--tlsv1.2", "--tlsv1.3"},
			wantURL: "http://10.0.0.2:8080/bytes/5",
		},
		{
			name:    "h2c",
			cfg:     FetchConfig{URL: "http://10.0.0.2/bytes/5", HTTP2: true},
			want:    []string{"--http2-prior-knowledge"},
			wantURL: "http://10.0.0.2/bytes/5",
		},
		{
			name:    "TLS 1.2 with a server name",
			cfg:     FetchConfig{URL: "https://10.0.0.2/bytes/5", TLSVersion: "1.2", ServerName: "slowstart.test", RootCAPEM: rootPEM},
			want:    []string{"--http1.1", "--tlsv1.2", "--tls-max", "1.2", "--cacert", "--resolve", "slowstart.test:443:10.0.0.2"},
			wantURL: "https://slowstart.test:443/bytes/5",
		},
		{
			name:    "TLS 1.3 HTTP/2 over IPv6",
			cfg:     FetchConfig{URL: "https://[fd00::2]:8443/bytes/5", TLSVersion: "1.3", HTTP2: true, ServerName: "slowstart.test", RootCAPEM: rootPEM},
			want:    []string{"--http2", "--tlsv1.3", "--tls-max", "1.3", "--resolve", "slowstart.test:8443:[fd00::2]"},
			wantURL: "https://slowstart.test:8443/bytes/5",
		},
		{name: "TLS without roots", cfg: FetchConfig{URL: "https://10.0.0.2/bytes/5"}, wantFail: true},
		{name: "unknown TLS version", cfg: FetchConfig{URL: "https://10.0.0.2/", TLSVersion: "1.1", RootCAPEM: rootPEM}, wantFail: true},
		{name: "server name with a host name URL", cfg: FetchConfig{URL: "http://server/", ServerName: "x.test"}, wantFail: true},
		{name: "other scheme", cfg: FetchConfig{URL: "ftp://10.0.0.2/"}, wantFail: true},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			args, cleanup, err := curlArguments(test.cfg)
			defer cleanup()
			if test.wantFail {
				if err == nil {
					t.Fatalf("curlArguments accepted %+v: %q", test.cfg, args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := args[len(args)-1]; got != test.wantURL {
				t.Errorf("URL %q, want %q", got, test.wantURL)
			}
			position := 0
			for _, want := range test.want {
				found := slices.Index(args[position:], want)
				if found < 0 {
					t.Fatalf("arguments %q lack %q (in order after position %d)", args, want, position)
				}
				position += found + 1
			}
			for _, unwanted := range test.wantNot {
				if slices.Contains(args, unwanted) {
					t.Errorf("arguments %q contain %q", args, unwanted)
				}
			}
		})
	}
}

func TestCurlResult(t *testing.T) {
	// The relevant part of a real curl 7.88 --write-out '%{json}' report (TLS 1.3, HTTP/2).
	const reportJSON = `{"http_code":200,"http_version":"2","local_ip":"127.0.0.1","local_port":50946,
		"remote_ip":"127.0.0.1","remote_port":8443,"size_download":100000,"exitcode":0,"errormsg":null,
		"time_namelookup":0.000015,"time_connect":0.000256,"time_appconnect":0.004194,
		"time_pretransfer":0.004210,"time_starttransfer":0.004476,"time_total":0.004617}`
	decoder := json.NewDecoder(strings.NewReader(reportJSON))
	decoder.UseNumber()
	var report curlReport
	if err := decoder.Decode(&report); err != nil {
		t.Fatal(err)
	}
	exitedAt := time.Unix(1700000000, 0)
	result, err := curlResult(report, "https://127.0.0.1:8443/bytes/100000", exitedAt)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{
		Client:           ClientCurl,
		URL:              "https://127.0.0.1:8443/bytes/100000",
		Status:           200,
		Bytes:            100000,
		Protocol:         ProtocolHTTP2,
		StartUnixNs:      exitedAt.UnixNano() - 4617000 + 15000,
		ConnectNs:        256000 - 15000,
		TLSNs:            4194000 - 15000,
		RequestWrittenNs: 4210000 - 15000,
		FirstByteNs:      4476000 - 15000,
		LastByteNs:       4617000 - 15000,
		FCTPaperNs:       4617000 - 4476000,
		FCTUserNs:        4617000 - 15000,
		LocalAddr:        "127.0.0.1:50946",
		RemoteAddr:       "127.0.0.1:8443",
	}
	if result != want {
		t.Errorf("curlResult:\n got %+v\nwant %+v", result, want)
	}

	report.TimeAppConnect = "0.000000" // cleartext: curl reports no TLS step
	report.HTTPVersion = "1.1"
	result, err = curlResult(report, "", exitedAt)
	if err != nil {
		t.Fatal(err)
	}
	if result.TLSNs != 0 || result.Protocol != ProtocolHTTP1 {
		t.Errorf("cleartext HTTP/1.1 report: TLS at %d ns, protocol %q; want 0 and %q", result.TLSNs, result.Protocol, ProtocolHTTP1)
	}
	report.TimeTotal = "soon"
	if _, err := curlResult(report, "", exitedAt); err == nil {
		t.Error("curlResult accepted a time that is not a number")
	}
}
