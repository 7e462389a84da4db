package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/slowstart/slowstart/internal/localhttp"
	"github.com/slowstart/slowstart/report"
)

// servedCSP allows the page its own script, style and data, and nothing else.
const servedCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// HandlerOptions tune NewHandler.
type HandlerOptions struct {
	// AnyHost answers requests whatever their Host header. Without it only IP
	// addresses and "localhost" are accepted, which keeps a web page elsewhere from
	// reaching the server through a name that resolves to 127.0.0.1 (DNS rebinding).
	// Set it when listening on a public address reached by name.
	AnyHost bool
}

// NewHandler serves the view of rep: the page at "/", the embedded code and style
// under "/assets/", the Report at "/api/report". Every other path is 404.
func NewHandler(rep *report.Report, opts HandlerOptions) (http.Handler, error) {
	mux, err := newMux(rep, nil)
	if err != nil {
		return nil, err
	}
	return secure(mux, opts), nil
}

// NewPageHandler serves the view of a page load (see WritePageHTML) as NewHandler
// does, with the page load at "/api/page".
func NewPageHandler(rep *report.Report, page any, opts HandlerOptions) (http.Handler, error) {
	data, err := marshalPage(page)
	if err != nil {
		return nil, err
	}
	mux, err := newMux(rep, data)
	if err != nil {
		return nil, err
	}
	return secure(mux, opts), nil
}

// newMux routes the page, the assets, the Report and the page load (JSON null
// when the Report is not a page load's).
func newMux(rep *report.Report, pageData []byte) (*http.ServeMux, error) {
	if pageData == nil {
		pageData = []byte("null")
	}
	data, err := marshalReport(rep)
	if err != nil {
		return nil, err
	}
	files, err := assets()
	if err != nil {
		return nil, err
	}
	if _, err := fs.Stat(files, scriptAsset); err != nil {
		return nil, fmt.Errorf("web: the embedded page is incomplete (run `make web`): %w", err)
	}
	page := servedPage(rep)
	fileServer := http.FileServerFS(files)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /api/report", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(data)
	})
	mux.HandleFunc("GET /api/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(pageData)
	})
	mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) {
		// Only the embedded files themselves: no directory listings.
		if _, err := fs.Stat(files, "assets/"+r.PathValue("name")); err != nil || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
	return mux, nil
}

// secure adds the security headers and turns away unexpected Host headers.
func secure(next http.Handler, opts HandlerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", servedCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !opts.AnyHost && !localhttp.HostAllowed(r.Host) {
			http.Error(w, "slowstart view: unexpected Host header; open the page by IP address or as localhost", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "slowstart view: only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Serve answers HTTP requests on ln with h until ctx is done, then shuts down
// gracefully. It returns nil after a shutdown that ctx asked for.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           h,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("web: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// End the event streams, which never go idle by themselves.
	cancelBase()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("web: shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("web: serving on %s: %w", ln.Addr(), err)
	}
	return nil
}
