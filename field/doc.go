// Package field measures what real users' first loads cost a Linux server:
// for every new TCP connection to the chosen local ports it reads, from the
// server's own kernel, the handshake round-trip time, the client's network,
// the first response's rounds (bytes, and the kernel's congestion window at
// each), what limited round 1 (the congestion window, the client's receive
// window, or the application), the round trips and milliseconds the response
// took, and what another initial window would have saved on it (package
// model, on the connection's own bytes and RTT). It aggregates those over time
// and by client network (a prefix, or an autonomous system from a pfx2as
// file): histograms, the share of window-limited first responses, and the
// savings of IW N with bootstrap confidence intervals; it serves them as
// Prometheus metrics, writes them to a rolling SQLite store, and reads the
// store back for `field report`, `compare` and `view`.
//
// The source is the kernel's TCP tracepoints (package ktcp, eBPF): nothing on
// the server changes, nothing is captured, and the cost is a few hundred
// nanoseconds per event. Where BPF is unavailable it falls back to a packet
// capture filtered in the kernel on the ports (packages capture and live),
// and says why in one line.
//
// Memory is bounded however many connections there are: a connection is
// followed only until its first response is over (a table of at most
// Options.MaxConns open connections; the ones it cannot hold are counted), and
// the aggregates keep fixed histograms and a fixed-size sample per network, for
// at most Options.MaxNetworks networks. Every event the kernel could not hand
// over, every connection not followed, is counted and said, never dropped
// silently.
//
// It is not a packet analyzer (package analysis is), and it knows nothing of
// TLS or HTTP: a "response" is what the server sent between the client's first
// flight of data and its next one (docs/field.md says what that means over
// TLS). It changes nothing on the server: `slowstart tune` does, and leaves a
// mark that field reads (tune.Mark) so that a store shows the change.
package field
