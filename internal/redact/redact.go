// Package redact removes credentials from text: log records, transcripts,
// reports and error messages. It is what redacts the records of toolrun's
// and mcptool's log handlers and every string of a transcript.
package redact

import (
	"encoding/json"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Mark replaces each secret that [String] finds.
const Mark = "[REDACTED]"

// minEnvValue is the shortest environment variable value that String
// removes: shorter values ("1", "true") are not secrets worth the noise.
const minEnvValue = 8

// secretWords are the words of an environment variable's name (split at
// '_') that make it a secret, wherever they are in the name.
var secretWords = map[string]bool{
	"SECRET": true, "SECRETS": true, "PASSWORD": true, "PASSWD": true, "PASSPHRASE": true,
	"TOKEN": true, "TOKENS": true, "APIKEY": true, "CREDENTIAL": true, "CREDENTIALS": true,
	"PAT": true, "COOKIE": true, "AUTH": true, "PRIVATE": true, "SESSION": true,
}

// SecretName reports whether the environment variable named name holds a
// credential, judged by its name: every ANTHROPIC_API_KEY or
// ANTHROPIC_AUTH_TOKEN, any name with the word SECRET, PASSWORD, PASSWD,
// PASSPHRASE, TOKEN, APIKEY, CREDENTIAL(S), PAT, COOKIE, AUTH, PRIVATE or
// SESSION in it (words are separated by '_'; case does not matter), and any
// name whose last word is KEY. [String] removes the values of these
// variables from text.
func SecretName(name string) bool {
	words := strings.Split(strings.ToUpper(name), "_")
	for _, w := range words {
		if secretWords[w] {
			return true
		}
	}
	return words[len(words)-1] == "KEY"
}

var (
	// privateKeyRE matches the body of a PEM private key, also with its
	// newlines escaped inside a JSON string.
	privateKeyRE = regexp.MustCompile(`(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)`)

	// anthropicKeyRE matches Anthropic API keys and tokens.
	anthropicKeyRE = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`)

	// tokenREs match credentials known by their shape: other vendors' API
	// keys and tokens, and JSON Web Tokens. Each is tried only if the text
	// holds its marker, which keeps String fast on long texts.
	tokenREs = []struct {
		marker string
		re     *regexp.Regexp
	}{
		{"sk-", regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`)},            // OpenAI
		{"A", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`)},                   // AWS access key IDs
		{"_", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`)},                                   // GitHub
		{"github_pat_", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`)},                       // GitHub fine-grained
		{"glpat-", regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`)},                                // GitLab
		{"xox", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},                              // Slack
		{"AIza", regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`)},                                    // Google API keys
		{"k_", regexp.MustCompile(`\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}`)},                        // Stripe
		{"npm_", regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`)},                                     // npm
		{"eyJ", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`)}, // JWT
	}

	// userinfoRE matches the password of a URL's userinfo.
	userinfoRE = regexp.MustCompile(`\b([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@"'\\]+):([^/\s@"'\\]+)@`)

	// schemeTokenRE matches a bearer or basic credential outside a header.
	schemeTokenRE = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/-]+=*)`)
)

// String returns s with every credential it recognises replaced by
// [Mark] ("[REDACTED]"):
//
//   - the values of Authorization and Proxy-Authorization headers, whatever
//     their scheme (Bearer, Basic, Token, Digest, AWS4-HMAC-SHA256 or none),
//     of which the scheme is kept, and of Cookie and Set-Cookie headers;
//   - the values of fields whose names end in api_key, access_key,
//     secret_key, private_key, secret, password, passwd, passphrase,
//     token, credential(s) or auth ("X-Api-Key: v", `"client_secret":"v"`,
//     "X-Amz-Security-Token=v"), and of Signature= and X-Amz-Signature=, as
//     they appear in text, HTTP dumps, JSON, Go's printed http.Header and
//     query strings, where key= and sig= are redacted too;
//   - Anthropic API keys and tokens (sk-ant-…), the keys and tokens of other
//     vendors known by their shape (OpenAI, AWS access key IDs, GitHub,
//     GitLab, Slack, Google, Stripe, npm), JSON Web Tokens, bearer and basic
//     credentials, the password of a URL's userinfo and the body of a PEM
//     private key;
//   - the values, at least 8 bytes long, of the environment variables whose
//     names say they hold secrets, as set when String is called ([SecretName]):
//     ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, GITHUB_TOKEN,
//     AWS_SECRET_ACCESS_KEY, any name with SECRET, PASSWORD, TOKEN, APIKEY,
//     CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE or PAT as one of its
//     '_'-separated words, or KEY as its last.
//
// The header and field forms are found inside JSON strings too, escaped
// once or more: an Authorization line after a "\n" inside a JSON-encoded
// HTTP body is redacted to the end of its line. String keeps valid JSON
// valid, and redacting twice gives what redacting once did.
//
// A toolrun runner passes every record it logs through String (see
// toolrun.Options.Logger); package transcript passes every string it
// writes, and package mcptool every record it logs, with the standard
// error of the servers it runs. It is internal so that what it removes can
// grow without a change to any public API; the root package's docs say
// what it removes. String is a safety net, not a guarantee: it cannot
// recognise a secret of the application's own.
func String(s string) string {
	s = envValues(s)
	if strings.Contains(s, "PRIVATE KEY-----") {
		s = privateKeyRE.ReplaceAllString(s, "${1}"+Mark+"${2}")
	}
	s = fields(s)
	if strings.Contains(s, "sk-ant-") {
		s = anthropicKeyRE.ReplaceAllString(s, "sk-ant-"+Mark)
	}
	for _, t := range tokenREs {
		if strings.Contains(s, t.marker) {
			s = t.re.ReplaceAllString(s, Mark)
		}
	}
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllString(s, "${1}:"+Mark+"@")
	}
	if containsFold(s, "bearer") || containsFold(s, "basic") {
		s = schemeTokenRE.ReplaceAllStringFunc(s, func(m string) string {
			sub := schemeTokenRE.FindStringSubmatch(m)
			tok := sub[3]
			if len(tok) < 8 && strings.Trim(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
				return m // prose: "the bearer of bad news"
			}
			return sub[1] + sub[2] + Mark
		})
	}
	return s
}

// containsFold reports whether s contains the lower-case ASCII word w in
// any case.
func containsFold(s, w string) bool {
	for i := 0; ; {
		j := strings.IndexAny(s[i:], w[:1]+strings.ToUpper(w[:1]))
		if j < 0 {
			return false
		}
		i += j
		if len(s)-i >= len(w) && strings.EqualFold(s[i:i+len(w)], w) {
			return true
		}
		i++
	}
}

// envValues replaces the values of the secret environment variables, as
// they are and as they appear inside a JSON string.
func envValues(s string) string {
	var values []string
	for _, kv := range os.Environ() {
		name, v, _ := strings.Cut(kv, "=")
		if len(v) >= minEnvValue && SecretName(name) {
			values = append(values, v)
		}
	}
	// Longer first, so a value that contains another goes whole.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mark)
		}
		if b, err := json.Marshal(v); err == nil {
			if q := string(b[1 : len(b)-1]); q != v && strings.Contains(s, q) {
				s = strings.ReplaceAll(s, q, Mark)
			}
		}
	}
	return s
}

// fieldKind says how a field's name makes its value a secret.
type fieldKind int

const (
	notSecret fieldKind = iota
	header              // Authorization, Cookie: the value runs to the end of its line
	token               // api_key, password: the value is one token
	param               // Signature, or key and sig in a query string: only after '='
)

// kindOf returns the kind of the field named name (lower case), which is
// followed by sep and, if query, preceded by '?', '&' or ';'.
func kindOf(name string, sep byte, query bool) fieldKind {
	switch {
	case strings.HasSuffix(name, "authorization") || strings.HasSuffix(name, "cookie"):
		return header
	case name == "key" || name == "sig":
		if sep == '=' && query {
			return param
		}
		return notSecret
	case strings.HasSuffix(name, "signature"):
		// A thinking block's "signature" is not a credential.
		if sep == '=' || name != "signature" {
			return param
		}
		return notSecret
	}
	for _, suffix := range tokenSuffixes {
		if strings.HasSuffix(name, suffix) {
			return token
		}
	}
	return notSecret
}

// tokenSuffixes end the names of the fields whose value is a credential.
var tokenSuffixes = []string{
	"apikey", "api_key", "api-key", "accesskey", "access_key", "access-key",
	"secretkey", "secret_key", "secret-key", "privatekey", "private_key", "private-key",
	"secret", "password", "passwd", "passphrase", "token", "credential", "credentials", "auth",
}

// fields replaces the values of the fields that hold credentials. It
// looks at each ':' and '=' and reads the field's name backwards from it,
// which takes one pass over s.
func fields(s string) string {
	var b strings.Builder
	last := 0 // s[:last] is written to b
	var lines lineState
	for pos := 0; pos < len(s); {
		k := strings.IndexAny(s[pos:], ":=")
		if k < 0 {
			break
		}
		sep := pos + k
		pos = sep + 1
		// Back from the separator: spaces, a closing quote and its
		// backslashes, then the name.
		j := sep
		for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
			j--
		}
		nameQuoted := false
		if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
			nameQuoted = s[j-1] == '"'
			j--
			for j > 0 && s[j-1] == '\\' {
				j--
			}
		}
		nameEnd := j
		for j > 0 && isNameByte(s[j-1]) {
			j--
		}
		if j == nameEnd || nameEnd-j > 128 {
			continue
		}
		name := strings.ToLower(s[j:nameEnd])
		query := j > 0 && strings.IndexByte("?&;", s[j-1]) >= 0
		kind := kindOf(name, s[sep], query)
		if kind == notSecret {
			continue
		}
		i := sep + 1
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		vstart, vend, ok := valueExtent(s, i, kind, nameQuoted, &lines)
		if !ok {
			continue
		}
		v := s[vstart:vend]
		if kind == header {
			// Keep the scheme: "Bearer [REDACTED]".
			if m := schemeRE.FindString(v); m != "" {
				vstart += len(m)
				v = s[vstart:vend]
			}
		}
		if strings.HasPrefix(v, Mark) || strings.TrimSpace(v) == "" {
			pos = max(pos, vend)
			continue
		}
		b.WriteString(s[last:vstart])
		b.WriteString(Mark)
		last, pos = vend, vend
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// schemeRE matches the scheme that starts an Authorization value ("Bearer "),
// which is kept.
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*[ \t]+`)

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// valueExtent returns where the value that starts at i ends. nameQuoted
// reports that the name was in quotes, as a JSON key is: a value that is
// not a string is then a number, true, false, null or a structure, and no
// secret. ok is false if there is no value to redact.
func valueExtent(s string, i int, kind fieldKind, nameQuoted bool, lines *lineState) (start, end int, ok bool) {
	bracket := false
	if i < len(s) && s[i] == '[' && !strings.HasPrefix(s[i:], Mark) {
		// Go's http.Header, printed or as JSON: X-Api-Key:[v], {"X-Api-Key":["v"]}.
		bracket = true
		i++
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	// An opening quote, with the backslashes that escape it.
	j := i
	for j < len(s) && s[j] == '\\' {
		j++
	}
	if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		if s[j] == '\'' && j > i {
			return 0, 0, false
		}
		start = j + 1
		return start, quotedEnd(s, start, s[j], depth(j-i)), true
	}
	if nameQuoted && !bracket {
		return 0, 0, false // a JSON value that is not a string
	}
	ctx := lines.depth(s, i)
	end = i
	for end < len(s) {
		c := s[end]
		if strings.HasPrefix(s[end:], Mark) {
			end += len(Mark)
			continue
		}
		switch {
		case c == '\n' || c == '\r':
			return i, trimEnd(s, i, end), end > i
		case c == '\\':
			r := backslashes(s, end, len(s))
			if kind != header || end+r >= len(s) {
				return i, trimEnd(s, i, end), end > i
			}
			next := s[end+r]
			if ctx > 0 && (next == 'n' || next == 'r') {
				return i, trimEnd(s, i, end), end > i
			}
			if next == '"' && depth(r) < ctx {
				return i, trimEnd(s, i, end), end > i
			}
			end += r + 1
			continue
		case c == '"':
			if ctx > 0 || kind != header {
				return i, trimEnd(s, i, end), end > i
			}
		case c == ']' && bracket:
			return i, trimEnd(s, i, end), end > i
		case kind != header && strings.IndexByte(" \t'&,;)]}<>#|", c) >= 0:
			return i, end, end > i
		}
		end++
	}
	return i, trimEnd(s, i, end), end > i
}

