package owner

import (
	"os"
	"testing"
)

// TestTagRoundTrip: a Tag reads back as the process it names, and only a Tag
// as Tag writes it does.
func TestTagRoundTrip(t *testing.T) {
	me := This()
	if me.PID != os.Getpid() || me.StartTime == 0 || !me.Alive() {
		t.Fatalf("This() = %+v", me)
	}
	for _, p := range []Process{me, {PID: 1, StartTime: 0}, {PID: 4194304, StartTime: 18446744073709551615}} {
		tag := p.Tag()
		var pid, start string
		for i := range tag {
			if tag[i] == '-' {
				pid, start = tag[:i], tag[i+1:]
				break
			}
		}
		if got, ok := ParseTag(pid, start); !ok || got != p {
			t.Errorf("ParseTag(%q, %q) = %+v, %v; want %+v", pid, start, got, ok, p)
		}
	}
	for _, bad := range [][2]string{{"0", "1"}, {"-1", "1"}, {"012", "1"}, {"12", "01"}, {"12", ""}, {"x", "1"}, {"12", "18446744073709551616"}} {
		if p, ok := ParseTag(bad[0], bad[1]); ok {
			t.Errorf("ParseTag(%q, %q) = %+v, want refused", bad[0], bad[1], p)
		}
	}
	if (Process{PID: me.PID, StartTime: me.StartTime - 1}).Alive() {
		t.Error("a process with this PID and another start time reads as alive")
	}
}
