package schema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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
