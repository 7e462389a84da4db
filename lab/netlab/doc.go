// Package netlab builds the network topology of one lab trial: a client and a
// server network namespace, each holding one TUN device whose other end is a file
// in this process, with addresses, routes carrying the initcwnd and initrwnd
// metrics, and the TCP sysctls a trial sets. Everything is made through netlink,
// setns and /proc/sys, and nothing is created in the host's network namespace.
//
// A trial looks like this:
//
//	client namespace                    this process                  server namespace
//	198.18.x.1 ── tun0 ◄──► Trial.ClientTUN ◄─(link emulator)─► Trial.ServerTUN ◄──► tun0 ── 198.18.x.2
//	route to server: initrwnd                                     route to client: initcwnd
//
// The package does not move packets between the two TUN files: that is the link
// emulator's job (package lab/link), and a trial carries no traffic until something
// copies packets between ClientTUN and ServerTUN. It does not start servers or
// clients either; it gives the means to run them inside a namespace: Trial.Do,
// Trial.Listen, Trial.DialContext, Trial.Command and Trial.Start.
//
// Namespaces are named "slowstart-<pid>-<start>-<n>-c" and "-s" after the process
// that made them (its PID and start time) and are bind-mounted under /run/netns as
// `ip netns add` does, so `ip netns exec` and `ip netns list` see them. Each
// carries its owner's marker (Owner: PID and start time, as the alias of its lo),
// as do the temporary directories of MakeTempDir (a marker file; named
// slowstart-<pid>-<start>-<what>-<n>). Trial.Close removes them; CloseAll and
// HandleSignals remove every live trial of the process (on exit, Ctrl-C,
// SIGTERM); Clean removes the leftovers of a process that died without closing
// its trials, and never what carries no marker, whatever its name, except an
// empty mount point or directory whose name identifies a process that is gone
// (what a run killed before it could mark it leaves).
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and Linux.
package netlab
