package tune

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Route tables the kernel names.
const (
	TableDefault = 253
	TableMain    = 254
	TableLocal   = 255
)

// rtmsgBytes is the size of struct rtmsg, the header of a route message.
const rtmsgBytes = unix.SizeofRtMsg

// Attribute numbers this package handles that x/sys/unix may lack on some
// platforms; the values are the kernel's (include/uapi/linux/rtnetlink.h).
const (
	rtaPref    = 20
	rtaExpires = 23
	rtaNHID    = 30
	rtaxCCAlgo = 16 // RTAX_CC_ALGO: a string
	// nlaTypeMask clears NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type.
	nlaTypeMask = 0x3fff
)

// metricNames are the RTAX_* metrics as ip(8) names them, indexed by number.
var metricNames = map[int]string{
	2: "mtu", 3: "window", 4: "rtt", 5: "rttvar", 6: "ssthresh", 7: "cwnd",
	8: "advmss", 9: "reordering", 10: "hoplimit", 11: "initcwnd", 12: "features",
	13: "rto_min", 14: "initrwnd", 15: "quickack", 16: "congctl", 17: "fastopen_no_cookie",
}

// Metric is one route metric (RTAX_*).
type Metric struct {
	Name   string `json:"name"`
	Number int    `json:"number"`
	// Value is the number as the kernel keeps it (rtt in 1/8 ms, rttvar in
	// 1/4 ms, rto_min in ms); Text is the congestion control's name for congctl.
	Value  uint32 `json:"value,omitempty"`
	Text   string `json:"text,omitempty"`
	Locked bool   `json:"locked,omitempty"`
}

// Nexthop is one path of a multipath route.
type Nexthop struct {
	Gateway string `json:"gateway,omitempty"`
	Device  string `json:"device,omitempty"`
	Weight  int    `json:"weight"`
	Flags   uint8  `json:"flags,omitempty"`
}

// Route is one route as the kernel dumped it: the fields people read, and the
// netlink message itself, which is what Apply and Revert write back.
type Route struct {
	Family      string    `json:"family"` // "inet" or "inet6"
	Table       uint32    `json:"table"`
	Type        string    `json:"type"` // unicast, local, broadcast, blackhole, ...
	Destination string    `json:"destination"`
	Source      string    `json:"source_prefix,omitempty"` // from (IPv6 source routing)
	TOS         uint8     `json:"tos,omitempty"`
	Gateway     string    `json:"gateway,omitempty"`
	Device      string    `json:"device,omitempty"`
	Protocol    string    `json:"protocol"`
	Scope       string    `json:"scope"`
	PrefSrc     string    `json:"src,omitempty"`
	Priority    uint32    `json:"metric"`
	HasPriority bool      `json:"-"`
	Pref        string    `json:"pref,omitempty"` // IPv6 router preference
	NexthopID   uint32    `json:"nhid,omitempty"`
	Onlink      bool      `json:"onlink,omitempty"`
	Multipath   []Nexthop `json:"multipath,omitempty"`
	Metrics     []Metric  `json:"metrics"`

	// Message is the route's netlink message (struct rtmsg and its attributes)
	// as the kernel dumped it.
	Message []byte `json:"-"`
	dst     netip.Prefix
}

// rawAttr is one netlink attribute: its type (flags cleared) and value.
type rawAttr struct {
	typ   uint16
	flags uint16 // NLA_F_NESTED, NLA_F_NET_BYTEORDER
	value []byte
}

func parseAttrs(b []byte) ([]rawAttr, error) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return nil, err
	}
	out := make([]rawAttr, len(attrs))
	for i, a := range attrs {
		out[i] = rawAttr{typ: a.Attr.Type & nlaTypeMask, flags: a.Attr.Type &^ nlaTypeMask, value: a.Value}
	}
	return out, nil
}

func serializeAttrs(attrs []rawAttr) []byte {
	var b []byte
	for _, a := range attrs {
		b = append(b, nl.NewRtAttr(int(a.typ|a.flags), a.value).Serialize()...)
	}
	return b
}

func findAttr(attrs []rawAttr, typ uint16) (rawAttr, bool) {
	for _, a := range attrs {
		if a.typ == typ {
			return a, true
		}
	}
	return rawAttr{}, false
}

// header reads the struct rtmsg at the start of a route message.
type header struct {
	family, dstLen, srcLen, tos, table, protocol, scope, typ uint8
	flags                                                    uint32
}

