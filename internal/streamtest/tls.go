package streamtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"testing"
)

// TLSExchange runs one exchange between a crypto/tls client and server over any
// transport: both handshake (within ctx), the client writes request, the server
// reads it, answers with response in writes of at most chunk bytes (0: one write)
// and closes, and the client reads to the end. It fails t unless the client got
// the response whole, and returns both sides' connection states.
func TLSExchange(ctx context.Context, t testing.TB, client, server *tls.Conn, request, response []byte, chunk int) (clientState, serverState tls.ConnectionState) {
	t.Helper()
	if chunk <= 0 {
		chunk = max(len(response), 1)
	}
	serverDone := make(chan error, 1)
	go func() {
		serverDone <- func() error {
			defer server.Close()
			if err := server.HandshakeContext(ctx); err != nil {
				return fmt.Errorf("server handshake: %w", err)
			}
			got := make([]byte, len(request))
			if _, err := io.ReadFull(server, got); err != nil {
				return fmt.Errorf("server reading the request: %w", err)
			}
			for rest := response; len(rest) > 0; {
				n := min(chunk, len(rest))
				if _, err := server.Write(rest[:n]); err != nil {
					return fmt.Errorf("server writing the response: %w", err)
				}
				rest = rest[n:]
			}
			serverState = server.ConnectionState()
			return nil
		}()
	}()
	if err := client.HandshakeContext(ctx); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if _, err := client.Write(request); err != nil {
		t.Fatalf("client writing the request: %v", err)
	}
	received, err := io.ReadAll(client)
	if err != nil {
		t.Fatalf("client reading the response: %v", err)
	}
	if !bytes.Equal(received, response) {
		t.Fatalf("client received %d bytes, want the %d sent", len(received), len(response))
	}
	if err := <-serverDone; err != nil {
		t.Fatal(err)
	}
	clientState = client.ConnectionState()
	client.Close()
	return clientState, serverState
}
