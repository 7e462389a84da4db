// Package redact is the one place that decides what of a URL slowstart may
// print or store: every URL a verb writes (the one given, a redirect's target,
// one inside an error message from net/http, TLS or the probe) goes through
// URL or Text, so that credentials and tokens stay out of terminals, stores,
// metrics and logs.
//
// It knows URLs and text, nothing of the verbs; it is not a sanitizer of
// control characters (package textsafe is).
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mark replaces what is redacted.
const Mark = "REDACTED"

// URL is the form of a URL that slowstart prints or stores: credentials
// (user:password@, or a token as the user) and the values of the query are
// replaced by REDACTED, and the fragment is dropped. The scheme, host, port,
// path and the query's keys stay, so that the page is still recognized. A
// string that does not parse as a URL is returned as "REDACTED".
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Mark
	}
	if u.User != nil {
		u.User = url.User(Mark)
	}
	if u.RawQuery != "" {
		var parts []string
		for _, pair := range strings.Split(u.RawQuery, "&") {
			key, _, hasValue := strings.Cut(pair, "=")
			if hasValue {
				parts = append(parts, key+"="+Mark)
			} else {
				parts = append(parts, key)
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// urlInText finds URLs in free text: a scheme, "://", and everything up to a
// space, a quote or an angle bracket (net/http quotes the URLs of its errors).
var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// minSecretBytes is the shortest secret replaced wherever it appears in a
// text (a shorter one, such as "1", would take digits out of every number).
const minSecretBytes = 4

// Text redacts a message (an error, a log line): every URL in it becomes its
// URL form, and the secrets of the URLs in known (the ones the message is
// about: credentials, the query's values) are replaced wherever they appear
// apart from a URL, as a TLS or DNS error may quote them.
func Text(text string, known ...string) string {
	for _, raw := range known {
		text = strings.ReplaceAll(text, raw, URL(raw))
		for _, secret := range secretsOf(raw) {
			text = strings.ReplaceAll(text, secret, Mark)
		}
	}
	return urlInText.ReplaceAllStringFunc(text, func(found string) string {
		trimmed := strings.TrimRight(found, ".,;:!?)]}")
		return URL(trimmed) + found[len(trimmed):]
	})
}

// secretsOf returns the secrets of a URL, longest first, each at least
// minSecretBytes long: its user information whole, its password, and its
// query and the query's values. (A user name alone is not one: it is in the
// URLs Text finds, and replacing "admin" in every message would garble them.)
func secretsOf(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var secrets []string
	if u.User != nil {
		secrets = append(secrets, u.User.String())
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p, url.QueryEscape(p))
		}
	}
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
		for _, pair := range strings.Split(u.RawQuery, "&") {
			if _, value, ok := strings.Cut(pair, "="); ok {
				secrets = append(secrets, value)
				if unescaped, err := url.QueryUnescape(value); err == nil {
					secrets = append(secrets, unescaped)
				}
			}
		}
	}
	out := secrets[:0]
	for _, s := range secrets {
		if len(s) >= minSecretBytes && s != Mark {
			out = append(out, s)
		}
	}
	// Longest first: a secret that contains another is replaced whole.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}