func parseHeader(msg []byte) (header, error) {
	if len(msg) < rtmsgBytes {
		return header{}, fmt.Errorf("route message of %d bytes is shorter than its header", len(msg))
	}
	return header{msg[0], msg[1], msg[2], msg[3], msg[4], msg[5], msg[6], msg[7], binary.NativeEndian.Uint32(msg[8:12])}, nil
}

// familyName is "inet" or "inet6".
func familyName(family uint8) string {
	if family == unix.AF_INET6 {
		return "inet6"
	}
	return "inet"
}

var protocolNames = map[uint8]string{
	0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 8: "gated", 9: "ra",
	10: "mrt", 11: "zebra", 12: "bird", 13: "dnrouted", 14: "xorp", 15: "ntk", 16: "dhcp",
	18: "keepalived", 42: "babel", 99: "openr", 186: "bgp", 187: "isis", 188: "ospf",
	189: "rip", 192: "eigrp",
}

var scopeNames = map[uint8]string{0: "global", 200: "site", 253: "link", 254: "host", 255: "nowhere"}

var typeNames = map[uint8]string{
	0: "unspec", 1: "unicast", 2: "local", 3: "broadcast", 4: "anycast", 5: "multicast",
	6: "blackhole", 7: "unreachable", 8: "prohibit", 9: "throw", 10: "nat",
}

var prefNames = map[uint8]string{0: "medium", 1: "high", 3: "low"}

func nameOr(names map[uint8]string, v uint8) string {
	if n, ok := names[v]; ok {
		return n
	}
	return strconv.Itoa(int(v))
}

// TableName is "main", "local", "default" or the table's number.
func TableName(table uint32) string {
	switch table {
	case TableMain:
		return "main"
	case TableLocal:
		return "local"
	case TableDefault:
		return "default"
	}
	return strconv.FormatUint(uint64(table), 10)
}

func addrFrom(b []byte) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(b)
	return a.Unmap(), ok
}

// parseRoute decodes a dumped route message; names maps interface indexes to names.
func parseRoute(msg []byte, names map[int]string) (Route, error) {
	h, err := parseHeader(msg)
	if err != nil {
		return Route{}, err
	}
	attrs, err := parseAttrs(msg[rtmsgBytes:])
	if err != nil {
		return Route{}, fmt.Errorf("parse route attributes: %w", err)
	}
	r := Route{
		Family:   familyName(h.family),
		Table:    uint32(h.table),
		Type:     nameOr(typeNames, h.typ),
		TOS:      h.tos,
		Protocol: nameOr(protocolNames, h.protocol),
		Scope:    nameOr(scopeNames, h.scope),
		Onlink:   h.flags&unix.RTNH_F_ONLINK != 0,
		Message:  slices.Clone(msg),
	}
	bits := 32
	if h.family == unix.AF_INET6 {
		bits = 128
	}
	zero := netip.IPv4Unspecified()
	if bits == 128 {
		zero = netip.IPv6Unspecified()
	}
	r.dst = netip.PrefixFrom(zero, 0)
	device := func(index int) string {
		if n, ok := names[index]; ok {
			return n
		}
		return "if" + strconv.Itoa(index)
	}
	var lock uint32
	for _, a := range attrs {
		switch a.typ {
		case unix.RTA_DST:
			if addr, ok := addrFrom(a.value); ok {
				r.dst = netip.PrefixFrom(addr, int(h.dstLen))
			}
		case unix.RTA_SRC:
			if addr, ok := addrFrom(a.value); ok {
				r.Source = netip.PrefixFrom(addr, int(h.srcLen)).String()
			}
		case unix.RTA_GATEWAY:
			if addr, ok := addrFrom(a.value); ok {
				r.Gateway = addr.String()
			}
		case unix.RTA_OIF:
			if len(a.value) >= 4 {
				r.Device = device(int(binary.NativeEndian.Uint32(a.value)))
			}
		case unix.RTA_PREFSRC:
			if addr, ok := addrFrom(a.value); ok {
				r.PrefSrc = addr.String()
			}
		case unix.RTA_PRIORITY:
			if len(a.value) >= 4 {
				r.Priority, r.HasPriority = binary.NativeEndian.Uint32(a.value), true
			}
		case unix.RTA_TABLE:
			if len(a.value) >= 4 {
				r.Table = binary.NativeEndian.Uint32(a.value)
			}
		case rtaPref:
			if len(a.value) >= 1 {
				r.Pref = nameOr(prefNames, a.value[0])
			}
		case rtaNHID:
			if len(a.value) >= 4 {
				r.NexthopID = binary.NativeEndian.Uint32(a.value)
			}
		case unix.RTA_MULTIPATH:
			r.Multipath = parseMultipath(a.value, device)
		case unix.RTA_METRICS:
			metrics, err := parseAttrs(a.value)
			if err != nil {
				return Route{}, fmt.Errorf("parse route metrics: %w", err)
			}
			for _, m := range metrics {
				if m.typ == unix.RTAX_LOCK {
					if len(m.value) >= 4 {
						lock = binary.NativeEndian.Uint32(m.value)
					}
					continue
				}
				metric := Metric{Number: int(m.typ), Name: metricNames[int(m.typ)]}
				if metric.Name == "" {
					metric.Name = "metric" + strconv.Itoa(int(m.typ))
				}
				if m.typ == rtaxCCAlgo {
					metric.Text = strings.TrimRight(string(m.value), "\x00")
				} else if len(m.value) >= 4 {
					metric.Value = binary.NativeEndian.Uint32(m.value)
				}
				r.Metrics = append(r.Metrics, metric)
			}
		}
	}
	for i := range r.Metrics {
		if n := r.Metrics[i].Number; n < 32 && lock&(1<<n) != 0 {
			r.Metrics[i].Locked = true
		}
	}
	if r.dst.Bits() == 0 {
		r.Destination = "default"
	} else {
		r.Destination = r.dst.String()
	}
	if r.Metrics == nil {
		r.Metrics = []Metric{}
	}
	return r, nil
}

