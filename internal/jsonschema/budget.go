package jsonschema

// This file is toolrun's addition to the fork: a step budget and a context
// for one validation, so that no schema and no input can hold a run past its
// deadline. See README.toolrun.md.

import (
	"context"
	"errors"
)

// ErrBudget is returned by [Schema.ValidateBounded] when the validation
// needed more steps than it was allowed.
var ErrBudget = errors.New("validation needs too many steps")

// ctxCheckEvery is how many steps pass between two looks at the context.
const ctxCheckEvery = 256

// budget counts the steps of one validation. A nil *budget never runs out.
type budget struct {
	ctx   context.Context
	left  int
	count int
}

// abortError carries the reason a validation stopped, through a panic that
// only ValidateBounded recovers.
type abortError struct{ err error }

func (b *budget) step() {
	if b == nil {
		return
	}
	b.left--
	if b.left < 0 {
		b.abort(ErrBudget)
	}
	b.count++
	if b.count%ctxCheckEvery == 0 {
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

// ValidateBounded is [Schema.Validate] with at most maxSteps evaluations of
// a schema against a value, stopping early when ctx is done. It returns
// ErrBudget, ctx's error or a match error (such as a regexp timeout in
// patternProperties) when it stops early, and otherwise what Validate
// returns.
func (sch *Schema) ValidateBounded(ctx context.Context, v any, maxSteps int) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := &budget{ctx: ctx, left: maxSteps}
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(abortError)
			if !ok {
				panic(r)
			}
			err = a.err
		}
	}()
	return sch.validate(v, nil, nil, nil, false, nil, b)
}

// MatchErrorer is implemented by a [Regexp] whose match can fail to reach a
// verdict, such as a backtracking engine under a timeout.
type MatchErrorer interface {
	MatchStringErr(s string) (bool, error)
}

func matchString(re Regexp, s string) (bool, error) {
	if m, ok := re.(MatchErrorer); ok {
		return m.MatchStringErr(s)
	}
	return re.MatchString(s), nil
}