// trimEnd returns end less the spaces before it.
func trimEnd(s string, start, end int) int {
	for end > start && (s[end-1] == ' ' || s[end-1] == '\t') {
		end--
	}
	return end
}

// depth returns the string nesting level at which a quote that follows r
// backslashes is unescaped: 0 for `"` or `\\"`, 1 for `\"`, 2 for `\\\"`.
func depth(r int) int {
	d := 0
	for r%2 == 1 {
		r = (r - 1) / 2
		d++
	}
	return d
}

// quotedEnd returns the end of a value in quotes q that starts at i, the
// opening quote being unescaped at string level k: the closing quote, a
// quote that closes a string around it, or the end of the line.
func quotedEnd(s string, i int, q byte, k int) int {
	for j := i; j < len(s); {
		if strings.HasPrefix(s[j:], Mark) {
			j += len(Mark)
			continue
		}
		switch c := s[j]; {
		case c == '\n' || c == '\r' || c == '"' || c == q:
			return j
		case c == '\\':
			r := backslashes(s, j, len(s))
			if j+r < len(s) && s[j+r] == '"' && depth(r) <= k {
				return j
			}
			j += r + 1 // the backslashes and the byte they escape
			continue
		}
		j++
	}
	return len(s)
}

// backslashes returns the number of backslashes at s[j:end].
func backslashes(s string, j, end int) int {
	r := 0
	for j+r < end && s[j+r] == '\\' {
		r++
	}
	return r
}

