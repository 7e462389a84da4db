// Package tune reads, changes and restores what decides a server's first round
// trips on Linux: the initcwnd and initrwnd metrics of its routes, and the TCP
// sysctls beside them (tcp_slow_start_after_idle, tcp_no_metrics_save, the
// congestion control, the buffer sizes).
//
// Read lists every route of every table, IPv4 and IPv6, with its metrics, and the
// sysctls, in the calling process's network namespace or in a named one. Recommend
// turns that state into advice with the saving predicted by model.Simulate. Apply
// sets initcwnd (and initrwnd) on chosen routes: it first writes a backup of the
// exact prior state of every route it will touch (the route's netlink message as
// the kernel dumped it, fsync'd, then renamed into place), then replaces each route
// with the same message carrying the new metrics, so every other attribute (table,
// protocol, scope, type, gateway, device, source, preference, the other metrics and
// their locks) stays as it was. Revert replaces the routes with the messages the
// backup recorded. Both are idempotent: a route already in the asked-for state is
// left alone.
//
// Routes are read and written through netlink (package
// github.com/vishvananda/netlink/nl), never by running or parsing ip(8).
// Besides routes, Apply sets only two sysctls, and only when asked
// (tcp_slow_start_after_idle, tcp_no_metrics_save); their prior values go into
// the same backup. It needs Linux, and root (CAP_NET_ADMIN) to change routes or
// sysctls or to enter another network namespace.
package tune
