package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileFetchesTheToolchain: with no Go in PATH, or only one older than
// 1.21 (Debian bookworm's 1.19), make fetches the pinned toolchain from the Go
// module proxy (GOPROXY, here a local one serving a stand-in of the same
// module), checks its SHA-256 and unpacks it into .toolchain/; a zip of another
// SHA-256 is refused and nothing is unpacked. The real zip's SHA-256 is the
// Makefile's GO_TOOLCHAIN_SHA256 (computed from proxy.golang.org's).
func TestMakefileFetchesTheToolchain(t *testing.T) {
	for _, tool := range []string{"make", "curl", "unzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^GO_TOOLCHAIN_SHA256 +:= [0-9a-f]{64}$`).Match(makefile) {
		t.Fatal("the Makefile pins no SHA-256 of the toolchain's zip")
	}
	const module = "golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64"
	// A stand-in for the toolchain: its go answers as Go 1.26.8 does.
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	for name, body := range map[string]string{
		module + "/bin/go":  "#!/bin/sh\ncase \"$*\" in\n  \"env GOVERSION\") echo go1.26.8;;\n  version) echo go version go1.26.8 linux/amd64;;\n  *) exit 1;;\nesac\n",
		module + "/VERSION": "go1.26.8\n",
	} {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(zipped.Bytes())
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/golang.org/toolchain/@v/v0.0.1-go1.26.8.linux-amd64.zip" {
			http.NotFound(w, r)
			return
		}
		w.Write(zipped.Bytes())
	}))
	defer proxy.Close()

	// A Go 1.19 in PATH, too old to fetch a toolchain itself.
	oldGo := t.TempDir()
	if err := os.WriteFile(filepath.Join(oldGo, "go"), []byte("#!/bin/sh\ncase \"$*\" in\n  \"env GOVERSION\") echo go1.19.8;;\n  *) echo go version go1.19.8 linux/amd64;;\nesac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, path, sha string) (string, string, error) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Makefile"), makefile, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("make", "--no-print-directory", "go-check", "GO_TOOLCHAIN_SHA256="+sha)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + path, "HOME=" + dir, "GOPROXY=" + proxy.URL + ",direct"}
		out, err := cmd.CombinedOutput()
		return dir, string(out), err
	}
	for name, path := range map[string]string{"no Go": "/usr/bin:/bin", "Go 1.19": oldGo + ":/usr/bin:/bin"} {
		t.Run(name, func(t *testing.T) {
			dir, out, err := run(t, path, hex.EncodeToString(sum[:]))
			if err != nil {
				t.Fatalf("make go-check: %v\n%s", err, out)
			}
			if !strings.Contains(out, "fetching Go 1.26.8 from "+proxy.URL+"/golang.org/toolchain/@v/v0.0.1-go1.26.8.linux-amd64.zip") ||
				!strings.Contains(out, "go version go1.26.8") {
				t.Errorf("make go-check said:\n%s", out)
			}
			if fi, err := os.Stat(filepath.Join(dir, ".toolchain", module, "bin", "go")); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("the toolchain's go is not in .toolchain/: %v", err)
			}
		})
	}
	t.Run("another SHA-256", func(t *testing.T) {
		dir, out, err := run(t, "/usr/bin:/bin", strings.Repeat("0", 64))
		if err == nil || !strings.Contains(out, "not used") || !strings.Contains(out, hex.EncodeToString(sum[:])) {
			t.Errorf("a zip of another SHA-256: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, ".toolchain", "golang.org")); err == nil {
			t.Error("the refused zip was unpacked")
		}
	})
}
