package tune

import (
	"fmt"
	"io"
	"strings"
)

// WritePersistHelp writes how to make the changes of res survive a reboot
// with systemd-networkd, netplan and ifupdown (routes) and sysctl.d
// (sysctls): a route set by netlink lives only until the interface or the
// machine restarts, a sysctl until the machine restarts.
func WritePersistHelp(w io.Writer, res *ApplyResult, initCwnd, initRwnd int) {
	var routes []Route
	for _, c := range res.Changes {
		if c.Skipped == "" {
			routes = append(routes, c.After)
		}
	}
	if len(res.Sysctls) > 0 {
		fmt.Fprintln(w, "To keep the sysctls after a reboot, put them in /etc/sysctl.d/90-slowstart.conf:")
		for _, s := range res.Sysctls {
			fmt.Fprintf(w, "  %s = %s\n", s.Name, s.After)
		}
		if len(routes) > 0 {
			fmt.Fprintln(w)
		}
	}
	if len(routes) == 0 {
		return
	}
	fmt.Fprintln(w, "To keep the routes after a reboot (route changes made now last until the interface goes down):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "systemd-networkd: in the .network file of each interface, a [Route] section per route:")
	for _, r := range routes {
		fmt.Fprintf(w, "  # %s\n  [Route]\n", r.Device)
		if !r.IsDefault() {
			fmt.Fprintf(w, "  Destination=%s\n", r.dst)
		}
		if r.Gateway != "" {
			fmt.Fprintf(w, "  Gateway=%s\n", r.Gateway)
		}
		if r.Table != TableMain {
			fmt.Fprintf(w, "  Table=%d\n", r.Table)
		}
		if r.HasPriority && r.Priority != 0 {
			fmt.Fprintf(w, "  Metric=%d\n", r.Priority)
		}
		if initCwnd != 0 {
			fmt.Fprintf(w, "  InitialCongestionWindow=%d\n", initCwnd)
		}
		if initRwnd != 0 {
			fmt.Fprintf(w, "  InitialAdvertisedReceiveWindow=%d\n", initRwnd)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "netplan (0.102 or later): under the interface's routes:")
	for _, r := range routes {
		to := "default"
		if !r.IsDefault() {
			to = r.dst.String()
		}
		fmt.Fprintf(w, "  - to: %s\n", to)
		if r.Gateway != "" {
			fmt.Fprintf(w, "    via: %s\n", r.Gateway)
		}
		if r.Table != TableMain {
			fmt.Fprintf(w, "    table: %d\n", r.Table)
		}
		if r.HasPriority && r.Priority != 0 {
			fmt.Fprintf(w, "    metric: %d\n", r.Priority)
		}
		if initCwnd != 0 {
			fmt.Fprintf(w, "    congestion-window: %d\n", initCwnd)
		}
		if initRwnd != 0 {
			fmt.Fprintf(w, "    advertised-receive-window: %d\n", initRwnd)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ifupdown (/etc/network/interfaces): in the stanza of the route's interface:")
	for _, r := range routes {
		fmt.Fprintf(w, "  post-up %s\n", strings.TrimSpace(r.IPCommand("change")))
	}
}
