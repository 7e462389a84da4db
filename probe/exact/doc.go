// Package exact measures a server's initial congestion window actively, the way
// TBIT, scamper's tbit and Rüth et al. (IMC 2017) do: it announces a small MSS in
// its SYN so that even a short answer spans many segments, stops acknowledging the
// server's data once the request (or the TLS ClientHello) is out, and counts the
// distinct sequence bytes the server sends before its first retransmission. Over
// HTTPS the window is read off the server's TLS handshake flight (ServerHello …
// Certificate …); with Options.AfterHandshake, off the HTTP response after a
// completed handshake instead.
//
// The kernel does the TCP handshake on an ordinary socket. Two nftables rules in
// a table of the package's own (named slowstart_exact_<pid>_<local port>) make
// the connection exact: one rewrites the MSS option of this connection's SYN, the
// other, added once the handshake is done, drops this connection's outgoing pure
// ACKs. No raw socket is opened; the server's packets are read with a live capture
// (package capture). The table is deleted at the end of every run, on error and on
// cancellation; Clean removes the tables of processes that died before they could.
//
// The package is for the measurement only: it does not render reports (see
// Result.InitialWindow for the Report's form) and does not parse flags. It needs
// Linux, root (CAP_NET_ADMIN and CAP_NET_RAW) and nf_tables.
package exact
