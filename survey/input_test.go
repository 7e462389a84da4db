package survey

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseInput(t *testing.T) {
	in := "\uFEFF# providers to compare\n" +
		"\n" +
		"https://a.example/\n" +
		"provider-b   https://b.example/page?x=1   # the landing page\n" +
		"\t  provider c\thttp://192.0.2.7:8080/#top\n" +
		"   # an indented comment\n" +
		"v6 https://[2001:db8::1]/\n" +
		"same https://a.example/\n"
	got, err := ParseInput(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Line: 3, URL: "https://a.example/"},
		{Line: 4, Label: "provider-b", URL: "https://b.example/page?x=1"},
		{Line: 5, Label: "provider c", URL: "http://192.0.2.7:8080/#top"},
		{Line: 7, Label: "v6", URL: "https://[2001:db8::1]/"},
		{Line: 8, Label: "same", URL: "https://a.example/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseInputErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		lines    []int // lines reported, in order; nil for the list as a whole
		says     string
	}{
		{"empty", "", nil, "holds no URL"},
		{"only comments", "# nothing\n\n   \n", nil, "holds no URL"},
		{"no scheme", "a.example\n", []int{1}, "give the scheme"},
		{"ftp", "ok https://a.example/\nftp://b.example/\n", []int{2}, "only http:// and https://"},
		{"no host", "https:///path\n", []int{1}, "has no host"},
		{"bad port", "https://a.example:99999/\n", []int{1}, "port"},
		{"label after URL", "https://a.example/ label\n", []int{1}, "give the scheme"},
		{"two URLs", "https://a.example/ https://b.example/\n", []int{1}, "one URL per line"},
		{"several bad lines", "x\nhttps://ok.example/\ny\n", []int{1, 3}, "line 3"},
		{"too long", "https://a.example/" + strings.Repeat("a", MaxLineBytes) + "\n", []int{1}, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseInput(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("no error; targets %+v", got)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			var lines []int
			collectLines(err, &lines)
			if tc.lines == nil {
				tc.lines = []int{0}
			}
			if !reflect.DeepEqual(lines, tc.lines) {
				t.Errorf("error lines %v, want %v (%v)", lines, tc.lines, err)
			}
		})
	}
}

// collectLines gathers the line numbers of the InputErrors in err.
func collectLines(err error, lines *[]int) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			collectLines(e, lines)
		}
		return
	}
	var ie *InputError
	if errors.As(err, &ie) {
		*lines = append(*lines, ie.Line)
	}
}

func TestStripComment(t *testing.T) {
	for in, want := range map[string]string{
		"# all":                     "",
		"a https://x/ # note":       "a https://x/ ",
		"https://x/#frag":           "https://x/#frag",
		"https://x/#frag # note":    "https://x/#frag ",
		"label\t#note":              "label\t",
		"no comment https://x/a#b ": "no comment https://x/a#b ",
	} {
		if got := stripComment(in); got != want {
			t.Errorf("stripComment(%q) = %q, want %q", in, got, want)
		}
	}
}
