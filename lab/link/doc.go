// Package link is slowstart's link emulator: it joins two TUN devices (the client's and
// the server's network namespaces) and emulates one path per direction with propagation
// delay and jitter, a bottleneck of fixed rate or a mahimahi delivery trace, the queue in
// front of that bottleneck, random loss (Bernoulli or Gilbert-Elliott, seeded), and the
// loss of exactly the first packets of a kind (the first SYN).
//
// Each direction is a Pipeline of small stages, each a type with one job behind the Stage
// interface (Delay, Rate, Trace, Loss, Drop; Queue is the buffer of Rate and Trace). Stages are
// driven by an explicit clock (nanoseconds passed in by the caller), so tests run them
// against a fake clock and the same seed always gives the same drops. Run is the live
// front end: it reads batches of packets from two Devices (NewTUN wraps a TUN file
// descriptor), feeds each direction's pipeline and writes packets out at their time.
//
// Units: times are int64 nanoseconds (names end in Ns), rates are bits per second, sizes
// are bytes of IP packet (a TUN device has no link-layer header). Package units reads
// and writes them as a command line does.
//
// The package is not for building the topology: creating namespaces, TUN devices,
// addresses and routes belongs to package lab/netlab, which hands Run configured devices.
// It does not look inside packets (no per-flow queues, no AQM such as CoDel), except
// for the TCP flags a Drop stage matches.
package link
