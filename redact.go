package sema

import "strings"

// Redact hides the password in a backend URL, for messages and logs: the
// password of its user information ("user:xxxxx@host") and the value of any
// query parameter whose name contains "password". It works on URLs that
// url.Parse refuses too (several hosts, as etcd:// takes, or no scheme), and
// returns a URL without a password as written.
func Redact(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	prefix := scheme + "://"
	if !ok { // "user:password@host" without a scheme is redacted too
		prefix, rest = "", rawURL
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		if user, _, hasPw := strings.Cut(rest[:at], ":"); hasPw {
			rest = user + ":xxxxx" + rest[at:]
		}
	}
	base, query, hasQuery := strings.Cut(rest, "?")
	if !hasQuery {
		return prefix + rest
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	params := strings.Split(query, "&")
	for i, p := range params {
		k, _, hasV := strings.Cut(p, "=")
		if hasV && strings.Contains(strings.ToLower(k), "password") {
			params[i] = k + "=xxxxx"
		}
	}
	out := prefix + base + "?" + strings.Join(params, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}
