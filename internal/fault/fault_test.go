package fault

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	base := errors.New("base")
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"unmarked", base, Failed},
		{"marked", Mark(File, base), File},
		{"wrapped after marking", fmt.Errorf("reading: %w", Mark(Usage, base)), Usage},
		{"outermost wins", Mark(Network, Mark(Usage, base)), Network},
		{"failed overrides", Failedf("measuring: %w", Mark(Permission, base)), Failed},
		{"usagef", Usagef("--x %d: bad", 3), Usage},
		{"filef wraps", Filef("open: %w", fs.ErrNotExist), File},
		{"interruptedf", Interruptedf("interrupted; %d kept", 2), Interrupted},
		{"permissionf", Permissionf("needs root"), Permission},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %v, want %v", tc.name, got, tc.want)
		}
	}
	if Mark(Usage, nil) != nil {
		t.Error("Mark(Usage, nil) is not nil")
	}
	if Marked(base) || !Marked(fmt.Errorf("x: %w", Mark(File, base))) {
		t.Error("Marked does not tell marked errors from unmarked ones")
	}
	if err := Filef("open: %w", fs.ErrNotExist); !errors.Is(err, fs.ErrNotExist) || err.Error() != "open: file does not exist" {
		t.Errorf("a mark changed the error: %q", err)
	}
}
