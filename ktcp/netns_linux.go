package ktcp

import (
	"fmt"
	"os"
	"syscall"
)

// NetnsInode returns the inode number of the network namespace a file names:
// /proc/self/ns/net, /proc/PID/ns/net, or a bind mount such as
// /run/netns/NAME. It is what Filter.Netns and Event.Netns hold.
func NetnsInode(path string) (uint32, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("network namespace %s: %w", path, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("network namespace %s: no inode number on this system", path)
	}
	if st.Ino > 1<<32-1 {
		return 0, fmt.Errorf("network namespace %s: inode %d is not a namespace's", path, st.Ino)
	}
	return uint32(st.Ino), nil
}
