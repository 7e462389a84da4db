package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Sysctls lists the sysctls that decide a new connection's first rounds, as
// names under /proc/sys.
var Sysctls = []string{
	"net.ipv4.tcp_slow_start_after_idle",
	"net.ipv4.tcp_no_metrics_save",
	"net.ipv4.tcp_congestion_control",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
	"net.ipv4.tcp_min_snd_mss",
	"net.ipv4.tcp_allowed_congestion_control",
}

// Sysctl names Apply may set (ApplyOptions.Sysctls), with the values each takes.
const (
	SysctlSlowStartAfterIdle = "net.ipv4.tcp_slow_start_after_idle"
	SysctlNoMetricsSave      = "net.ipv4.tcp_no_metrics_save"
)

// settableSysctls are the sysctls Apply may set, with their allowed values.
var settableSysctls = map[string][]string{
	SysctlSlowStartAfterIdle: {"0", "1"},
	SysctlNoMetricsSave:      {"0", "1"},
}

// Sysctl is one sysctl's value ("" and Error when unreadable).
type Sysctl struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Error string `json:"error,omitempty"`
}

// Schema names the JSON of tune show, apply and revert (docs/schemas/tune.json);
// their "command" field tells them apart.
const Schema = "slowstart.tune/v1"

// ShowOutput is what tune show --json prints: the state and the advice.
type ShowOutput struct {
	Schema  string `json:"schema"`  // Schema
	Command string `json:"command"` // "show"
	*State
	Recommendations []Recommendation `json:"recommendations"`
}

// NewShowOutput is the output of tune show.
func NewShowOutput(state *State, recs []Recommendation) ShowOutput {
	if recs == nil {
		recs = []Recommendation{}
	}
	return ShowOutput{Schema: Schema, Command: "show", State: state, Recommendations: recs}
}

// State is what Read found in one network namespace.
type State struct {
	Netns   string   `json:"netns,omitempty"` // "" for the process's own
	Routes  []Route  `json:"routes"`
	Sysctls []Sysctl `json:"sysctls"`
}

// Sysctl returns the named sysctl's value, or "" when it was not read.
func (s *State) Sysctl(name string) string {
	for _, v := range s.Sysctls {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

// Read lists every route of every table (IPv4, then IPv6, in the kernel's
// order) and the Sysctls of the named network namespace ("" for the
// process's own).
func Read(netnsName string) (*State, error) {
	state := &State{Netns: netnsName}
	err := inNetns(netnsName, func() error {
		routes, _, err := dumpRoutes()
		if err != nil {
			return err
		}
		state.Routes = routes
		for _, name := range Sysctls {
			value, err := readSysctl(name)
			s := Sysctl{Name: name, Value: value}
			if err != nil {
				s.Error = err.Error()
			}
			state.Sysctls = append(state.Sysctls, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return state, nil
}

// dumpRoutes dumps the routes of the calling thread's network namespace.
func dumpRoutes() ([]Route, map[int]string, error) {
	names := map[int]string{}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, nil, fmt.Errorf("list network interfaces: %w", err)
	}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var routes []Route
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		msgs, err := dumpRouteMessages(family)
		if err != nil {
			return nil, nil, err
		}
		for _, msg := range msgs {
			h, err := parseHeader(msg)
			if err != nil {
				return nil, nil, err
			}
			if h.flags&unix.RTM_F_CLONED != 0 || h.family != family {
				continue // cached exceptions are not routes one configures
			}
			r, err := parseRoute(msg, names)
			if err != nil {
				return nil, nil, err
			}
			routes = append(routes, r)
		}
	}
	return routes, names, nil
}

// dumpRouteMessages returns every route message of one family, all tables.
func dumpRouteMessages(family uint8) ([][]byte, error) {
	for attempt := 0; ; attempt++ {
		req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
		msg := make([]byte, rtmsgBytes)
		msg[0] = family
		req.AddRawData(msg)
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE)
		if errors.Is(err, nl.ErrDumpInterrupted) && attempt < 5 {
			continue // the table changed during the dump: read it again
		}
		if err != nil {
			return nil, fmt.Errorf("dump %s routes: %w", familyName(family), err)
		}
		return msgs, nil
	}
}

// sendRoute sends one route request (RTM_NEWROUTE with flags) and waits for
// the kernel's answer.
func sendRoute(msg []byte, flags int) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWROUTE, flags|unix.NLM_F_ACK)
	req.AddRawData(msg)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// routeReplace is netlink's RouteReplace (RTM_NEWROUTE with NLM_F_CREATE |
// NLM_F_REPLACE) for a route given as its whole message.
func routeReplace(msg []byte) error {
	return sendRoute(msg, unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
}

// writeSysctl sets a sysctl of the calling thread's network namespace.
func writeSysctl(name, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	if _, err := f.WriteString(value + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("set %s=%s: %w", name, value, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("set %s=%s: %w", name, value, err)
	}
	return nil
}

// readSysctl reads a sysctl of the calling thread's network namespace.
func readSysctl(name string) (string, error) {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}
