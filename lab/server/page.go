package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"mime"
	"path"
	"strings"

	"github.com/slowstart/slowstart/units"
)

// A test page: an HTML document that names resources of chosen sizes, the way a
// real page does, for browser page loads in the lab. Stylesheets and scripts are
// named in the document's head (render-blocking, as a browser treats them), fonts
// in the first stylesheet (used by the body's text, so the first render needs
// them), images at the start of the body, asynchronous scripts in the head with
// async. Any of them may be served by a second host name (another origin, hence
// other connections), as a CDN or a font host would. Every file has exactly its
// size in bytes, of incompressible text or binary padding, so that what travels is
// what was asked for with or without compression offered.

// Resource kinds of a page.
const (
	PageCSS   = "css"
	PageJS    = "js"
	PageAsync = "async" // a script with the async attribute: not render-blocking
	PageFont  = "font"
	PageImage = "img"
)

// PageDir is the directory of the page's files on its servers; PageIndexPath the
// document's path.
const (
	PageDir       = "/page/"
	PageIndexPath = PageDir + "index.html"
)

// DefaultPageSpec is the page the lab serves when none is given: a 12 KB document
// with a 20 KB stylesheet and a 10 KB script in its head, a 4 KB font the
// stylesheet names, and two images of 30 KB and 60 KB, all from one host.
const DefaultPageSpec = "html=12KB,css=20KB,js=10KB,font=4KB,img=30KB,img=60KB"

// Page is a test page (see ParsePage for its text form).
type Page struct {
	// HTMLBytes is the size of the document.
	HTMLBytes int64
	// Resources are what the document names, in the order given.
	Resources []PageResource
	// FirstOrigin and SecondOrigin are the origins (scheme://host:port) of the two
	// host names; the second one names the resources with Second set, the first
	// one is needed only when a stylesheet on the second host names a font on the
	// first. The lab fills them in.
	FirstOrigin, SecondOrigin string
}

// PageResource is one file the document names.
type PageResource struct {
	Kind   string // PageCSS, PageJS, PageAsync, PageFont or PageImage
	Bytes  int64
	Second bool // served from the second host name
}

// pageExtensions gives each kind's file extension.
var pageExtensions = map[string]string{PageCSS: ".css", PageJS: ".js", PageAsync: ".js", PageFont: ".woff2", PageImage: ".png"}

// Smallest files of each kind: what their fixed text or headers take.
var pageMinimumBytes = map[string]int64{PageCSS: 200, PageJS: 64, PageAsync: 64, PageFont: 16, PageImage: 80}

// ParsePage reads a page from its text form: comma-separated KIND=SIZE items,
// html for the document (once, required) and css, js, async, font or img for the
// resources, with @2 after the kind for a resource on the second host name, e.g.
// "html=12KB,css=20KB,js@2=10KB,font@2=4KB,img=60KB". Sizes take units (units.ParseSize).
func ParsePage(spec string) (Page, error) {
	var p Page
	seenHTML := false
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, size, ok := strings.Cut(item, "=")
		if !ok {
			return p, fmt.Errorf("page item %q: use KIND=SIZE, e.g. css=20KB (kinds: html, css, js, async, font, img; @2 for the second host)", item)
		}
		kind, host, second := strings.Cut(kind, "@")
		if second && host != "2" {
			return p, fmt.Errorf("page item %q: the only other host is @2", item)
		}
		bytes, err := units.ParseSize(size)
		if err != nil {
			return p, fmt.Errorf("page item %q: %w", item, err)
		}
		if kind == "html" {
			if seenHTML || second {
				return p, fmt.Errorf("page item %q: the page has one document, on the first host", item)
			}
			seenHTML, p.HTMLBytes = true, bytes
			continue
		}
		if _, known := pageExtensions[kind]; !known {
			return p, fmt.Errorf("page item %q: unknown kind %q (use html, css, js, async, font or img)", item, kind)
		}
		p.Resources = append(p.Resources, PageResource{Kind: kind, Bytes: bytes, Second: second})
	}
	if !seenHTML {
		return p, fmt.Errorf("page %q names no document: add html=SIZE", spec)
	}
	return p, p.check()
}

