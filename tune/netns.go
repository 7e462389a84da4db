package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/slowstart/slowstart/internal/netnsexec"
)

// NetnsDir is where named network namespaces live (`ip netns add NAME`).
const NetnsDir = "/run/netns"

// NetnsPath is the file of the named network namespace: NAME under NetnsDir, or
// name itself when it is a path.
func NetnsPath(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return filepath.Join(NetnsDir, name)
}

// inNetns runs fn on an OS thread inside the named network namespace ("" is
// the calling process's). The caller's thread never changes namespace.
func inNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	path := NetnsPath(name)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("network namespace %s: %s does not exist (see `ip netns list`)", name, path)
	}
	return netnsexec.Run(path, fn)
}
