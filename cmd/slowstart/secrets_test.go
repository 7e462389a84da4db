package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/testroot"
)

// TestSecretsStayOutOfOutputs: a URL with credentials and a token, whose page
// redirects to another URL with credentials and a token of its own that
// can't be reached (the request fails, and net/http names the target in its
// error), is probed, watched and surveyed through the built binary: no
// secret appears in standard output, standard error or a store, and the
// files that can hold secrets (the probe's capture with its plaintext
// requests, its key log, the stores) are 0600, also when they existed with
// mode 0644.
func TestSecretsStayOutOfOutputs(t *testing.T) {
	testroot.Require(t, "live captures")
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close() // nothing listens there any more: the redirect's request fails
	target := fmt.Sprintf("http://bob:hunter22@%s/next?sig=tok3nvalue", closedAddr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	given := fmt.Sprintf("http://alice:s3cret@%s/start?token=abc123xyz", ln.Addr())
	secrets := []string{"alice", "s3cret", "abc123xyz", "bob", "hunter22", "tok3nvalue"}

	dir := t.TempDir()
	pcap, keys := filepath.Join(dir, "probe.pcap"), filepath.Join(dir, "keys.txt")
	for _, p := range []string{pcap, keys} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := filepath.Join(dir, "list.txt")
	if err := os.WriteFile(list, []byte("secret-site "+given+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	watchStore, surveyStore := filepath.Join(dir, "watch.db"), filepath.Join(dir, "survey.db")
	runs := [][]string{
		{"probe", "--pcap", pcap, "--keylog", keys, given},
		{"probe", "--json", given},
		{"watch", "--store", watchStore, "--runs", "1", given},
		{"watch", "--store", watchStore, "--list"},
		{"survey", "--no-exact", "--out", surveyStore, list},
		{"survey", "report", surveyStore},
	}
	for _, args := range runs {
		cmd := exec.Command(builtBinary(t), args...)
		out, _ := cmd.CombinedOutput()
		name := strings.Join(args[:len(args)-1], " ")
		if !strings.Contains(string(out), "REDACTED") && args[len(args)-1] == given {
			t.Errorf("%s: the URL is not in its output, redacted:\n%s", name, out)
		}
		for _, s := range secrets {
			if strings.Contains(string(out), s) {
				t.Errorf("%s: %q in its output:\n%s", name, s, out)
			}
		}
	}
	for _, store := range []string{watchStore, surveyStore} {
		matches, _ := filepath.Glob(store + "*") // the store and its journal files
		for _, f := range matches {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if strings.Contains(string(data), s) {
					t.Errorf("%s holds %q", filepath.Base(f), s)
				}
			}
		}
	}
	for _, f := range []string{pcap, keys, watchStore, surveyStore} {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(f), info.Mode().Perm())
		}
	}
}

// TestCleanLeavesLookAlikes: what carries no marker of its maker is not
// removed by clean, whatever its name, even empty: a mount point under
// /run/netns named as an earlier lab's, an empty directory named as the lab's
// temporary ones, one holding only a marker file with the marker's first
// word.
func TestCleanLeavesLookAlikes(t *testing.T) {
	testroot.Require(t, "slowstart clean")
	netns := filepath.Join("/run/netns", "slowstart-99995-1-c")
	tmp := os.TempDir()
	lookAlikes := []string{filepath.Join(tmp, "slowstart-99999-nginx-124"), filepath.Join(tmp, "slowstart-99998-nginx-125")}
	if _, err := os.Stat(netns); err == nil {
		t.Skipf("%s exists already: not this test's to make", netns)
	}
	if err := os.MkdirAll("/run/netns", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netns, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(netns) })
	for _, d := range lookAlikes {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	if err := os.WriteFile(filepath.Join(lookAlikes[1], ".slowstart-owner"), []byte("slowstart-lab"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(builtBinary(t), "clean").CombinedOutput()
	if err != nil {
		t.Fatalf("clean: %v\n%s", err, out)
	}
	for _, p := range append([]string{netns}, lookAlikes...) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("clean removed %s, which carries no marker of its maker:\n%s", p, out)
		}
	}
}