func parseMultipath(b []byte, device func(int) string) []Nexthop {
	var hops []Nexthop
	for len(b) >= unix.SizeofRtNexthop {
		length := int(binary.NativeEndian.Uint16(b[0:2]))
		if length < unix.SizeofRtNexthop || length > len(b) {
			break
		}
		hop := Nexthop{Flags: b[2], Weight: int(b[3]) + 1, Device: device(int(binary.NativeEndian.Uint32(b[4:8])))}
		if attrs, err := parseAttrs(b[unix.SizeofRtNexthop:length]); err == nil {
			if gw, ok := findAttr(attrs, unix.RTA_GATEWAY); ok {
				if addr, ok := addrFrom(gw.value); ok {
					hop.Gateway = addr.String()
				}
			}
		}
		hops = append(hops, hop)
		b = b[rtaAlign(length):]
	}
	return hops
}

func rtaAlign(n int) int { return (n + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1) }

// Metric returns the value of the named metric and whether the route has it.
func (r Route) Metric(name string) (uint32, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// IsDefault reports whether the route's destination is 0.0.0.0/0 or ::/0.
func (r Route) IsDefault() bool { return r.dst.Bits() == 0 }

// Prefix is the route's destination.
func (r Route) Prefix() netip.Prefix { return r.dst }

// Key identifies the route in its table the way the kernel matches a
// replacement: family, table, destination, source prefix, TOS and priority.
func (r Route) Key() string {
	return fmt.Sprintf("%s table %d %s from %s tos %d metric %d", r.Family, r.Table, r.dst, r.Source, r.TOS, r.Priority)
}

// String renders the route as `ip -d route show` would, in short.
func (r Route) String() string {
	return strings.Join(r.words(true), " ")
}

// words renders the route in ip(8) syntax; show adds the words ip(8) shows but
// does not take (none at present besides the type, always given).
func (r Route) words(show bool) []string {
	var w []string
	if r.Type != "unicast" || show {
		w = append(w, r.Type)
	}
	w = append(w, r.Destination)
	if r.Source != "" {
		w = append(w, "from", r.Source)
	}
	if r.TOS != 0 {
		w = append(w, "tos", fmt.Sprintf("0x%x", r.TOS))
	}
	if r.NexthopID != 0 {
		w = append(w, "nhid", strconv.FormatUint(uint64(r.NexthopID), 10))
	} else if len(r.Multipath) == 0 {
		if r.Gateway != "" {
			w = append(w, "via", r.Gateway)
		}
		if r.Device != "" {
			w = append(w, "dev", r.Device)
		}
	}
	w = append(w, "table", TableName(r.Table), "proto", r.Protocol, "scope", r.Scope)
	if r.PrefSrc != "" {
		w = append(w, "src", r.PrefSrc)
	}
	if r.HasPriority {
		w = append(w, "metric", strconv.FormatUint(uint64(r.Priority), 10))
	}
	if r.Onlink {
		w = append(w, "onlink")
	}
	if r.Pref != "" {
		w = append(w, "pref", r.Pref)
	}
	for _, m := range r.Metrics {
		w = append(w, m.Name)
		if m.Locked {
			w = append(w, "lock")
		}
		switch m.Name {
		case "congctl":
			w = append(w, m.Text)
		case "rtt":
			w = append(w, fmt.Sprintf("%gms", float64(m.Value)/8))
		case "rttvar":
			w = append(w, fmt.Sprintf("%gms", float64(m.Value)/4))
		case "rto_min":
			w = append(w, fmt.Sprintf("%dms", m.Value))
		case "features":
			if m.Value&1 != 0 {
				w[len(w)-1] = "features"
				w = append(w, "ecn")
			} else {
				w = w[:len(w)-1]
			}
		default:
			w = append(w, strconv.FormatUint(uint64(m.Value), 10))
		}
	}
	if r.NexthopID == 0 {
		for _, hop := range r.Multipath {
			w = append(w, "nexthop")
			if hop.Gateway != "" {
				w = append(w, "via", hop.Gateway)
			}
			w = append(w, "dev", hop.Device, "weight", strconv.Itoa(hop.Weight))
			if hop.Flags&unix.RTNH_F_ONLINK != 0 {
				w = append(w, "onlink")
			}
		}
	}
	return w
}

// IPCommand is the ip(8) command line that sets the route to this state:
// verb is "change" or "replace".
func (r Route) IPCommand(verb string) string {
	family := "ip"
	if r.Family == "inet6" {
		family = "ip -6"
	}
	return family + " route " + verb + " " + strings.Join(r.words(false), " ")
}

// Flags the kernel accepts in a request; the others (dead, linkdown, offload,
// cloned, ...) are state it reports and refuses to be given.
const requestFlagsMask = unix.RTNH_F_ONLINK

// replaceMessage turns a dumped route message into one the kernel takes as a
// replacement request, with setMetrics applied to its metrics (nil: unchanged).
// The header's state flags are cleared, cached information is dropped (an
// IPv6 route's remaining lifetime becomes RTA_EXPIRES) and a route that uses a
// nexthop object keeps only the object's id.
func replaceMessage(msg []byte, setMetrics map[uint16]uint32) ([]byte, error) {
	h, err := parseHeader(msg)
	if err != nil {
		return nil, err
	}
	attrs, err := parseAttrs(msg[rtmsgBytes:])
	if err != nil {
		return nil, fmt.Errorf("parse route attributes: %w", err)
	}
	_, hasNHID := findAttr(attrs, rtaNHID)
	var out []rawAttr
	haveMetrics := false
	for _, a := range attrs {
		switch a.typ {
		case unix.RTA_CACHEINFO:
			if h.family == unix.AF_INET6 && len(a.value) >= 12 {
				// struct rta_cacheinfo: clntref, lastuse, expires (clock ticks of 1/100 s).
				if expires := int32(binary.NativeEndian.Uint32(a.value[8:12])); expires > 0 {
					seconds := uint32((expires + 99) / 100)
					out = append(out, rawAttr{typ: rtaExpires, value: nl.Uint32Attr(seconds)})
				}
			}
			continue
		case unix.RTA_OIF, unix.RTA_GATEWAY, unix.RTA_MULTIPATH, unix.RTA_VIA, unix.RTA_FLOW,
			unix.RTA_ENCAP, unix.RTA_ENCAP_TYPE, unix.RTA_NEWDST:
			if hasNHID {
				continue
			}
			if a.typ == unix.RTA_MULTIPATH {
				a.value = cleanMultipath(a.value)
			}
		case unix.RTA_METRICS:
			haveMetrics = true
			if setMetrics != nil {
				value, err := withMetrics(a.value, setMetrics)
				if err != nil {
					return nil, err
				}
				a.value = value
			}
		}
		out = append(out, a)
	}
	if !haveMetrics && len(setMetrics) > 0 {
		value, err := withMetrics(nil, setMetrics)
		if err != nil {
			return nil, err
		}
		out = append(out, rawAttr{typ: unix.RTA_METRICS, value: value})
	}
	b := slices.Clone(msg[:rtmsgBytes])
	binary.NativeEndian.PutUint32(b[8:12], h.flags&requestFlagsMask)
	return append(b, serializeAttrs(out)...), nil
}

// withLifetimeOf gives a replacement request the remaining lifetime (RTA_EXPIRES)
// of the dumped route message from, less elapsed; a route from that does not
// expire leaves the request as it is. A lifetime used up is one second, the least
// the kernel takes.
func withLifetimeOf(request, from []byte, elapsed time.Duration) []byte {
	fromAttrs, err := parseAttrs(from[rtmsgBytes:])
	if err != nil {
		return request
	}
	a, ok := findAttr(fromAttrs, unix.RTA_CACHEINFO)
	if !ok || len(a.value) < 12 {
		return request
	}
	// struct rta_cacheinfo: clntref, lastuse, expires (clock ticks of 1/100 s).
	expires := time.Duration(int32(binary.NativeEndian.Uint32(a.value[8:12]))) * 10 * time.Millisecond
	if expires <= 0 {
		return request
	}
	left := max(expires-elapsed, time.Second)
	attrs, err := parseAttrs(request[rtmsgBytes:])
	if err != nil {
		return request
	}
	attrs = slices.DeleteFunc(attrs, func(a rawAttr) bool { return a.typ == rtaExpires })
	attrs = append(attrs, rawAttr{typ: rtaExpires, value: nl.Uint32Attr(uint32((left + time.Second - 1) / time.Second))})
	return append(slices.Clone(request[:rtmsgBytes]), serializeAttrs(attrs)...)
}

// cleanMultipath clears the state flags of every nexthop.
func cleanMultipath(b []byte) []byte {
	b = slices.Clone(b)
	for off := 0; off+unix.SizeofRtNexthop <= len(b); {
		length := int(binary.NativeEndian.Uint16(b[off : off+2]))
		if length < unix.SizeofRtNexthop {
			break
		}
		b[off+2] &= requestFlagsMask
		off += rtaAlign(length)
	}
	return b
}

// withMetrics returns the RTA_METRICS value with each metric of set given its
// value (added in number order when missing); every other metric and the lock
// bits stay.
func withMetrics(value []byte, set map[uint16]uint32) ([]byte, error) {
	metrics, err := parseAttrs(value)
	if err != nil {
		return nil, fmt.Errorf("parse route metrics: %w", err)
	}
	done := map[uint16]bool{}
	for i, m := range metrics {
		if v, ok := set[m.typ]; ok {
			metrics[i].value = nl.Uint32Attr(v)
			done[m.typ] = true
		}
	}
	for typ, v := range set {
		if !done[typ] {
			metrics = append(metrics, rawAttr{typ: typ, value: nl.Uint32Attr(v)})
		}
	}
	slices.SortStableFunc(metrics, func(a, b rawAttr) int { return int(a.typ) - int(b.typ) })
	return serializeAttrs(metrics), nil
}

// canonical is a route message reduced to what a replacement request sets, so
// that two states of a route compare equal exactly when a replacement would
// change nothing.
func canonical(msg []byte) ([]byte, error) {
	b, err := replaceMessage(msg, nil)
	if err != nil {
		return nil, err
	}
	attrs, err := parseAttrs(b[rtmsgBytes:])
	if err != nil {
		return nil, err
	}
	// The remaining lifetime changes every second: not part of the state.
	attrs = slices.DeleteFunc(attrs, func(a rawAttr) bool { return a.typ == rtaExpires })
	for i, a := range attrs {
		if a.typ == unix.RTA_METRICS {
			metrics, err := parseAttrs(a.value)
			if err != nil {
				return nil, err
			}
			slices.SortStableFunc(metrics, func(a, b rawAttr) int { return int(a.typ) - int(b.typ) })
			attrs[i].value = serializeAttrs(metrics)
		}
	}
	slices.SortStableFunc(attrs, func(a, b rawAttr) int { return int(a.typ) - int(b.typ) })
	return append(b[:rtmsgBytes:rtmsgBytes], serializeAttrs(attrs)...), nil
}

// sameState reports whether two messages describe the same route state.
func sameState(a, b []byte) (bool, error) {
	ca, err := canonical(a)
	if err != nil {
		return false, err
	}
	cb, err := canonical(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}
