// Package web shows a Report in the browser: it embeds the built page (TypeScript
// sources in src/, built by `npm run build` into dist/) and serves it with the Report,
// or writes it as one self-contained HTML file. The page draws every connection on
// one time axis, one connection's time-sequence graph, windows per round and a
// summary in words.
//
// It does not analyze packets (package analysis does) and serves nothing but its
// own embedded assets and the Report it was given: no path from a URL reaches the
// filesystem.
package web

// The page's TypeScript types (src/types.ts) are declared from the Go types that
// write its JSON; internal/tsgen's test fails when they differ.
//go:generate go run ../internal/tsgen/gen.go

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"path"
	"regexp"

	"github.com/slowstart/slowstart/report"
)

// dist holds the built page: assets/app.js and assets/app.css.
//
//go:embed dist/assets
var dist embed.FS

const (
	scriptAsset = "assets/app.js"
	styleAsset  = "assets/app.css"
)

// assets returns the embedded files, rooted so that "assets/app.js" is a path in it.
func assets() (fs.FS, error) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, fmt.Errorf("web: the embedded page is missing (run `make web`): %w", err)
	}
	return sub, nil
}

// marshalReport encodes rep for the page. json.Marshal escapes <, > and &, so the
// result can sit inside a <script> element as it is.
func marshalReport(rep *report.Report) ([]byte, error) {
	if rep == nil {
		return nil, errors.New("web: no report to show")
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("web: encoding the report: %w", err)
	}
	return b, nil
}

// pageTitle names the page after the capture.
func pageTitle(rep *report.Report) string {
	if rep.Source.Path != "" {
		return "slowstart · " + path.Base(rep.Source.Path)
	}
	return "slowstart"
}

const pageHead = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<link rel="icon" href="data:,">
`

// servedPage is the page the server sends: code and style come from /assets/, the
// Report from /api/report (all relative, so a path prefix in a proxy still works).
func servedPage(rep *report.Report) []byte {
	var b bytes.Buffer
	b.WriteString(pageHead)
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(pageTitle(rep)))
	b.WriteString(`<link rel="stylesheet" href="assets/app.css">
<script type="module" src="assets/app.js"></script>
</head>
<body>
<div id="app"><p class="empty">Loading the report…</p></div>
</body>
</html>
`)
	return b.Bytes()
}

// closingScript finds "</script" (any case), which would end an inline script early.
var closingScript = regexp.MustCompile(`(?i)</(script)`)

// WriteHTML writes one self-contained HTML page showing rep: the Report, the code and
// the style are inline, so the file works offline, from disk, and makes no requests.
// A Content-Security-Policy in the page allows exactly its own script and style.
func WriteHTML(w io.Writer, rep *report.Report) error {
	return writeHTML(w, rep, nil)
}

// WritePageHTML is WriteHTML for a page load (package pageload): the page's
// connections with its requests on them, the critical path highlighted. page is
// the page load's JSON form (anything json.Marshal encodes as it); its Report is
// rep.
func WritePageHTML(w io.Writer, rep *report.Report, page any) error {
	data, err := marshalPage(page)
	if err != nil {
		return err
	}
	return writeHTML(w, rep, data)
}

// marshalPage encodes a page load for the view; like marshalReport, the result
// can sit inside a <script> element.
func marshalPage(page any) ([]byte, error) {
	if page == nil {
		return nil, errors.New("web: no page load to show")
	}
	b, err := json.Marshal(page)
	if err != nil {
		return nil, fmt.Errorf("web: encoding the page load: %w", err)
	}
	return b, nil
}

// inlineData is more JSON the self-contained page carries, in a script
// element of its own id.
type inlineData struct {
	id   string
	data []byte
}

func writeHTML(w io.Writer, rep *report.Report, pageData []byte, more ...inlineData) error {
	data, err := marshalReport(rep)
	if err != nil {
		return err
	}
	files, err := assets()
	if err != nil {
		return err
	}
	script, err := fs.ReadFile(files, scriptAsset)
	if err != nil {
		return fmt.Errorf("web: the embedded page is incomplete (run `make web`): %w", err)
	}
	style, err := fs.ReadFile(files, styleAsset)
	if err != nil {
		return fmt.Errorf("web: the embedded page is incomplete (run `make web`): %w", err)
	}
	// "<\/script" means the same as "</script" in JavaScript strings, regular
	// expressions and comments, the only places the bundle can hold it.
	script = closingScript.ReplaceAll(script, []byte(`<\/$1`))
	if bytes.Contains(script, []byte("<!--")) || bytes.Contains(bytes.ToLower(style), []byte("</style")) {
		return errors.New("web: the built page can't be inlined (it holds \"<!--\" or \"</style\"): rebuild it with `make web`")
	}
	var b bytes.Buffer
	b.WriteString(pageHead)
	fmt.Fprintf(&b, `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src '%s'; style-src '%s'; img-src data:; base-uri 'none'; form-action 'none'">`+"\n",
		hashSource(script), hashSource(style))
	fmt.Fprintf(&b, "<title>%s</title>\n<style>", html.EscapeString(pageTitle(rep)))
	b.Write(style)
	b.WriteString("</style>\n</head>\n<body>\n<div id=\"app\"><p class=\"empty\">Loading the report…</p></div>\n")
	b.WriteString(`<script type="application/json" id="slowstart-report">`)
	b.Write(data)
	b.WriteString("</script>\n")
	if pageData != nil {
		more = append([]inlineData{{id: "slowstart-page", data: pageData}}, more...)
	}
	for _, d := range more {
		fmt.Fprintf(&b, `<script type="application/json" id="%s">`, d.id)
		b.Write(d.data)
		b.WriteString("</script>\n")
	}
	b.WriteString("<script type=\"module\">")
	b.Write(script)
	b.WriteString("</script>\n</body>\n</html>\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("web: writing the page: %w", err)
	}
	return nil
}

// hashSource is a CSP source expression that allows exactly this inline content.
func hashSource(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}
