package server

import (
	"bytes"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func TestParsePage(t *testing.T) {
	p, err := ParsePage("html=12KB, css=20KB,js@2=10KB,font@2=4KB,img=60KB,async=5KB")
	if err != nil {
		t.Fatal(err)
	}
	want := []PageResource{{PageCSS, 20000, false}, {PageJS, 10000, true}, {PageFont, 4000, true}, {PageImage, 60000, false}, {PageAsync, 5000, false}}
	if p.HTMLBytes != 12000 || len(p.Resources) != len(want) {
		t.Fatalf("got %+v", p)
	}
	for i := range want {
		if p.Resources[i] != want[i] {
			t.Errorf("resource %d: %+v, want %+v", i, p.Resources[i], want[i])
		}
	}
	if !p.HasSecondHost() {
		t.Error("no second host")
	}
	again, err := ParsePage(p.String())
	if err != nil || again.String() != p.String() {
		t.Errorf("the text form does not read back: %q → %q, %v", p.String(), again.String(), err)
	}
	for _, bad := range []string{
		"", "css=20KB", "html=12KB,html=1KB", "html=12KB,css", "html=12KB,css=20", "html=12KB,video=1MB",
		"html=12KB,css@3=1KB", "html@2=12KB", "html=12KB,font=4KB", "html=100B,css=20KB", "html=12KB,css=10B",
	} {
		if _, err := ParsePage(bad); err == nil {
			t.Errorf("ParsePage(%q) accepted it", bad)
		}
	}
}

// TestPageFiles: every file has its size, the document names every resource
// (in its head for stylesheets and scripts, in its body for images, in the
// stylesheet for fonts), and the images are PNGs a decoder reads.
func TestPageFiles(t *testing.T) {
	p, err := ParsePage(DefaultPageSpec + ",js@2=7KB,async=3KB,img@2=5KB")
	if err != nil {
		t.Fatal(err)
	}
	p.FirstOrigin, p.SecondOrigin = "https://a.test", "https://b.test:8443"
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(p.Resources)+1 {
		t.Fatalf("%d files for %d resources and the document", len(files), len(p.Resources))
	}
	if got := int64(len(files[PageIndexPath])); got != p.HTMLBytes {
		t.Errorf("document: %d bytes, want %d", got, p.HTMLBytes)
	}
	for i, r := range p.Resources {
		body, ok := files[p.ResourcePath(i)]
		if !ok || int64(len(body)) != r.Bytes {
			t.Errorf("%s: %d bytes (present %t), want %d", p.ResourcePath(i), len(body), ok, r.Bytes)
		}
		if r.Kind == PageImage {
			if _, err := png.Decode(bytes.NewReader(body)); err != nil {
				t.Errorf("%s is not a PNG: %v", p.ResourcePath(i), err)
			}
		}
	}
	// What the document names, read by an HTML parser: where and how.
	named := map[string]string{}
	inHead := false
	z := html.NewTokenizer(bytes.NewReader(files[PageIndexPath]))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				t.Fatal(z.Err())
			}
			break
		}
		tok := z.Token()
		switch {
		case tok.Data == "head":
			inHead = tt == html.StartTagToken
		case tt == html.StartTagToken || tt == html.SelfClosingTagToken:
			attrs := map[string]string{}
			for _, a := range tok.Attr {
				attrs[a.Key] = a.Val
			}
			where := "body"
			if inHead {
				where = "head"
			}
			switch {
			case tok.Data == "link" && attrs["rel"] == "stylesheet":
				named[attrs["href"]] = where + " stylesheet"
			case tok.Data == "script" && attrs["src"] != "":
				if _, async := attrs["async"]; async {
					named[attrs["src"]] = where + " async script"
				} else {
					named[attrs["src"]] = where + " script"
				}
			case tok.Data == "img":
				named[attrs["src"]] = where + " image"
			}
		}
	}
	css := string(files[p.ResourcePath(0)])
	for i, r := range p.Resources {
		want := map[string]string{PageCSS: "head stylesheet", PageJS: "head script", PageAsync: "head async script", PageImage: "body image"}[r.Kind]
		if r.Kind == PageFont {
			if !strings.Contains(css, p.fontURLFromCSS(0, i)) {
				t.Errorf("the stylesheet does not name font %s", p.ResourcePath(i))
			}
			continue
		}
		url := p.ResourceURL(i)
		if r.Second != strings.HasPrefix(url, p.SecondOrigin) {
			t.Errorf("%s: URL %s for a resource on host 2: %t", p.ResourcePath(i), url, r.Second)
		}
		if named[url] != want {
			t.Errorf("the document names %s as %q, want %q", url, named[url], want)
		}
	}
}

// TestBuiltinServesPage: the built-in server answers the page's files with their
// bytes and content types, and /bytes/N still.
func TestBuiltinServesPage(t *testing.T) {
	p, err := ParsePage(DefaultPageSpec)
	if err != nil {
		t.Fatal(err)
	}
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Config{PageFiles: files}))
	defer srv.Close()
	for name, content := range files {
		resp, err := http.Get(srv.URL + name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(body, content) || resp.Header.Get("Content-Type") != PageContentType(name) {
			t.Errorf("%s: status %d, %d bytes (want %d), type %q", name, resp.StatusCode, len(body), len(content), resp.Header.Get("Content-Type"))
		}
	}
	resp, err := http.Get(srv.URL + "/bytes/10")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 10 {
		t.Errorf("/bytes/10: status %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}
