//go:build linux

package netnsexec

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slowstart/slowstart/internal/testroot"

	"github.com/vishvananda/netns"
)

func TestRunInNamespace(t *testing.T) {
	testroot.Require(t, "network namespaces")
	name := "netnsexec-test"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	path := filepath.Join("/run/netns", name)
	want, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()

	var inside netns.NsHandle
	if err := Run(path, func() error {
		var err error
		inside, err = netns.Get()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	if !inside.Equal(want) {
		t.Errorf("fn ran in %s, want the namespace at %s (%s)", inside, path, want)
	}
	if now, _ := netns.Get(); !now.Equal(host) {
		t.Errorf("the caller's thread moved to %s", now)
	}
	if err := Run(path, func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("panic: got %v", err)
	}
	if err := Run("/run/netns/netnsexec-missing", func() error { return nil }); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing namespace: got %v", err)
	}
}

func TestNamed(t *testing.T) {
	if name, ok := Named("/run/netns/lab-c"); !ok || name != "lab-c" {
		t.Errorf("Named(/run/netns/lab-c) = %q, %v", name, ok)
	}
	if _, ok := Named("/proc/1234/ns/net"); ok {
		t.Error("a /proc namespace file taken for a named one")
	}
	if _, ok := Named("/run/netns/"); ok {
		t.Error("the namespaces' directory taken for a named one")
	}
}
