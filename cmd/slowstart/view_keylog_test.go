package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestViewKeylog: view --keylog decrypts the capture, so the page's Report holds
// every request the access log of the capture's nginx recorded; without the key
// log it holds none of them.
func TestViewKeylog(t *testing.T) {
	const base = "../../testdata/tls/tiny-chromium-tls13-h2"
	t.Setenv("SSLKEYLOGFILE", "")
	access, err := os.ReadFile(base + ".access.log")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(string(access)), "\n") {
		// 8443 34190 "GET /tiny/index.html HTTP/2.0" 200 314 188
		request := strings.Split(line, `"`)[1]
		paths = append(paths, strings.Fields(request)[1])
	}
	if len(paths) == 0 {
		t.Fatal("no requests in the access log")
	}
	dir := t.TempDir()
	for _, keyed := range []bool{true, false} {
		out := filepath.Join(dir, "plain.html")
		args := []string{"view", "--html", out, base + ".pcap"}
		if keyed {
			out = filepath.Join(dir, "keyed.html")
			args = []string{"view", "--html", out, "--keylog", base + ".keys", base + ".pcap"}
		}
		if code, _, errOut := runCLI(t, args...); code != exitOK {
			t.Fatalf("view %v: exit %d: %s", args, code, errOut)
		}
		page, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			found := strings.Contains(string(page), `"path":"`+p+`"`)
			if found != keyed {
				t.Errorf("keylog %t: the page holds the request for %s: %t", keyed, p, found)
			}
		}
	}
	if code, _, errOut := runCLI(t, "view", "--html", filepath.Join(dir, "x.html"), "--keylog", filepath.Join(dir, "missing.keys"), base+".pcap"); code != exitFile {
		t.Errorf("view --keylog with a missing file: exit %d, want %d: %s", code, exitFile, errOut)
	}
}
