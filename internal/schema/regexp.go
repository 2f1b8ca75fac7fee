package schema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2/v2"

	"github.com/toolrun/toolrun/internal/jsonschema"
)

// MatchTimeout bounds one match of a pattern that only an ECMAScript engine
// compiles, since such an engine backtracks and `^(a+)+$` takes exponential
// time on a long input. The engine reads a coarse clock, so a match may
// run up to about twice as long before it stops. A validation whose
// context ends during such a match returns at once; the match ends by
// itself within this bound. All matches of one validation together take
// at most [MaxPatternTime].
const MatchTimeout = 100 * time.Millisecond

// errMatchTimeout says a pattern could not decide a match in time.
var errMatchTimeout = errors.New("the match took longer than 100ms")

// compilePattern compiles a pattern keyword. JSON Schema patterns are
// ECMA-262 regular expressions. A pattern RE2 compiles is matched by RE2,
// in linear time; the few RE2 lacks (lookaround, backreferences, as zod
// emits) are matched by regexp2 in ECMAScript mode under MatchTimeout.
//
// ECMAScript's \s and \S take in more whitespace than RE2's (vertical tab,
// no-break spaces, the Unicode space separators, line and paragraph
// separators, the byte order mark); they are spelt out for RE2, and a
// pattern with \S inside a class, which RE2 cannot spell, goes to regexp2.
func compilePattern(p string) (jsonschema.Regexp, error) {
	if q, ok := ecmaSpaces(p); ok {
		if re, err := regexp.Compile(q); err == nil {
			if q == p {
				return re, nil
			}
			return re2Regexp{re, p}, nil
		}
	}
	re, err := regexp2.Compile(p, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = MatchTimeout
	return ecmaRegexp{re}, nil
}

// ecmaSpace is the body of a class of ECMAScript's white space and line
// terminators, the characters its \s matches, in RE2's syntax.
const ecmaSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// ecmaSpaces rewrites p's \s and \S as ECMAScript reads them, for RE2. It
// returns false for a \S inside a class.
func ecmaSpaces(p string) (string, bool) {
	if !strings.Contains(p, `\s`) && !strings.Contains(p, `\S`) {
		return p, true
	}
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			i++
			switch n := p[i]; {
			case n == 's' && inClass:
				b.WriteString(ecmaSpace)
			case n == 's':
				b.WriteString("[" + ecmaSpace + "]")
			case n == 'S' && inClass:
				return "", false
			case n == 'S':
				b.WriteString("[^" + ecmaSpace + "]")
			default:
				b.WriteByte(c)
				b.WriteByte(n)
			}
			continue
		case c == '[' && !inClass:
			inClass = true
		case c == ']' && inClass:
			inClass = false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// re2Regexp is a pattern RE2 matches in a rewritten form; String gives
// the pattern as the schema has it.
type re2Regexp struct {
	*regexp.Regexp
	src string
}

func (r re2Regexp) String() string { return r.src }

// ecmaRegexp is a backtracking pattern whose match may time out.
type ecmaRegexp struct{ re *regexp2.Regexp }

func (r ecmaRegexp) String() string { return r.re.String() }

// MatchString reports a timed-out match as no match; the validator calls
// MatchStringErr instead, which says why.
func (r ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return err == nil && ok
}

// MatchStringErr implements jsonschema.MatchErrorer.
func (r ecmaRegexp) MatchStringErr(s string) (bool, error) {
	ok, err := r.re.MatchString(s)
	if err != nil {
		return false, errMatchTimeout
	}
	return ok, nil
}

// liveMatches counts the matches still running, including those a
// validation stopped waiting for, and matchesStarted every match begun in
// a goroutine; tests read them.
var liveMatches, matchesStarted atomic.Int32

// MatchStringContext implements jsonschema.MatchContexter: it returns
// ctx's error as soon as ctx ends, and leaves the match to end by its
// timeout.
func (r ecmaRegexp) MatchStringContext(ctx context.Context, s string) (bool, error) {
	if ctx.Done() == nil {
		return r.MatchStringErr(s)
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	liveMatches.Add(1)
	matchesStarted.Add(1)
	go func() {
		defer liveMatches.Add(-1)
		defer func() {
			// A panic here would end the process: no caller is
			// above this goroutine to recover it.
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("%w: the pattern engine failed: %v", ErrInternal, p)}
			}
		}()
		ok, err := r.MatchStringErr(s)
		done <- result{ok, err}
	}()
	select {
	case res := <-done:
		return res.ok, res.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
