// Package ktcp follows TCP sockets from the Linux kernel: for each socket a
// Filter selects (local or remote ports, local addresses, network namespaces,
// IP version), it delivers what the kernel itself knows of the connection as
// it happens, through eBPF programs on the kernel's TCP tracepoints:
//
//   - tcp:tcp_probe, every segment an established socket receives, with the
//     socket's congestion window, slow start threshold, send and receive
//     windows, smoothed RTT, snd_una, snd_nxt and the application's write_seq
//     as they were when the segment arrived (before the kernel processed it);
//   - sock:inet_sock_set_state, every state change (SYN_RECV → ESTABLISHED →
//     ... → CLOSE), with the same snapshot of the socket;
//   - tcp:tcp_retransmit_skb, every retransmission;
//   - tcp:tcp_cong_state_set, every change of congestion state (Open,
//     Disorder, CWR, Recovery, Loss).
//
// Every event carries the socket's cookie, which ties one connection's events
// together, and a CLOCK_MONOTONIC timestamp that Tracer.UnixNs maps to the
// wall clock. docs/kernel.md says what each field means, why a server
// socket's window at its first tcp_probe is its initial window, and the limits.
//
// It is for knowing the truth about a Linux host's own connections: the lab
// checks what slowstart reads from packets against it, and a server can
// measure its real users' first loads with it. It is not a packet source (it
// sees no payload and no peer's view), it follows only the machine it runs on,
// and it needs Linux with BPF and BTF (root, or CAP_BPF and CAP_PERFMON); where
// those are missing Open returns an *UnavailableError that says why in one
// line, so that a caller can fall back to a packet capture.
//
// The programs are assembled at run time from the kernel's BTF (struct
// offsets included), instruction by instruction with cilium/ebpf's asm
// package: building slowstart needs no C compiler and ships no compiled
// object. They attach by tracepoint name (BTF tracepoints), so tracefs need
// not be mounted. The kernel filters before it writes anything, so other
// sockets' traffic costs a few instructions; events reach Read through a ring
// buffer of fixed size, and events lost to a full ring are counted
// (Stats.Lost), never dropped silently. Everything Open loads belongs to the
// process's file descriptors: Close releases it, and so does the kernel when
// the process ends, however it ends. Nothing on the system is changed.
package ktcp
