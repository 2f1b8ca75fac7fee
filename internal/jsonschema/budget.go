package jsonschema

// This file is toolrun's addition to the fork: a budget and a context for
// one validation, so that no schema and no input can hold a run past its
// deadline or crash it. See README.toolrun.md.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// ErrBudget is wrapped by the error of [Schema.ValidateBounded] when the
// validation needed more steps, or more units of work, than it was
// allowed.
var ErrBudget = errors.New("validation needs too much work")

// ErrPatternTime is returned by [Schema.ValidateBounded] when the matches of
// patterns that may backtrack took longer, in total, than
// [Bounds.MaxPatternTime].
var ErrPatternTime = errors.New("pattern matches take too long in total")

// CheckEvery is how many units of work pass between two looks at the
// context. A unit is work of bounded cost, about a microsecond at most on a
// current CPU (see [UnitTime]):
//
//   - one evaluation of a schema against a value, plus one per item or
//     property of that value (the evaluation walks them and copies their
//     names for unevaluated*), plus one per name of the schema's required,
//     dependentRequired, dependencies and dependentSchemas, plus one per 64
//     scopes walked looking for a cycle or a dynamic or recursive anchor;
//   - one JSON value compared or hashed (const, enum, uniqueItems), plus
//     one per KiB of a string among them;
//   - one KiB of a string whose length is counted (minLength, maxLength);
//   - for a pattern that reports what it reads ([ChargedMatcher], RE2):
//     what it reports, by the runes it reads and the size of its program;
//     for another linear-time pattern, one per KiB matched;
//   - for a pattern that may backtrack ([MatchContexter]), one per
//     UnitTime the match took;
//   - 256 bits of a number's numerator and denominator in arithmetic.
//
// Each is bounded in cost, given the limits on number length that the
// caller enforces, so a validation returns within the cost of CheckEvery
// units after its context ends, and [Bounds.MaxWork] bounds its CPU time.
const CheckEvery = 256

// UnitTime is the nominal cost of one unit of work, what a backtracking
// match is charged per unit by the time it took. The other units are
// counted, not timed; their costs were measured to stay within it.
const UnitTime = time.Microsecond

// Bounds limits one validation.
type Bounds struct {
	// MaxSteps bounds the evaluations of a schema against a value; past
	// it the validation stops with ErrBudget. Zero means no limit.
	MaxSteps int
	// MaxWork bounds the units of work (see [CheckEvery]) of the whole
	// validation; past it the validation stops with ErrBudget before
	// doing the work that would pass it. Zero means no limit.
	MaxWork int
	// MaxPatternTime bounds the total time of the matches of patterns
	// that implement [MatchContexter]; past it the validation stops with
	// ErrPatternTime. Zero means no limit.
	MaxPatternTime time.Duration
	// Now is the clock MaxPatternTime is measured with; nil means
	// time.Now.
	Now func() time.Time
	// Work, if non-nil, is set to the units of work the validation did,
	// whether it finished or stopped; tests bound a validation's cost
	// with it without reading a clock.
	Work *int
}

// PanicError is returned by [Schema.ValidateBounded] for a panic inside
// the validator: a bug, reported as an error so that no input can crash
// the host.
type PanicError struct {
	// InstanceLocation is the location in the value of the evaluation
	// that panicked.
	InstanceLocation []string
	// Value is what the validator panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("the validator failed at %s: %v", displayLocation(e.InstanceLocation), e.Value)
}

func displayLocation(loc []string) string {
	if len(loc) == 0 {
		return "the root of the value"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(escape(tok))
	}
	return b.String()
}

// budget counts the work of one validation. A nil *budget never runs out.
type budget struct {
	ctx       context.Context
	left      int // steps; negative bounds means none
	bounded   bool
	units     int // units of work since the start
	maxSteps  int
	maxWork   int // 0 means no limit
	work      *int
	nextCheck int
	// loc is the instance location of the latest evaluation, for a
	// PanicError.
	loc []string

	maxPattern time.Duration
	pattern    time.Duration // spent matching patterns that may backtrack
	now        func() time.Time

	// testHookCharge, if non-nil, is called with the units done after
	// each charge.
	testHookCharge func(units int)
}

// abortError carries the reason a validation stopped, through a panic that
// only ValidateBounded recovers.
type abortError struct{ err error }

// step counts one evaluation of a schema against v, the value at loc: one
// unit, and one per item or property of v, which the evaluation walks.
func (b *budget) step(loc []string, v any) {
	if b == nil {
		return
	}
	b.loc = loc
	if b.bounded {
		b.left--
		if b.left < 0 {
			b.abort(fmt.Errorf("%w: more than %d evaluations of a schema against a value", ErrBudget, b.maxSteps))
		}
	}
	n := 1
	switch v := v.(type) {
	case map[string]any:
		n += len(v)
	case []any:
		n += len(v)
	}
	b.charge(n)
}

// strCost is the units for reading s once: one per KiB.
func strCost(s string) int { return len(s) / 1024 }

