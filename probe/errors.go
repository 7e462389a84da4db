package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/slowstart/slowstart/internal/failure"
)

// Kinds of failure, so that callers can tell them apart (and map them to exit codes)
// without parsing messages.
const (
	KindURL        = failure.KindURL
	KindDNS        = "dns"         // the name did not resolve
	KindRefused    = "refused"     // the server refused the connection (RST to the SYN)
	KindUnreach    = "unreachable" // no route to the server, or the network is down
	KindTimeout    = "timeout"     // the server did not answer in time
	KindTLS        = "tls"         // the TLS handshake failed (untrusted certificate, alert, version)
	KindHTTP       = "http"        // the server broke the HTTP exchange
	KindRedirect   = "redirect"    // too many redirects (a loop)
	KindPermission = failure.KindPermission
	KindInterface  = failure.KindInterface
	KindCapture    = failure.KindCapture
	// KindStatus: the page answered with an HTTP status of 400 or more. It was
	// measured (the Result is whole), but it is not a success: the rounds are
	// those of an error answer, not of the page.
	KindStatus = "status"
)

// Error is a probe failure of a known kind (package failure: the clients' one
// error type). Its message is one line that says what failed and what to do.
type Error = failure.Error

// KindOf returns the kind of a failure (a probe's, or another client's), or ""
// for other errors.
func KindOf(err error) string { return failure.KindOf(err) }

// classifyFetchError turns what net/http returned for target into an Error of the
// right kind, with a message that says what to do.
func classifyFetchError(ctx context.Context, target string, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	var dnsErr *net.DNSError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var verifyErr *tls.CertificateVerificationError
	var alert tls.AlertError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return &Error{Kind: KindDNS, Err: fmt.Errorf("%s: the name %s does not resolve: check the spelling, or give its address with --resolve", target, dnsErr.Name)}
		}
		return &Error{Kind: KindDNS, Err: fmt.Errorf("%s: looking up %s failed: %v", target, dnsErr.Name, dnsErr.Err)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &Error{Kind: KindRefused, Err: fmt.Errorf("%s: the server refused the connection: nothing listens on that port", target)}
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return &Error{Kind: KindUnreach, Err: fmt.Errorf("%s: no route to the server: check the address and the network (or try the other IP version)", target)}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return &Error{Kind: KindTimeout, Err: fmt.Errorf("%s: the server did not answer in time: raise --timeout, or check that it is up", target)}
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &unknownAuthority), errors.As(err, &hostnameErr), errors.As(err, &invalidCert), errors.As(err, &verifyErr):
		return &Error{Kind: KindTLS, Err: fmt.Errorf("%s: the server's certificate is not trusted (%v): use --insecure to probe anyway", target, rootCause(err))}
	case errors.As(err, &alert), errors.As(err, &recordErr):
		return &Error{Kind: KindTLS, Err: fmt.Errorf("%s: the TLS handshake failed (%v): check --tls and that the port speaks TLS", target, rootCause(err))}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &Error{Kind: KindHTTP, Err: fmt.Errorf("%s: the server reset the connection: %v", target, rootCause(err))}
	}
	return &Error{Kind: KindHTTP, Err: fmt.Errorf("%s: %v", target, err)}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// rootCause unwraps err down to its innermost message, which is the one that says
// what happened without net/http's and net's prefixes.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		if _, ok := next.(syscall.Errno); ok {
			return err
		}
		err = next
	}
}
