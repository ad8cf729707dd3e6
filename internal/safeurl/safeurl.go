// Package safeurl prints a URL for a message or a log line without the
// secrets URLs carry: user info, tokens and signatures in the query, and
// the fragment (where OAuth puts access tokens).
package safeurl

import (
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// Redacted replaces the value of a secret query parameter.
const Redacted = "REDACTED"

// secretWords are the words of a query parameter's name that say its value
// is a secret: key, api_key, apiKey, access_token, X-Amz-Signature,
// client_secret, sig (Azure SAS), password and the like.
var secretWords = []string{
	"key", "apikey", "token", "secret", "secrets", "password", "passwd", "pwd", "passphrase",
	"credential", "credentials", "cookie", "auth", "authorization", "sig", "signature", "jwt", "session",
}

// String returns u without its user info (a user name alone may be a
// token), without its fragment (never sent to the server), and with the
// value of each query parameter whose name marks a secret replaced by
// Redacted. The scheme, host, path and other parameters stay as they are:
// they say what was asked for. An opaque URL keeps only what follows its
// last "@". A nil u is "".
func String(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if i := strings.LastIndexByte(c.Opaque, '@'); i >= 0 {
		c.Opaque = c.Opaque[i+1:]
	}
	c.RawQuery = redactQuery(c.RawQuery)
	return c.String()
}

// redactQuery masks the secret values of a raw query, keeping the order
// and the encoding of the rest, even where the query is not well formed.
// ";" separates parameters too, as some servers take it.
func redactQuery(q string) string {
	var b strings.Builder
	for q != "" {
		end := strings.IndexAny(q, "&;")
		if end < 0 {
			end = len(q)
		}
		b.WriteString(redactParam(q[:end]))
		if end < len(q) {
			b.WriteByte(q[end])
			end++
		}
		q = q[end:]
	}
	return b.String()
}

// redactParam masks the value of one name=value pair with a secret name.
func redactParam(p string) string {
	name, value, ok := strings.Cut(p, "=")
	if ok && value != "" && secretName(unescape(name)) {
		return name + "=" + Redacted
	}
	return p
}

func unescape(name string) string {
	if n, err := url.QueryUnescape(name); err == nil {
		return n
	}
	return name
}

// secretName reports whether a query parameter's name says its value is
// a secret: one of its words (split at punctuation and at a lower-to-upper
// case change) is a secret word, case aside.
func secretName(name string) bool {
	for _, w := range words(name) {
		if slices.Contains(secretWords, strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// words splits "X-Amz-Security-Token", "access_token" and "apiKey" into
// their words.
func words(name string) []string {
	var ws []string
	start := -1
	prev := rune(0)
	for i, r := range name {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum && start >= 0:
			ws, start = append(ws, name[start:i]), -1
		case alnum && start >= 0 && unicode.IsUpper(r) && unicode.IsLower(prev):
			ws, start = append(ws, name[start:i]), i
		case alnum && start < 0:
			start = i
		}
		prev = r
	}
	if start >= 0 {
		ws = append(ws, name[start:])
	}
	return ws
}
