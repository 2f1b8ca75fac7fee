// Package redact removes credentials from text: log records, transcripts,
// reports and error messages. It is what redacts the records of toolrun's
// and mcptool's log handlers and every string of a transcript.
package redact

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"net/url"
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
	// wordStart matches the start of the text, a byte that is not part of
	// a word, or a newline or tab escaped in a JSON string ("\nghp_…"),
	// where \b sees no boundary. The match is kept: ${1}.
	wordStart = `(^|[^A-Za-z0-9_]|\\[nrt])`

	// privateKeyRE matches the body of a PEM private key, also with its
	// newlines escaped inside a JSON string.
	privateKeyRE = regexp.MustCompile(`(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)`)

	// anthropicKeyRE matches Anthropic API keys and tokens.
	anthropicKeyRE = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`)

	// tokenREs match credentials known by their shape: other vendors' API
	// keys and tokens, and JSON Web Tokens, after what wordStart matches.
	// Each is tried only if the text holds its marker, which keeps String
	// fast on long texts.
	tokenREs = []struct {
		marker string
		re     *regexp.Regexp
	}{
		{"sk-", regexp.MustCompile(wordStart + `sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`)},            // OpenAI
		{"A", regexp.MustCompile(wordStart + `(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`)},                   // AWS access key IDs
		{"_", regexp.MustCompile(wordStart + `gh[pousr]_[A-Za-z0-9]{20,}`)},                                   // GitHub
		{"github_pat_", regexp.MustCompile(wordStart + `github_pat_[A-Za-z0-9_]{20,}`)},                       // GitHub fine-grained
		{"glpat-", regexp.MustCompile(wordStart + `glpat-[A-Za-z0-9_-]{20,}`)},                                // GitLab
		{"xox", regexp.MustCompile(wordStart + `xox[abposr]-[A-Za-z0-9-]{10,}`)},                              // Slack
		{"AIza", regexp.MustCompile(wordStart + `AIza[0-9A-Za-z_-]{30,}`)},                                    // Google API keys
		{"k_", regexp.MustCompile(wordStart + `[rs]k_(?:live|test)_[0-9A-Za-z]{16,}`)},                        // Stripe
		{"npm_", regexp.MustCompile(wordStart + `npm_[A-Za-z0-9]{36}\b`)},                                     // npm
		{"eyJ", regexp.MustCompile(wordStart + `eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`)}, // JWT
	}

	// userinfoRE matches the password of a URL's userinfo.
	// The user may be empty ("redis://:pw@host"), the scheme absent
	// ("//u:pw@host") and the slashes JSON-escaped ("\/\/"); the password
	// runs to the last "@" before the path, query or fragment, so one
	// with a raw "@" is redacted whole.
	userinfoRE = regexp.MustCompile(`((?:\b[a-zA-Z][a-zA-Z0-9+.-]*:)?(?://|\\/\\/)[^/\s:@"'\\?#]*):([^/\s"'\\?#]+)@`)

	// schemeTokenRE matches a bearer or basic credential outside a header.
	schemeTokenRE = regexp.MustCompile(`(?i)` + wordStart + `(bearer|basic)(\s+)([A-Za-z0-9._~+/-]+=*)`)
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
//     they appear in text, HTTP dumps, JSON, Go's printed http.Header,
//     configuration files (TOML and INI "password = v", YAML "password: v",
//     a value on the line after its key, indented or alone, and a YAML
//     block "password: |"), the text of XML elements
//     (<password>v</password>), XML attributes (password="v", also with
//     the quotes HTML-escaped: password=&quot;v&quot;), the value of an XML
//     name and value pair whose name or key says it is a secret (<add
//     key="DbPassword" value="v"/>, <entry key="token">v</entry>), and
//     query strings, where key= and sig= are
//     redacted too, also after a '&' that JSON escapes as \u0026 and in a
//     URL-encoded query ("%26sig%3Dv"); a short word after a name ending in
//     auth ("oauth: google", "auth: none") names a mechanism and is kept;
//   - Anthropic API keys and tokens (sk-ant-…), the keys and tokens of other
//     vendors known by their shape (OpenAI, AWS access key IDs, GitHub,
//     GitLab, Slack, Google, Stripe, npm), JSON Web Tokens, bearer and basic
//     credentials, the password of a URL's userinfo and the body of a PEM
//     private key;
//   - the values, at least 8 bytes long, of the environment variables whose
//     names say they hold secrets, as set when String is called
//     ([SecretName]), as they are, JSON-escaped and URL-encoded:
//     ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, GITHUB_TOKEN,
//     AWS_SECRET_ACCESS_KEY, any name with SECRET, PASSWORD, TOKEN, APIKEY,
//     CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE or PAT as one of its
//     '_'-separated words, or KEY as its last.
//
// A name split by a character that shows as nothing (zero-width space,
// non-joiner or joiner, word joiner, byte order mark, soft hyphen), as it
// is or JSON-escaped ("api\u200b_key=v"), is read as the name it shows.
//
// The header, field and XML forms and the known shapes are found inside
// JSON strings too, escaped once or more (after a "\n", with '<' written
// \u003c): an Authorization line after a "\n" inside a JSON-encoded
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
	if strings.Contains(s, "<") || containsFold(s, `\u003c`) || strings.Contains(s, "&lt;") {
		s = xmlValues(s)
	}
	if strings.Contains(s, "sk-ant-") {
		s = anthropicKeyRE.ReplaceAllString(s, "sk-ant-"+Mark)
	}
	for _, t := range tokenREs {
		if strings.Contains(s, t.marker) {
			s = t.re.ReplaceAllString(s, "${1}"+Mark)
		}
	}
	if (strings.Contains(s, "//") || strings.Contains(s, `\/\/`)) && strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllString(s, "${1}:"+Mark+"@")
	}
	if containsFold(s, "bearer") || containsFold(s, "basic") {
		s = schemeTokenRE.ReplaceAllStringFunc(s, func(m string) string {
			sub := schemeTokenRE.FindStringSubmatch(m)
			tok := sub[4]
			if len(tok) < 8 && strings.Trim(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
				return m // prose: "the bearer of bad news"
			}
			return sub[1] + sub[2] + sub[3] + Mark
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
		// As a JSON string holds it, with '<', '>' and '&' escaped or not,
		// and as a URL's query or path holds it.
		var raw bytes.Buffer
		enc := json.NewEncoder(&raw)
		enc.SetEscapeHTML(false)
		forms := []string{url.QueryEscape(v), url.PathEscape(v)}
		if b, err := json.Marshal(v); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
		if enc.Encode(v) == nil {
			b := bytes.TrimSpace(raw.Bytes())
			forms = append(forms, string(b[1:len(b)-1]))
		}
		for _, q := range forms {
			if q != v && strings.Contains(s, q) {
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
		k := strings.IndexAny(s[pos:], ":=%")
		if k < 0 {
			break
		}
		sep := pos + k
		pos = sep + 1
		sepByte, encoded := s[sep], false
		if sepByte == '%' {
			// A query string inside a URL-encoded URL: "key%3Dv%26...".
			if !hasPrefixFold(s[sep:], "%3d") {
				continue
			}
			sepByte, encoded = '=', true
			pos = sep + 3
		}
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
		hidden := false // a zero-width character splits the name
		for j > 0 && nameEnd-j <= 128 {
			if n := invisibleBefore(s, j); n > 0 {
				j, hidden = j-n, true
				continue
			}
			if !isNameByte(s[j-1]) {
				break
			}
			j--
		}
		if j == nameEnd || nameEnd-j > 128 {
			continue
		}
		name := strings.ToLower(s[j:nameEnd])
		if hidden {
			name = stripInvisible(name)
		}
		query := false
		if j > 0 {
			switch s[j-1] {
			case '?', '&', ';':
				query = true
			case '\\':
				// '&' and '?' as a JSON encoder may escape them: \u0026.
				if strings.HasPrefix(name, "u0026") || strings.HasPrefix(name, "u003f") {
					name, query = name[5:], true
				}
			case '%':
				// '&' and '?' URL-encoded: %26, %3F.
				if strings.HasPrefix(name, "26") || strings.HasPrefix(name, "3f") {
					name, query = name[2:], true
				}
			}
		}
		if name == "" {
			continue
		}
		kind := kindOf(name, sepByte, query)
		if kind == notSecret {
			continue
		}
		i := pos
		if !encoded {
			i = sep + 1
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		vstart, vend, ok := valueExtent(s, i, kind, nameQuoted, encoded, &lines)
		if !ok && kind != param && !nameQuoted && !encoded {
			// The value on the lines after its key: "password:\n  v", a
			// YAML block "password: |\n  v".
			vstart, vend, ok = nextLineValue(s, i, j)
		}
		if !ok {
			continue
		}
		v := s[vstart:vend]
		if kind == token && strings.HasSuffix(name, "auth") && plainWord(v) {
			// "oauth: google", "auth: none": the mechanism, not a credential.
			pos = max(pos, vend)
			continue
		}
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

// invisibles are the characters that show as nothing, by which a field's
// name may be split ("api\u200b_key") so that it reads whole to a person
// and not to a byte scan: zero-width space, non-joiner and joiner, word
// joiner, byte order mark and soft hyphen.
var invisibles = []string{"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"}

// invisibleEscapes are invisibles as a JSON string escapes them.
var invisibleEscapes = []string{`\u200b`, `\u200c`, `\u200d`, `\u2060`, `\ufeff`, `\u00ad`}

// invisibleBefore returns the length of the invisible character that ends
// at s[j], as it is or JSON-escaped (with the backslashes of any level),
// or 0 if there is none.
func invisibleBefore(s string, j int) int {
	if j >= 2 && s[j-1]&0x80 != 0 {
		for _, c := range invisibles {
			if strings.HasSuffix(s[:j], c) {
				return len(c)
			}
		}
		return 0
	}
	if j < 6 || s[j-5] != 'u' && s[j-5] != 'U' {
		return 0
	}
	for _, e := range invisibleEscapes {
		if strings.EqualFold(s[j-6:j], e) {
			n := 6
			for j-n > 0 && s[j-n-1] == '\\' {
				n++
			}
			return n
		}
	}
	return 0
}

// stripInvisible returns the lower-case name with its invisible
// characters, raw or escaped, removed.
func stripInvisible(name string) string {
	for _, c := range invisibles {
		name = strings.ReplaceAll(name, c, "")
	}
	for _, e := range invisibleEscapes {
		name = strings.ReplaceAll(name, e, "")
	}
	return strings.ReplaceAll(name, `\`, "") // the backslashes of an escape escaped again
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// valueExtent returns where the value that starts at i ends. nameQuoted
// reports that the name was in quotes, as a JSON key is: a value that is
// not a string is then a number, true, false, null or a structure, and no
// secret. ok is false if there is no value to redact.
//
// encoded reports that the value is URL-encoded, after "%3D": an encoded
// '&', space, quote or '<' ends it.
func valueExtent(s string, i int, kind fieldKind, nameQuoted, encoded bool, lines *lineState) (start, end int, ok bool) {
	bracket := false
	if i < len(s) && s[i] == '[' && !strings.HasPrefix(s[i:], Mark) {
		// Go's http.Header, printed or as JSON: X-Api-Key:[v], {"X-Api-Key":["v"]}.
		bracket = true
		i++
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	if q := entityQuote(s[i:]); q != "" {
		// An attribute of HTML-escaped XML: password=&quot;v&quot;.
		return i + len(q), entityQuotedEnd(s, i+len(q), q), true
	}
	ctx := lines.depth(s, i)
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
		return start, quotedEnd(s, start, s[j], depth(j-i), ctx), true
	}
	if nameQuoted && !bracket {
		return 0, 0, false // a JSON value that is not a string
	}
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
			// Inside a string a raw quote closes it; in plain text it is
			// part of the value (password=hun"ter2).
			if ctx > 0 {
				return i, trimEnd(s, i, end), end > i
			}
		case c == ']' && bracket:
			return i, trimEnd(s, i, end), end > i
		case c == '%' && encoded && encodedEnd(s[end:]):
			return i, end, end > i
		case kind != header && strings.IndexByte(" \t&,;)]}<>#|", c) >= 0:
			return i, end, end > i
		}
		end++
	}
	return i, trimEnd(s, i, end), end > i
}

// entityQuotes are a quote as HTML escapes it, and as a JSON encoder
// may, and as a JSON encoder writes the HTML form (\u0026quot;).
var entityQuotes = []string{"&quot;", "&#34;", "&#x22;", "&#39;", "&#x27;", "&apos;", `\u0022`, `\u0027`}

// entityQuote returns the escaped quote s starts with, or "".
func entityQuote(s string) string {
	if len(s) < 5 || s[0] != '&' && s[0] != '\\' {
		return ""
	}
	for _, q := range entityQuotes {
		if hasPrefixFold(s, q) {
			return s[:len(q)]
		}
		if q[0] == '&' && hasPrefixFold(s, `\u0026`) && hasPrefixFold(s[6:], q[1:]) {
			return s[:len(q)+5]
		}
	}
	return ""
}

// entityQuotedEnd returns the end of a value that starts at i after the
// escaped quote q: the same escaped quote, a raw quote or the end of the
// line.
func entityQuotedEnd(s string, i int, q string) int {
	for j := i; j < len(s) && j-i < maxNextLine; j++ {
		switch c := s[j]; {
		case c == '\n' || c == '\r' || c == '"' || c == '<' || c == '>':
			return j
		case (c == '&' || c == '\\') && hasPrefixFold(s[j:], q):
			return j
		case c == '\\' && j+1 < len(s) && (s[j+1] == 'n' || s[j+1] == 'r' || s[j+1] == '"'):
			return j
		}
	}
	return min(len(s), i+maxNextLine)
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
// opening quote being unescaped at string level k, with ctx strings open
// around it on its line: the closing quote, a quote that closes a string
// around it, or the end of the line. In plain text (ctx 0) a double quote
// inside single quotes is part of the value (password='hun"ter2'), and so
// is a doubled quote, as SQL and YAML write a quote inside quotes.
func quotedEnd(s string, i int, q byte, k, ctx int) int {
	for j := i; j < len(s); {
		if strings.HasPrefix(s[j:], Mark) {
			j += len(Mark)
			continue
		}
		switch c := s[j]; {
		case c == q && ctx == 0 && k == 0 && j > i && j+1 < len(s) && s[j+1] == q:
			j += 2
			continue
		case c == '\n' || c == '\r' || c == q || c == '"' && (ctx > 0 || k > 0):
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

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix
// p in any case.
func hasPrefixFold(s, p string) bool { return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) }

// encodedEnd reports whether s starts with a URL-encoded byte that ends a
// URL-encoded value: an ampersand, space, quote, apostrophe, angle bracket, '#' or ';'.
func encodedEnd(s string) bool {
	for _, e := range [...]string{"%26", "%20", "%22", "%27", "%3c", "%3e", "%23", "%3b"} {
		if hasPrefixFold(s, e) {
			return true
		}
	}
	return false
}

// plainWord reports whether v is one short word of letters, in lower case
// or capitalised ("google", "None"): a setting's name, not a credential,
// which has digits, punctuation or mixed case.
func plainWord(v string) bool {
	if len(v) == 0 || len(v) > 12 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || i == 0 && 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// indentOf returns the indentation of the line that holds s[j], counting
// from the line's start: a newline, or a newline escaped in a JSON string.
// It looks back maxIndentScan bytes at most, so that a long line of keys
// is not read back to its start for each; a key further into its line
// than that is taken as not indented.
func indentOf(s string, j int) int {
	from := max(0, j-maxIndentScan)
	start := from + strings.LastIndexAny(s[from:j], "\r\n") + 1
	if k := strings.LastIndex(s[start:j], `\n`); k >= 0 {
		start += k + 2
	}
	n := 0
	for start+n < j && (s[start+n] == ' ' || s[start+n] == '\t') {
		n++
	}
	return n
}

// maxIndentScan bounds the bytes indentOf reads back from a key.
const maxIndentScan = 256

// maxNextLine bounds the bytes nextLineValue reads after a key.
const maxNextLine = 4096

// nextLineValue returns the extent of the value of a key whose own line
// has none, from i, just after the key's separator: the line after it,
// indented deeper than the key (keyIndent) or one word of letters and
// digits with a digit in it ("password:\n  v", "API token:\nab12cd34");
// for a YAML block scalar ("password: |"), every line after it indented
// deeper. The lines may be those of a JSON string ("\n" escaped). A line
// that is itself a key ("user: x", "- item") is no value. ok is false if
// there is none. The key starts at s[key]; its indentation is measured only
// once a line break follows it, so that a long line of keys with no value
// (`password=\'` again and again) is not read back to its start for each.
func nextLineValue(s string, i, key int) (start, end int, ok bool) {
	block := false
	if i < len(s) && (s[i] == '|' || s[i] == '>') {
		block = true
		i++
		for i < len(s) && strings.IndexByte("+-0123456789 \t", s[i]) >= 0 {
			i++
		}
	}
	// The line's end, raw or escaped.
	newline := func(i int) (int, bool, bool) {
		switch {
		case strings.HasPrefix(s[i:], "\r\n"):
			return i + 2, false, true
		case i < len(s) && (s[i] == '\n' || s[i] == '\r'):
			return i + 1, false, true
		case strings.HasPrefix(s[i:], `\r\n`):
			return i + 4, true, true
		case strings.HasPrefix(s[i:], `\n`) || strings.HasPrefix(s[i:], `\r`):
			return i + 2, true, true
		}
		return i, false, false
	}
	// line returns the indentation, start and end of the text of the line
	// that starts at i, and where the next line starts.
	line := func(i int, escaped bool) (indent, from, to, next int) {
		for i < len(s) {
			switch {
			case s[i] == ' ':
				indent++
				i++
				continue
			case s[i] == '\t':
				indent += 4
				i++
				continue
			case escaped && strings.HasPrefix(s[i:], `\t`):
				indent += 4
				i += 2
				continue
			}
			break
		}
		from = i
		for i < len(s) && i-from < maxNextLine {
			c := s[i]
			if c == '\n' || c == '\r' || (c == '"' && escaped) {
				break
			}
			if c == '\\' {
				if !escaped {
					i++
					continue
				}
				if i+1 < len(s) && (s[i+1] == 'n' || s[i+1] == 'r') {
					break
				}
				i += 2
				continue
			}
			i++
		}
		to = trimEnd(s, from, min(i, len(s)))
		return indent, from, to, i
	}
	i, escaped, ok := newline(i)
	if !ok {
		return 0, 0, false
	}
	keyIndent := indentOf(s, key)
	indent, from, to, next := line(i, escaped)
	v := s[from:to]
	if v == "" || strings.HasPrefix(v, Mark) || strings.Contains(v, ": ") || strings.HasSuffix(v, ":") ||
		strings.HasPrefix(v, "- ") || strings.HasPrefix(v, "#") {
		return 0, 0, false
	}
	if !block && (indent <= keyIndent && !credentialWord(v) || !secretLike(v)) {
		return 0, 0, false
	}
	if block && indent <= keyIndent {
		return 0, 0, false
	}
	start, end = from, to
	for block {
		n, esc, ok := newline(next)
		if !ok || esc != escaped {
			break
		}
		in, f, t, nx := line(n, escaped)
		if in <= keyIndent || f == t {
			break
		}
		end, next = t, nx
	}
	return start, end, true
}

// secretLike reports whether v, the value on the line after a key without
// a YAML block indicator, may be a secret rather than code ("if token:\n
// refresh()") or prose: one word, without brackets, quotes or separators,
// with a digit, a capital or a symbol in it.
func secretLike(v string) bool {
	if strings.ContainsAny(v, " \t()[]{};,<>\"'`") {
		return false
	}
	return strings.ContainsAny(v, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ~+/=.-!@#$%^&*")
}

// credentialWord reports whether v, alone on its line, looks like a
// credential: one word of at least 8 letters, digits and "._~+/=-", with a
// digit in it.
func credentialWord(v string) bool {
	if len(v) < 8 || !strings.ContainsAny(v, "0123456789") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isNameByte(c) && strings.IndexByte("~+/=", c) < 0 {
			return false
		}
	}
	return true
}

// xmlOpenRE matches an XML start tag, also with its brackets escaped as
// JSON ("\u003c", once or more) or HTML ("&lt;") escape them.
var xmlOpenRE = regexp.MustCompile(`(?i)(?:<|\\+u003c|&lt;)([A-Za-z_][A-Za-z0-9_.:\x{200B}-\x{200D}\x{2060}\x{FEFF}\x{00AD}-]{0,127})(?:(?:\s|\\+[nrt])[^<>]{0,512}?)?(?:>|\\+u003e|&gt;)`)

// xmlTagRE matches the start of the next tag after an element's text, and
// its slash if it is an end tag.
var xmlTagRE = regexp.MustCompile(`(?i)(?:<|\\+u003c|&lt;)(/?)`)

// xmlAttrRE matches the start of an attribute of a pair, name, key or
// value, and its opening quote, raw, escaped in a JSON string or in HTML.
var xmlAttrRE = regexp.MustCompile(`(?i)(?:\s|\\+[nrt])(name|key|value)\s*=\s*(\\*"|'|&quot;|&#34;)`)

// secretPair reports whether the start tag s[from:to] names a secret in a
// name or key attribute, and returns the extent of its value attribute's
// value, or -1, -1 if it has none.
func secretPair(s string, from, to int) (named bool, vstart, vend int) {
	vstart, vend = -1, -1
	tag := s[from:to]
	for _, a := range xmlAttrRE.FindAllStringSubmatchIndex(tag, -1) {
		q := tag[a[4]:a[5]]
		start := a[1]
		n := strings.Index(tag[start:], q)
		if n < 0 {
			continue
		}
		v := tag[start : start+n]
		if strings.EqualFold(tag[a[2]:a[3]], "value") {
			vstart, vend = from+start, from+start+n
			continue
		}
		if v = stripInvisible(strings.ToLower(strings.TrimSpace(v))); v != "" && !strings.ContainsAny(v, " \t") &&
			kindOf(v, ':', false) != notSecret {
			named = true
		}
	}
	return named, vstart, vend
}

// xmlValues replaces the text of the XML elements whose names say they
// hold credentials: <password>v</password>, <ns:ApiKey>v</ns:ApiKey>.
func xmlValues(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range xmlOpenRE.FindAllStringSubmatchIndex(s, -1) {
		if m[0] < last {
			continue
		}
		name := stripInvisible(strings.ToLower(s[m[2]:m[3]]))
		if k := strings.LastIndexByte(name, ':'); k >= 0 {
			name = name[k+1:]
		}
		if kindOf(name, ':', false) == notSecret && !strings.HasSuffix(name, "signature") {
			// A name and value pair: <add key="DbPassword" value="v"/>,
			// <entry key="password">v</entry>.
			named, vstart, vend := secretPair(s, m[0], m[1])
			if !named {
				continue
			}
			if vstart >= 0 {
				if v := s[vstart:vend]; v != "" && !strings.HasPrefix(v, Mark) {
					b.WriteString(s[last:vstart])
					b.WriteString(Mark)
					last = vend
				}
				continue
			}
		}
		// The text runs to the next tag, which must be an end tag.
		start := m[1]
		t := xmlTagRE.FindStringSubmatchIndex(s[start:min(len(s), start+maxNextLine)])
		if t == nil || t[3] == t[2] {
			continue
		}
		end := start + t[0]
		v := strings.TrimSpace(s[start:end])
		if v == "" || strings.HasPrefix(v, Mark) {
			continue
		}
		// Keep the space around the text.
		lead := strings.Index(s[start:end], v[:1])
		b.WriteString(s[last : start+lead])
		b.WriteString(Mark)
		last = start + lead + len(v)
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
