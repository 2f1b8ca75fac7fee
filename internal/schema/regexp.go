package schema

import (
	"errors"
	"regexp"
	"time"

	"github.com/dlclark/regexp2/v2"

	"github.com/toolrun/toolrun/internal/jsonschema"
)

// MatchTimeout bounds one match of a pattern that only an ECMAScript engine
// compiles, since such an engine backtracks and `^(a+)+$` takes exponential
// time on a long input.
const MatchTimeout = 100 * time.Millisecond

// errMatchTimeout says a pattern could not decide a match in time.
var errMatchTimeout = errors.New("the match took longer than 100ms")

// compilePattern compiles a pattern keyword. JSON Schema patterns are
// ECMA-262 regular expressions. A pattern RE2 compiles is matched by RE2,
// in linear time; the few RE2 lacks (lookaround, backreferences, as zod
// emits) are matched by regexp2 in ECMAScript mode under MatchTimeout.
func compilePattern(p string) (jsonschema.Regexp, error) {
	if re, err := regexp.Compile(p); err == nil {
		return re, nil
	}
	re, err := regexp2.Compile(p, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = MatchTimeout
	return ecmaRegexp{re}, nil
}

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
