package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// ServeHTTP3 serves /bytes/N over HTTP/3 (quic-go) on pc until ctx is done, with the
// certificate of cfg (TLS 1.3, as QUIC requires; cfg.TLSVersion is not used). The
// server sends Alt-Svc on nothing: it is reached on UDP directly.
//
// What quic-go lets a server choose, and what it does not: the certificate chain, the
// size of its first packets (InitialPacketBytes) and path MTU discovery can be set; the
// initial congestion window cannot (quic-go fixes it at 32 packets of 1,280 bytes,
// 40,960 bytes, in internal/congestion), and neither can the anti-amplification factor
// (3, RFC 9000 §8.1) or pacing. The window of a lab HTTP/3 server is therefore always
// quic-go's; the lab's IW setting applies to TCP only.
func ServeHTTP3(ctx context.Context, pc net.PacketConn, cfg Config) error {
	if len(cfg.Certificate.Certificate) == 0 || cfg.Certificate.PrivateKey == nil {
		return errors.New("serving HTTP/3 needs Config.Certificate: make one with NewChain")
	}
	tlsConfig := &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{cfg.Certificate},
		SessionTicketsDisabled: true,
		NextProtos:             []string{http3.NextProtoH3},
	}
	if !cfg.PostQuantumKeyExchange {
		tlsConfig.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}
	}
	quicConfig := &quicgo.Config{MaxIdleTimeout: 30 * time.Second}
	if cfg.InitialPacketBytes > 0 {
		quicConfig.InitialPacketSize = uint16(cfg.InitialPacketBytes)
	}
	h := Handler(Config{ThinkAfterBytes: cfg.ThinkAfterBytes, ThinkDuration: cfg.ThinkDuration, DisableCork: true, Logger: cfg.Logger})
	srv := &http3.Server{
		Handler:    h,
		TLSConfig:  http3.ConfigureTLSConfig(tlsConfig),
		QUICConfig: quicConfig,
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(pc)
	if ctx.Err() != nil && (err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, quicgo.ErrServerClosed) || errors.Is(err, net.ErrClosed)) {
		return nil
	}
	return fmt.Errorf("serving HTTP/3 on %s: %w", pc.LocalAddr(), err)
}
