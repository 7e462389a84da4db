package main

import (
	"strings"
	"testing"
)

// TestLongWorkShowsProgress: model and tune show on a large response say what
// they are doing while they simulate it (a line at every tenth when standard
// error is not a terminal, as here); on a page of the usual size they print
// nothing there.
func TestLongWorkShowsProgress(t *testing.T) {
	code, out, errOut := runCLI(t, "model", "--size", "25MB", "--rtt", "70ms")
	if code != exitOK {
		t.Fatalf("model: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "Simulating a 25.00 MB response at IW 3, 10 and 32, packet by packet...\n") ||
		!strings.Contains(errOut, ": 50% done\n") || !strings.HasSuffix(errOut, ": 100% done\n") {
		t.Errorf("model --size 25MB, standard error:\n%s", errOut)
	}
	if strings.Contains(out, "% done") {
		t.Errorf("progress on standard output:\n%s", out)
	}
	if code, _, errOut := runCLI(t, "model", "--size", "160KB"); code != exitOK || errOut != "" {
		t.Errorf("model --size 160KB: exit %d, standard error %q; want nothing there", code, errOut)
	}

	ns := tuneNamespace(t) // a default route without initcwnd: 10 and 32 are priced
	code, _, errOut = runCLI(t, "tune", "show", "--netns", ns, "--size", "40MB")
	if code != exitOK {
		t.Fatalf("tune show: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "Pricing the advice on a 40.00 MB page, packet by packet...\n") || !strings.HasSuffix(errOut, ": 100% done\n") {
		t.Errorf("tune show --size 40MB, standard error:\n%s", errOut)
	}
}

// TestAbsurdPathRefused: a lab path no network has is refused before any work,
// saying what was probably meant.
func TestAbsurdPathRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "run", "--rtt", "100s"}, "--rtt 1m40s is beyond what the lab emulates (at most 10s"},
		{[]string{"lab", "sweep", "--out", t.TempDir(), "--rtt", "20ms,100s"}, "did you mean 100ms?"},
		{[]string{"lab", "run", "--rate", "1kbit"}, "--rate 1 kbit/s is below what the lab emulates (at least 10 kbit/s)"},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, errOut, exitUsage, c.want)
		}
	}
}
