// Package quicprobe is the probe's HTTP/3 side: how a browser that speaks HTTP/3
// comes to use it for a page (an Alt-Svc header of the response over TCP, or the
// site's DNS HTTPS record: Choose, with both connections reported), and the active
// measurement of a server's initial window over QUIC (Exact, the counterpart of
// probe/exact for TCP).
//
// The HTTP/3 client itself, which records its own datagrams and reads them through
// the QUIC analysis, is package h3client, shared with the lab; Exact steers its
// socket through h3client.Hooks. It is not the TCP probe (package probe).
package quicprobe