// check says what of the page can't be made.
func (p Page) check() error {
	const maxBytes = 64 << 20
	fonts := 0
	for _, r := range p.Resources {
		if r.Kind == PageFont {
			fonts++
		}
		if r.Bytes < pageMinimumBytes[r.Kind] || r.Bytes > maxBytes {
			return fmt.Errorf("page: a %s of %d bytes: use %d bytes to 64 MB", r.Kind, r.Bytes, pageMinimumBytes[r.Kind])
		}
	}
	if fonts > 0 && p.firstCSS() < 0 {
		return fmt.Errorf("page: fonts are named by the first stylesheet: add a css")
	}
	if min := int64(len(p.htmlHead()) + len(htmlTail)); p.HTMLBytes < min || p.HTMLBytes > maxBytes {
		return fmt.Errorf("page: a document of %d bytes can't name these resources: use %d bytes to 64 MB", p.HTMLBytes, min)
	}
	return nil
}

// String is the page's text form.
func (p Page) String() string {
	items := []string{fmt.Sprintf("html=%dB", p.HTMLBytes)}
	for _, r := range p.Resources {
		kind := r.Kind
		if r.Second {
			kind += "@2"
		}
		items = append(items, fmt.Sprintf("%s=%dB", kind, r.Bytes))
	}
	return strings.Join(items, ",")
}

// HasSecondHost reports whether a resource is served by the second host name.
func (p Page) HasSecondHost() bool {
	for _, r := range p.Resources {
		if r.Second {
			return true
		}
	}
	return false
}

// ResourcePath is the path of resource i on its server.
func (p Page) ResourcePath(i int) string {
	return fmt.Sprintf("%sr%d-%s%s", PageDir, i+1, p.Resources[i].Kind, pageExtensions[p.Resources[i].Kind])
}

// ResourceURL is how the document names resource i: a relative path, or an
// absolute URL on the second host.
func (p Page) ResourceURL(i int) string {
	if p.Resources[i].Second {
		return p.SecondOrigin + p.ResourcePath(i)
	}
	return p.ResourcePath(i)
}

func (p Page) firstCSS() int {
	for i, r := range p.Resources {
		if r.Kind == PageCSS {
			return i
		}
	}
	return -1
}

// htmlTail ends the document.
const htmlTail = "-->\n</body>\n</html>\n"

// htmlHead is the document up to its padding: the head names the stylesheets and
// scripts, the body starts with text in the page's fonts and the images, and the
// padding that follows is a comment.
func (p Page) htmlHead() string {
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>slowstart lab page</title>\n<link rel=\"icon\" href=\"data:,\">\n")
	for i, r := range p.Resources {
		switch r.Kind {
		case PageCSS:
			fmt.Fprintf(&b, "<link rel=\"stylesheet\" href=\"%s\">\n", p.ResourceURL(i))
		case PageJS:
			fmt.Fprintf(&b, "<script src=\"%s\"></script>\n", p.ResourceURL(i))
		case PageAsync:
			fmt.Fprintf(&b, "<script async src=\"%s\"></script>\n", p.ResourceURL(i))
		}
	}
	b.WriteString("</head>\n<body>\n<h1>slowstart lab page</h1>\n<p class=\"text\">A page of chosen resources, loaded as a first visit.</p>\n")
	for i, r := range p.Resources {
		if r.Kind == PageImage {
			fmt.Fprintf(&b, "<img src=\"%s\" width=\"64\" height=\"64\" alt=\"\">\n", p.ResourceURL(i))
		}
	}
	b.WriteString("<!-- padding\n")
	return b.String()
}

