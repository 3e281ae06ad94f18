package config

// Connection strings (DATABASE_URL, REDIS_URL): the one redaction of
// their passwords, and DATABASE_URL's sslmode default.

import (
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// mask replaces a password wherever a connection string is printed.
const mask = "xxxxx"

// isPasswordKey reports whether the value of a connection string's key k
// is a secret: libpq's password and sslpassword (in a URL's query or as
// keyword/value pairs), go-redis's sentinel_password, and whatever else
// says password, in any case: masking a key no parser reads costs
// nothing.
func isPasswordKey(k string) bool { return strings.Contains(strings.ToLower(k), "password") }

// Redact returns a connection string fit to print: a URL
// (scheme://user:password@host/...?password=...) with the password of its
// user info and the values of its password keys (isPasswordKey: password,
// sslpassword, sentinel_password) replaced by "xxxxx", or a keyword/value
// string (host=... password=...) with the values of those keys replaced.
// Whatever cannot be told apart is replaced whole: a string that may hold
// a password is never printed as is. It is the one redaction of
// connection strings: every banner, log line and error that shows one
// goes through it (redactIn for errors).
func Redact(dsn string) string {
	r, _ := redact(dsn)
	return r
}

// redact returns Redact(dsn) and the secrets it masked, each as written in
// dsn and, when that differs, decoded, for redactIn to find in a message.
func redact(dsn string) (string, []string) {
	if dsn == "" {
		return "", nil
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && isScheme(scheme) {
		if r, secrets, ok := redactURL(dsn); ok {
			return r, secrets
		}
		return redactBrokenURL(scheme, rest)
	}
	if !strings.Contains(dsn, "=") {
		return redacted, []string{dsn}
	}
	return redactKeywords(dsn)
}

// redactURL redacts a URL net/url parses, whose parts are then certain.
func redactURL(dsn string) (string, []string, bool) {
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" {
		return "", nil, false
	}
	var secrets []string
	if pw, ok := u.User.Password(); ok {
		// As written: between the user's colon and the authority's last @.
		authority := dsn[len(u.Scheme)+3:]
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		userinfo := authority[:strings.LastIndex(authority, "@")]
		_, raw, _ := strings.Cut(userinfo, ":")
		secrets = append(secrets, raw, pw)
		u.User = url.UserPassword(u.User.Username(), mask)
	}
	q, qs := redactQuery(u.RawQuery)
	u.RawQuery, secrets = q, append(secrets, qs...)
	// A fragment means nothing to either parser: not printed.
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	// url.URL escapes the mask's user info as it would any text: keep it
	// readable.
	return strings.Replace(s, ":"+url.PathEscape(mask)+"@", ":"+mask+"@", 1), secrets, true
}

// redactQuery masks the values of the password keys of a raw query. A
// pair whose text before its last '=' says password has all after its
// first '=' masked: a key or value holding an '=' of its own is split one
// way by one parser and another by the next.
func redactQuery(raw string) (string, []string) {
	if raw == "" {
		return "", nil
	}
	var secrets []string
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		first, last := strings.Index(p, "="), strings.LastIndex(p, "=")
		if first < 0 {
			continue
		}
		k := p[:last]
		if dk, err := url.QueryUnescape(k); err == nil {
			k += dk
		}
		if !isPasswordKey(k) {
			continue
		}
		v := p[first+1:]
		secrets = append(secrets, v)
		if dv, err := url.QueryUnescape(v); err == nil {
			secrets = append(secrets, dv)
		}
		pairs[i] = p[:first+1] + mask
	}
	return strings.Join(pairs, "&"), secrets
}

// redactBrokenURL redacts a URL net/url rejects (a libpq multi-host list
// with an odd port, an unescaped character in the password): everything
// from the user's colon to the last @ is masked, then the query's
// passwords. When that stretch crosses a '?', the @ may be a password's
// own, in the query: the whole URL is replaced.
func redactBrokenURL(scheme, rest string) (string, []string) {
	var secrets []string
	out := rest
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if colon := strings.Index(rest[:at], ":"); colon >= 0 {
			secret := rest[colon+1 : at]
			if strings.ContainsAny(secret, "?#") {
				return scheme + "://" + redacted, []string{rest}
			}
			secrets = append(secrets, secret)
			out = rest[:colon+1] + mask + rest[at:]
		}
	}
	if before, query, ok := strings.Cut(out, "?"); ok {
		q, qs := redactQuery(query)
		out, secrets = before+"?"+q, append(secrets, qs...)
	}
	return scheme + "://" + out, secrets
}

// keyword is one key = value pair of a keyword/value string: its key and
// where its value starts and ends in the string (quotes included).
type keyword struct {
	key        string
	start, end int
}

