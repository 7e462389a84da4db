package server

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestHTTP2InListenFor(t *testing.T) {
	tests := []struct {
		output   string
		want     bool
		wantFail bool
	}{
		{"nginx version: nginx/1.22.1\n", true, false},
		{"nginx version: nginx/1.25.0", true, false},
		{"nginx version: nginx/1.25.1", false, false},
		{"nginx version: nginx/1.27.3 (Ubuntu)", false, false},
		{"nginx version: openresty/1.21.4.1", false, true},
		{"", false, true},
	}
	for _, test := range tests {
		got, err := http2InListenFor([]byte(test.output))
		if (err != nil) != test.wantFail || got != test.want {
			t.Errorf("http2InListenFor(%q) = %v, %v; want %v (fail %v)", test.output, got, err, test.want, test.wantFail)
		}
	}
}

func TestNginxFiles(t *testing.T) {
	chain, err := NewChain(ChainConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		cfg        NginxConfig
		data       nginxTemplateData
		want       []string
		wantAbsent []string
		wantFiles  []string
	}{
		{
			name:       "cleartext without keep-alive",
			cfg:        NginxConfig{BodySizes: []int64{100, 0, 100}},
			data:       nginxTemplateData{Address: "10.0.0.2:80", DisableKeepAlives: true},
			want:       []string{"listen 10.0.0.2:80;", "keepalive_timeout 0;", "sendfile on;", "tcp_nopush on;"},
			wantAbsent: []string{"ssl", "http2"},
			wantFiles:  []string{"docroot/0", "docroot/100"},
		},
		{
			name:       "TLS 1.2 and HTTP/2 on nginx 1.22",
			cfg:        NginxConfig{Certificate: chain.Certificate},
			data:       nginxTemplateData{Address: "[fd00::2]:443", TLS: true, SSLProtocol: "TLSv1.2", HTTP2: true, HTTP2InListen: true},
			want:       []string{"listen [fd00::2]:443 ssl http2;", "ssl_protocols TLSv1.2;", "keepalive_timeout 65;"},
			wantAbsent: []string{"http2 on;"},
			wantFiles:  []string{"chain.pem", "key.pem"},
		},
		{
			name:      "TLS 1.3 and HTTP/2 on nginx 1.25.1 and later",
			cfg:       NginxConfig{Certificate: chain.Certificate},
			data:      nginxTemplateData{Address: "10.0.0.2:443", TLS: true, SSLProtocol: "TLSv1.3", HTTP2: true},
			want:      []string{"listen 10.0.0.2:443 ssl;", "http2 on;", "ssl_protocols TLSv1.3;", "ssl_ecdh_curve X25519:prime256v1;"},
			wantFiles: []string{"chain.pem", "key.pem"},
		},
		{
			name:      "TLS 1.3 with P-256 only",
			cfg:       NginxConfig{Certificate: chain.Certificate},
			data:      nginxTemplateData{Address: "10.0.0.2:443", TLS: true, SSLProtocol: "TLSv1.3", ECDHCurves: "prime256v1"},
			want:      []string{"ssl_ecdh_curve prime256v1;"},
			wantFiles: []string{"chain.pem", "key.pem"},
		},
		{
			name: "a page on two addresses",
			cfg:  NginxConfig{Certificate: chain.Certificate, PageFiles: map[string][]byte{"/page/index.html": []byte("<p>"), "/page/r1-css.css": []byte("p{}")}},
			data: nginxTemplateData{Address: "10.0.0.2:443", SecondAddress: "10.0.0.2:8443", TLS: true, SSLProtocol: "TLSv1.3", HTTP2: true, HTTP2InListen: true, Page: true},
			want: []string{"listen 10.0.0.2:443 ssl http2;", "listen 10.0.0.2:8443 ssl http2;", "location ^~ /page/", "Access-Control-Allow-Origin",
				"$remote_port", "$bytes_sent", "text/css css;"},
			wantFiles: []string{"docroot/page/index.html", "docroot/page/r1-css.css"},
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			dir := t.TempDir()
			test.data.Dir = dir
			if err := writeNginxFiles(dir, test.cfg, test.data); err != nil {
				t.Fatal(err)
			}
			config, err := os.ReadFile(filepath.Join(dir, "nginx.conf"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range test.want {
				if !strings.Contains(string(config), want) {
					t.Errorf("nginx.conf lacks %q:\n%s", want, config)
				}
			}
			for _, unwanted := range test.wantAbsent {
				if strings.Contains(string(config), unwanted) {
					t.Errorf("nginx.conf contains %q:\n%s", unwanted, config)
				}
			}
			for _, name := range test.wantFiles {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("file %s: %v", name, err)
				}
			}
			for _, size := range test.cfg.BodySizes {
				info, err := os.Stat(filepath.Join(dir, "docroot", strconv.FormatInt(size, 10)))
				if err != nil || info.Size() != size {
					t.Errorf("body file of %d bytes: %v, %v", size, info, err)
				}
			}
		})
	}

	if err := writeNginxFiles(t.TempDir(), NginxConfig{PageFiles: map[string][]byte{"/page/../../etc/x": nil}}, nginxTemplateData{}); err == nil {
		t.Error("writeNginxFiles accepted a page file outside the docroot")
	}
	if err := writeNginxFiles(t.TempDir(), NginxConfig{BodySizes: []int64{MaxBodyBytes + 1}}, nginxTemplateData{}); err == nil {
		t.Error("writeNginxFiles accepted a body larger than MaxBodyBytes")
	}
	if err := writeNginxFiles(t.TempDir(), NginxConfig{Certificate: chain.Certificate}, nginxTemplateData{TLS: true, ECDHCurves: "X25519; include /etc/passwd"}); err == nil {
		t.Error("writeNginxFiles accepted a curve list that breaks out of its directive")
	}
}
