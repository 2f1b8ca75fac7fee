package schema

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
// ECMA-262 regular expressions. A pattern RE2 compiles to at most
// [MaxRE2Program] instructions is matched by RE2, in time linear in the
// string and in the size of its program, charged to the validation's
// budget as it reads; the others (lookaround, backreferences, as zod
// emits, and bounded repeats that RE2 would unroll into a huge program)
// are matched by regexp2 in ECMAScript mode under MatchTimeout.
//
// ECMAScript's \s and \S take in more whitespace than RE2's (vertical tab,
// no-break spaces, the Unicode space separators, line and paragraph
// separators, the byte order mark); they are spelt out for RE2, and a
// pattern with \S inside a class, which RE2 cannot spell, goes to regexp2.
func compilePattern(p string) (jsonschema.Regexp, error) {
	if q, ok := ecmaSpaces(p); ok {
		if n, ok := re2ProgramSize(q); ok && n <= MaxRE2Program {
			if re, err := regexp.Compile(q); err == nil {
				return newRE2Regexp(re, p, n), nil
			}
		}
	}
	re, err := regexp2.Compile(p, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = MatchTimeout
	return ecmaRegexp{re}, nil
}

// MaxRE2Program is the most instructions a pattern's RE2 program may have
// for RE2 to match it. RE2 reads each rune once but may step every
// instruction of its program for it: `[a-z0-9.-]{1,253}\.[a-z]{2,63}` is
// 632 instructions, and 255 bytes of bounded repeats make 34,000 (up to
// millions within Go's limits), each matched rune then costing tens of
// microseconds or more and the match's machine megabytes. A larger program goes to the backtracking engine,
// which keeps repeats as loops, under its timeouts.
const MaxRE2Program = 20_000

// re2ProgramSize is the number of instructions of p's RE2 program, as
// regexp compiles it; false if RE2 does not compile p.
func re2ProgramSize(p string) (int, bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0, false
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, false
	}
	return len(prog.Inst), true
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

// re2Regexp is a pattern RE2 matches, perhaps in a rewritten form;
// String gives the pattern as the schema has it.
type re2Regexp struct {
	*regexp.Regexp
	src string
	// perKRune is the units of work charged per 1024 runes read.
	perKRune int
}

// RE2's costs, measured (see docs/validation.md): a match steps at most
// every instruction of the program for each rune it reads, at up to
// about 10 ns an instruction through a reader, plus a fixed cost per
// rune; a unit is about a microsecond. So n runes of a program of m
// instructions cost n*(m+re2RuneOverhead)/re2InstsPerUnit units.
const (
	re2InstsPerUnit  = 128
	re2RuneOverhead  = 16
	re2DirectMaxCost = jsonschema.CheckEvery // a match estimated under this runs without a reader
)

func newRE2Regexp(re *regexp.Regexp, src string, insts int) re2Regexp {
	return re2Regexp{Regexp: re, src: src, perKRune: (1024*(insts+re2RuneOverhead) + re2InstsPerUnit - 1) / re2InstsPerUnit}
}

func (r re2Regexp) String() string { return r.src }

// runesCharged counts the runes RE2 matches read through chargedReader;
// tests bound a match's work after its context ends with it.
var runesCharged atomic.Int64

// MatchStringCharged implements jsonschema.ChargedMatcher. A match whose
// whole string costs at most re2DirectMaxCost units is charged that and
// run at once; a longer one reads its string through a reader that
// charges every chunk of runes before RE2 sees them, so that a budget
// spent or a context ended stops the match within a chunk (the charge
// panics through regexp, which holds no lock across a read).
func (r re2Regexp) MatchStringCharged(s string, charge func(units int)) bool {
	cost := int((int64(len(s))*int64(r.perKRune) + 1023) / 1024)
	if cost <= re2DirectMaxCost {
		charge(cost)
		return r.Regexp.MatchString(s)
	}
	// Each chunk costs about 16 units, at least one rune.
	chunk := max(1, 16*1024/r.perKRune)
	return r.Regexp.MatchReader(&chargedReader{s: s, chunk: chunk, units: max(1, (chunk*r.perKRune+1023)/1024), charge: charge})
}

// chargedReader reads a string rune by rune, charging units before every
// chunk of runes.
type chargedReader struct {
	s      string
	i      int
	left   int // runes before the next charge
	chunk  int
	units  int
	charge func(units int)
}

func (r *chargedReader) ReadRune() (rune, int, error) {
	if r.i >= len(r.s) {
		return 0, 0, io.EOF
	}
	if r.left == 0 {
		r.charge(r.units)
		runesCharged.Add(int64(r.chunk))
		r.left = r.chunk
	}
	r.left--
	c, size := utf8.DecodeRuneInString(r.s[r.i:])
	r.i += size
	return c, size, nil
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
	if err != nil && r.re.MatchTimeout < MatchTimeout {
		return false, fmt.Errorf("the match took longer than the %v left to the validation", r.re.MatchTimeout.Round(time.Millisecond))
	}
	if err != nil {
		return false, errMatchTimeout
	}
	return ok, nil
}

// liveMatches counts the matches still running, including those a
// validation stopped waiting for, and matchesStarted every match begun in
// a goroutine; tests read them.
var liveMatches, matchesStarted atomic.Int32

// MatchStringContext implements jsonschema.MatchContexter: it gives the
// match at most timeout (and never more than MatchTimeout), returns ctx's
// error as soon as ctx ends, and leaves the match to end by its timeout,
// which the validation derives from its deadline.
func (r ecmaRegexp) MatchStringContext(ctx context.Context, s string, timeout time.Duration) (bool, error) {
	if timeout > 0 && timeout < r.re.MatchTimeout {
		// The copy shares the compiled program and its pools; only
		// the timeout differs.
		re := *r.re
		re.MatchTimeout = timeout
		r = ecmaRegexp{&re}
	}
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
