// Package quic reads QUIC version 1 packets (RFC 9000, RFC 9001) as they travel in UDP
// datagrams: long and short headers, coalesced packets, header and packet protection
// removal, and the frames inside (CRYPTO, STREAM, ACK with its ranges, PADDING, PING,
// NEW_CONNECTION_ID, HANDSHAKE_DONE, CONNECTION_CLOSE and the others of RFC 9000 §19).
//
// Initial packets are decrypted without any key: their secrets come from the
// Destination Connection ID of the client's first Initial (RFC 9001 §5.2). Handshake
// and 1-RTT packets need the TLS secrets of a key log (package keylog), found by the
// client random of the ClientHello carried in the client's Initial CRYPTO frames. A
// Conn follows one connection's datagrams in order and hands back its packets with
// their frames.
//
// It is for reading packets that were captured or traced; it does not send, does not
// keep connection state beyond what decryption needs, and does not infer rounds or
// windows (package quicanalysis does). QUIC version 2 (RFC 9369), 0-RTT keys and
// Retry integrity tags are not handled: such packets are reported with their headers
// only.
package quic
