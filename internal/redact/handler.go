package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync/atomic"
)

// NewHandler returns a handler that passes each record to h with [String]
// applied to its message and to every string, error, []byte and
// json.RawMessage value, in groups too, and to the text of any other value
// that holds a secret. A handler from NewHandler is returned as it is.
//
// h is the user's code, called on goroutines toolrun started, where a
// panic would end the process: the handler recovers a panic of h, drops
// that record, and reports the first panic of h (with its stack, redacted)
// on standard error, since h cannot be trusted to report it.
func NewHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(guard); ok {
		return h
	}
	return guard{handler{h}, new(atomic.Bool)}
}

// guard recovers the panics of the handler it wraps.
type guard struct {
	h slog.Handler
	// reported is shared by the handlers WithAttrs and WithGroup derive,
	// so that a panicking handler is reported once, not once per logger.
	reported *atomic.Bool
}

// recovered reports the panic v of the wrapped handler, if there is one
// and it is the first.
func (g guard) recovered(v any, in string) {
	if v == nil || !g.reported.CompareAndSwap(false, true) {
		return
	}
	defer func() { _ = recover() }() // standard error is the last resort
	fallback().Error("toolrun: the logger's handler panicked; the record is dropped, as is every later record it panics on, which are not reported",
		"in", in, "panic", String(fmt.Sprint(v)), "stack", String(string(debug.Stack())))
}

// fallback returns the logger a panicking handler is reported to.
var fallback = func() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

func (g guard) Enabled(ctx context.Context, l slog.Level) (ok bool) {
	defer func() { g.recovered(recover(), "Enabled") }()
	return g.h.Enabled(ctx, l)
}

func (g guard) Handle(ctx context.Context, r slog.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(v, "Handle")
			err = fmt.Errorf("the log handler panicked: %v", v)
		}
	}()
	return g.h.Handle(ctx, r)
}

func (g guard) WithAttrs(attrs []slog.Attr) (out slog.Handler) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(v, "WithAttrs")
			out = g
		}
	}()
	return guard{g.h.WithAttrs(attrs), g.reported}
}

func (g guard) WithGroup(name string) (out slog.Handler) {
	defer func() {
		if v := recover(); v != nil {
			g.recovered(v, "WithGroup")
			out = g
		}
	}()
	return guard{g.h.WithGroup(name), g.reported}
}

// handler is the handler NewHandler returns.
type handler struct{ h slog.Handler }

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = attr(a)
	}
	return handler{h.h.WithAttrs(out)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.h.WithGroup(name)} }

// attr returns a with its value redacted.
func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, String(x.Error()))
		case json.RawMessage:
			return slog.String(a.Key, String(string(x)))
		case []byte:
			return slog.String(a.Key, String(string(x)))
		case []string:
			if x == nil {
				break
			}
			out := make([]string, len(x))
			for i, s := range x {
				out[i] = String(s)
			}
			return slog.Any(a.Key, out)
		default:
			// A value the handler would print some other way: only if its
			// text holds a secret is it replaced by its redacted text.
			if s := fmt.Sprintf("%+v", x); String(s) != s {
				return slog.String(a.Key, String(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