// charge counts n units of work and looks at the context once every
// CheckEvery units. It stops the validation with ErrBudget when the units
// pass MaxWork, before the work they stand for is done: callers charge
// first.
func (b *budget) charge(n int) {
	if b == nil {
		return
	}
	if b.maxWork > 0 && b.units+n > b.maxWork {
		// Not counted: the work is not done.
		b.abort(fmt.Errorf("%w: more than %d units of work", ErrBudget, b.maxWork))
	}
	b.units += n
	if b.testHookCharge != nil {
		b.testHookCharge(b.units)
	}
	if b.units >= b.nextCheck {
		b.nextCheck = b.units + CheckEvery
		if err := b.ctx.Err(); err != nil {
			b.abort(err)
		}
	}
}

func (b *budget) abort(err error) {
	if b == nil {
		return
	}
	panic(abortError{err})
}

// ValidateBounded is [Schema.Validate] within bounds, stopping early when
// ctx is done. It returns ErrBudget, ErrPatternTime, ctx's error or a match
// error (such as a regexp timeout in patternProperties) when it stops
// early, a *PanicError if the validator panicked, and otherwise what
// Validate returns.
func (sch *Schema) ValidateBounded(ctx context.Context, v any, bounds Bounds) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	return sch.validateBudget(v, newBudget(ctx, bounds))
}

func newBudget(ctx context.Context, bounds Bounds) *budget {
	b := &budget{ctx: ctx, left: bounds.MaxSteps, bounded: bounds.MaxSteps > 0, nextCheck: CheckEvery,
		maxSteps: bounds.MaxSteps, maxWork: bounds.MaxWork, work: bounds.Work,
		maxPattern: bounds.MaxPatternTime, now: bounds.Now}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

func (sch *Schema) validateBudget(v any, b *budget) (err error) {
	defer func() {
		if b.work != nil {
			*b.work = b.units
		}
		if r := recover(); r != nil {
			if a, ok := r.(abortError); ok {
				err = a.err
				return
			}
			err = &PanicError{InstanceLocation: append([]string(nil), b.loc...), Value: r, Stack: debug.Stack()}
		}
	}()
	return sch.validate(v, nil, nil, nil, false, nil, b)
}

// MatchErrorer is implemented by a [Regexp] whose match can fail to reach a
// verdict, such as a backtracking engine under a timeout.
type MatchErrorer interface {
	MatchStringErr(s string) (bool, error)
}

// MatchContexter is implemented by a [Regexp] whose match may take long (a
// backtracking engine): it returns ctx's error as soon as ctx is done,
// even while the match goes on, and gives up the match (an error) after
// timeout, or sooner by its own limit.
type MatchContexter interface {
	MatchStringContext(ctx context.Context, s string, timeout time.Duration) (bool, error)
}

// ChargedMatcher is implemented by a [Regexp] that counts the work of its
// own match (RE2, whose cost is the runes it reads times the size of its
// program). It calls charge with units of work before doing them; charge
// may stop the validation by panicking, which the matcher must let
// through.
type ChargedMatcher interface {
	MatchStringCharged(s string, charge func(units int)) bool
}

// matchString matches s against re. A match that may backtrack is given
// the validation's context and a timeout of what is left of the pattern
// time, the work budget and the context's deadline; it is charged by the
// time it took and followed by a look at the context. A match that counts
// its own work charges as it goes; another linear-time match is charged by
// its length.
func (b *budget) matchString(re Regexp, s string) (bool, error) {
	if m, ok := re.(MatchContexter); ok && b != nil {
		start := b.now()
		ok, err := m.MatchStringContext(b.ctx, s, b.patternTimeout())
		took := b.now().Sub(start)
		b.pattern += took
		if cerr := b.ctx.Err(); cerr != nil {
			b.abort(cerr)
		}
		if b.maxPattern > 0 && b.pattern > b.maxPattern {
			b.abort(fmt.Errorf("%w (more than %v)", ErrPatternTime, b.maxPattern))
		}
		b.charge(1 + int(took/UnitTime))
		return ok, err
	}
	if m, ok := re.(ChargedMatcher); ok {
		b.charge(1)
		return m.MatchStringCharged(s, b.charge), nil
	}
	b.charge(1 + strCost(s))
	if m, ok := re.(MatchErrorer); ok {
		return m.MatchStringErr(s)
	}
	return re.MatchString(s), nil
}

// patternTimeout is how long the next backtracking match may take: what
// is left of MaxPatternTime, of MaxWork at UnitTime a unit, and of the
// time until the context's deadline, the least of them; zero means no
// limit from the budget.
func (b *budget) patternTimeout() time.Duration {
	var d time.Duration
	limit := func(l time.Duration) {
		if l < time.Millisecond {
			l = time.Millisecond
		}
		if d == 0 || l < d {
			d = l
		}
	}
	if b.maxPattern > 0 {
		limit(b.maxPattern - b.pattern)
	}
	if b.maxWork > 0 {
		limit(time.Duration(b.maxWork-b.units) * UnitTime)
	}
	if dl, ok := b.ctx.Deadline(); ok {
		limit(time.Until(dl))
	}
	return d
}

// testHookValue, if non-nil, is called for every value equals compares
// and writeHash hashes; tests count with it the work done after a context
// ends.
var testHookValue func()