// keywords splits a keyword/value string as libpq does (key = value,
// separated by white space, a value 'quoted' with \' and \\ escapes), or
// reports false when it cannot.
func keywords(dsn string) ([]keyword, bool) {
	var kws []keyword
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	space := func(i int) int {
		for i < len(dsn) && isSpace(dsn[i]) {
			i++
		}
		return i
	}
	for i := space(0); i < len(dsn); i = space(i) {
		k := i
		for k < len(dsn) && dsn[k] != '=' && !isSpace(dsn[k]) {
			k++
		}
		eq := space(k)
		if k == i || eq >= len(dsn) || dsn[eq] != '=' {
			return nil, false
		}
		v := space(eq + 1)
		end := v
		if end < len(dsn) && dsn[end] == '\'' {
			for end++; end < len(dsn) && dsn[end] != '\''; end++ {
				if dsn[end] == '\\' {
					end++
				}
			}
			if end >= len(dsn) {
				return nil, false
			}
			end++
		} else {
			for end < len(dsn) && !isSpace(dsn[end]) {
				end++
			}
		}
		kws = append(kws, keyword{dsn[i:k], v, end})
		i = end
	}
	return kws, true
}

// redactKeywords redacts a keyword/value string. One it cannot split is
// replaced whole, and so is one with an unquoted '=' in a value: "host=
// password=x" gives host the value "password=x", but a reader (or a
// parser) may see a password.
func redactKeywords(dsn string) (string, []string) {
	kws, ok := keywords(dsn)
	if !ok || slices.ContainsFunc(kws, func(kw keyword) bool {
		v := dsn[kw.start:kw.end]
		return !strings.HasPrefix(v, "'") && strings.Contains(v, "=")
	}) {
		return redacted, []string{dsn}
	}
	var (
		b       strings.Builder
		secrets []string
		last    int // dsn[:last] is in b
	)
	for _, kw := range kws {
		if isPasswordKey(kw.key) {
			v := dsn[kw.start:kw.end]
			secrets = append(secrets, v, strings.Trim(v, "'"))
			b.WriteString(dsn[last:kw.start])
			b.WriteString(mask)
			last = kw.end
		}
	}
	b.WriteString(dsn[last:])
	return b.String(), secrets
}

// redactIn returns msg, an error's message that may quote dsn or parts of
// it (net/url's errors quote a URL whole), with dsn redacted and every
// secret Redact masks in it replaced.
func redactIn(msg, dsn string) string {
	if dsn == "" {
		return msg
	}
	r, secrets := redact(dsn)
	msg = strings.ReplaceAll(msg, strconv.Quote(dsn), strconv.Quote(r))
	msg = strings.ReplaceAll(msg, dsn, r)
	for _, s := range secrets {
		if s == "" || s == mask {
			continue
		}
		msg = strings.ReplaceAll(msg, s, mask)
		if q := strconv.Quote(s); q[1:len(q)-1] != s {
			msg = strings.ReplaceAll(msg, q[1:len(q)-1], mask)
		}
	}
	return msg
}

// parseError says why dsn did not parse, fit to print: pgx's errors
// (pgconn.ParseConfigError) quote the connection string through a
// redaction of their own, which leaves pieces of a password with an
// unescaped @ or : in place; the reason alone is kept, and the error it
// wraps is redacted here.
func parseError(err error, dsn string) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return redactIn(err.Error(), dsn)
	}
	msg := pe.Error()
	inner := errors.Unwrap(pe)
	if inner != nil {
		msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	}
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	} else {
		msg = "cannot parse"
	}
	if inner != nil {
		msg += " (" + redactIn(inner.Error(), dsn) + ")"
	}
	return msg
}

// HasSSLMode reports whether the PostgreSQL connection string dsn (a URL
// or keyword/value) names an sslmode.
func HasSSLMode(dsn string) bool {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && isScheme(scheme) {
		_, query, _ := strings.Cut(dsn, "?")
		query, _, _ = strings.Cut(query, "#")
		for p := range strings.SplitSeq(query, "&") {
			k, _, _ := strings.Cut(p, "=")
			if dk, err := url.QueryUnescape(k); err == nil && strings.EqualFold(strings.TrimSpace(dk), "sslmode") {
				return true
			}
		}
		return false
	}
	kws, _ := keywords(dsn)
	return slices.ContainsFunc(kws, func(kw keyword) bool { return strings.EqualFold(kw.key, "sslmode") })
}

// WithSSLMode returns dsn with sslmode=mode added when it names none
// (HasSSLMode), else dsn unchanged.
func WithSSLMode(dsn, mode string) string {
	if HasSSLMode(dsn) {
		return dsn
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); !ok || !isScheme(scheme) {
		return strings.TrimRight(dsn, " \t\n\r") + " sslmode=" + mode
	}
	base, frag, hasFrag := strings.Cut(dsn, "#")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
		if strings.HasSuffix(base, "?") || strings.HasSuffix(base, "&") {
			sep = ""
		}
	}
	base += sep + "sslmode=" + mode
	if hasFrag {
		base += "#" + frag
	}
	return base
}

// OnThisMachine reports whether every host the PostgreSQL connection
// string dsn names is this machine: localhost, a loopback address or a
// Unix socket (pgx's defaults apply to what dsn leaves out). False for
// one that does not parse.
func OnThisMachine(dsn string) bool {
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false
	}
	hosts := []string{pc.Host}
	for _, fb := range pc.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		ip := net.ParseIP(h)
		if !(h == "localhost" || strings.HasPrefix(h, "/") || ip != nil && ip.IsLoopback()) {
			return false
		}
	}
	return true
}