// Files returns every file of the page by path: the document and each resource,
// each of exactly its size.
func (p Page) Files() (map[string][]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	random := rand.New(rand.NewChaCha8([32]byte{'p', 'a', 'g', 'e'}))
	files := map[string][]byte{}
	head := p.htmlHead()
	files[PageIndexPath] = padText([]byte(head), p.HTMLBytes-int64(len(head)+len(htmlTail)), random, htmlTail)
	css := p.firstCSS()
	for i, r := range p.Resources {
		var body []byte
		switch r.Kind {
		case PageCSS:
			var rules strings.Builder
			rules.WriteString("body { margin: 2em; }\nh1 { font-size: 1.5em; }\n")
			if i == css {
				for j, f := range p.Resources {
					if f.Kind == PageFont {
						fmt.Fprintf(&rules, "@font-face { font-family: \"lab%d\"; src: url(\"%s\") format(\"woff2\"); font-display: block; }\n", j+1, p.fontURLFromCSS(i, j))
						fmt.Fprintf(&rules, "p.text { font-family: \"lab%d\", sans-serif; }\n", j+1)
					}
				}
			}
			rules.WriteString("/* padding\n")
			body = padText([]byte(rules.String()), r.Bytes-int64(rules.Len())-3, random, "*/\n")
		case PageJS, PageAsync:
			start := fmt.Sprintf("window.slowstartLab%d = true;\n/* padding\n", i+1)
			body = padText([]byte(start), r.Bytes-int64(len(start))-3, random, "*/\n")
		case PageFont:
			body = make([]byte, r.Bytes)
			copy(body, "wOF2")
			for k := 4; k < len(body); k++ {
				body[k] = byte(random.Uint32())
			}
		case PageImage:
			body = paddedPNG(r.Bytes, random)
		}
		if int64(len(body)) != r.Bytes {
			return nil, fmt.Errorf("page: a %s of %d bytes came out %d bytes long", r.Kind, r.Bytes, len(body))
		}
		files[p.ResourcePath(i)] = body
	}
	return files, nil
}

// fontURLFromCSS is how stylesheet css names font f: relative when both are on
// the same host.
func (p Page) fontURLFromCSS(css, f int) string {
	if p.Resources[css].Second == p.Resources[f].Second {
		return path.Base(p.ResourcePath(f))
	}
	if p.Resources[f].Second {
		return p.SecondOrigin + p.ResourcePath(f)
	}
	return p.FirstOrigin + p.ResourcePath(f)
}

// padText appends n bytes of random letters and digits (broken into lines) and
// the tail to start.
func padText(start []byte, n int64, random *rand.Rand, tail string) []byte {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := bytes.NewBuffer(start)
	for k := int64(0); k < n; k++ {
		if k%80 == 79 {
			b.WriteByte('\n')
			continue
		}
		b.WriteByte(letters[random.IntN(len(letters))])
	}
	b.WriteString(tail)
	return b.Bytes()
}

// paddedPNG is a valid 1×1 PNG of exactly size bytes: the padding is a private
// ancillary chunk ("slPd") of random bytes, which decoders skip.
func paddedPNG(size int64, random *rand.Rand) []byte {
	chunk := func(b *bytes.Buffer, kind string, data []byte) {
		binary.Write(b, binary.BigEndian, uint32(len(data)))
		start := b.Len()
		b.WriteString(kind)
		b.Write(data)
		binary.Write(b, binary.BigEndian, crc32.ChecksumIEEE(b.Bytes()[start:]))
	}
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk(&b, "IHDR", []byte{0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0})                      // 1×1, grey, 8 bits
	chunk(&b, "IDAT", []byte{0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01}) // one zero byte, zlib
	fixed := int64(b.Len()) + 12 + 12                                                     // the padding chunk's and IEND's framing
	padding := make([]byte, max(size-fixed, 0))
	for k := range padding {
		padding[k] = byte(random.Uint32())
	}
	chunk(&b, "slPd", padding)
	chunk(&b, "IEND", nil)
	return b.Bytes()
}

// PageContentType is the Content-Type a page file is served with.
func PageContentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css"
	case ".js":
		return "text/javascript"
	case ".woff2":
		return "font/woff2"
	case ".png":
		return "image/png"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
