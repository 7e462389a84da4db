package h3client

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	quicgo "github.com/quic-go/quic-go"
)

// handshakeHint says what to do about a TLS handshake the server refused when
// the name the client gave it was an IP address: no server name (SNI) is sent
// then (RFC 6066), and a server that picks its certificate by name has none to
// offer (Caddy answers with an internal_error alert, CRYPTO_ERROR 0x150).
func handshakeHint(err error, serverName string) string {
	var te *quicgo.TransportError
	if !errors.As(err, &te) || !te.ErrorCode.IsCryptoError() {
		return ""
	}
	if _, ipErr := netip.ParseAddr(strings.Trim(serverName, "[]")); ipErr != nil {
		return ""
	}
	return fmt.Sprintf(" (the TLS handshake failed: the URL names the address %s, so the handshake carried no server name (SNI), and a server that picks its certificate by name has none to offer; give the name with --sni NAME, or a URL with the name and --resolve NAME:PORT:%s)", serverName, serverName)
}