// lineState counts the strings open along a line, from one field to the
// next, so that fields takes one pass over s.
type lineState struct {
	at   int // s[:at] is counted
	open int // strings open at at
}

// depth returns how many strings are open at i (at or after the last i
// asked), counting the quotes from the start of its line: 0 in plain
// text, 1 inside a JSON string, 2 inside a JSON string inside a JSON
// string.
func (l *lineState) depth(s string, i int) int {
	if from := strings.LastIndexAny(s[l.at:i], "\r\n"); from >= 0 {
		l.at, l.open = l.at+from+1, 0
	}
	j := l.at
	for j < i {
		if s[j] != '\\' && s[j] != '"' {
			j++
			continue
		}
		r := backslashes(s, j, i)
		switch {
		case j+r >= i:
		case s[j+r] == '"':
			switch q := depth(r); {
			case q < l.open:
				l.open = q
			case q == l.open:
				l.open++
			}
		case (s[j+r] == 'n' || s[j+r] == 'r') && r&(r-1) == 0:
			// A newline escaped for level L (r = 2^(L-1)) starts a line of
			// the text inside L strings: the quotes before it are done.
			if level := bits.Len(uint(r)); l.open >= level {
				l.open = level
			}
		}
		j += r + 1
	}
	l.at = min(j, i)
	return l.open
}
