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

// ErrBudget is returned by [Schema.ValidateBounded] when the validation
// needed more steps than it was allowed.
var ErrBudget = errors.New("validation needs too many steps")

// ErrPatternTime is returned by [Schema.ValidateBounded] when the matches of
// patterns that may backtrack took longer, in total, than
// [Bounds.MaxPatternTime].
var ErrPatternTime = errors.New("pattern matches take too long in total")

// CheckEvery is how many units of work pass between two looks at the
// context. A unit is one evaluation of a schema against a value, one JSON
// value compared or hashed (const, enum, uniqueItems), up to 1 KiB of a
// string matched by a linear-time pattern, or 256 bits of a number's
// numerator and denominator in arithmetic; each is bounded in cost, given
// the limits on number length that the caller enforces, so a validation
// returns within the cost of CheckEvery units after its context ends.
const CheckEvery = 256

// Bounds limits one validation.
type Bounds struct {
	// MaxSteps bounds the evaluations of a schema against a value; past
	// it the validation stops with ErrBudget. Zero means no limit.
	MaxSteps int
	// MaxPatternTime bounds the total time of the matches of patterns
	// that implement [MatchContexter]; past it the validation stops with
	// ErrPatternTime. Zero means no limit.
	MaxPatternTime time.Duration
	// Now is the clock MaxPatternTime is measured with; nil means
	// time.Now.
	Now func() time.Time
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

// step counts one evaluation of a schema against the value at loc.
func (b *budget) step(loc []string) {
	if b == nil {
		return
	}
	b.loc = loc
	if b.bounded {
		b.left--
		if b.left < 0 {
			b.abort(ErrBudget)
		}
	}
	b.charge(1)
}

// charge counts n units of work and looks at the context once every
// CheckEvery units.
func (b *budget) charge(n int) {
	if b == nil {
		return
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
		maxPattern: bounds.MaxPatternTime, now: bounds.Now}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

func (sch *Schema) validateBudget(v any, b *budget) (err error) {
	defer func() {
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
// even while the match goes on.
type MatchContexter interface {
	MatchStringContext(ctx context.Context, s string) (bool, error)
}

// matchString matches s against re. A match that may backtrack is given
// the validation's context, is timed against the total, and is followed by
// a look at the context; a linear-time match is charged by its length.
func (b *budget) matchString(re Regexp, s string) (bool, error) {
	if m, ok := re.(MatchContexter); ok && b != nil {
		start := b.now()
		ok, err := m.MatchStringContext(b.ctx, s)
		b.pattern += b.now().Sub(start)
		if cerr := b.ctx.Err(); cerr != nil {
			b.abort(cerr)
		}
		if b.maxPattern > 0 && b.pattern > b.maxPattern {
			b.abort(fmt.Errorf("%w (more than %v)", ErrPatternTime, b.maxPattern))
		}
		b.charge(1)
		return ok, err
	}
	b.charge(1 + len(s)/1024)
	if m, ok := re.(MatchErrorer); ok {
		return m.MatchStringErr(s)
	}
	return re.MatchString(s), nil
}

// testHookValue, if non-nil, is called for every value equals compares
// and writeHash hashes; tests count with it the work done after a context
// ends.
var testHookValue func()
