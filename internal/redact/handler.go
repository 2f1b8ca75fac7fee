package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// NewHandler returns a handler that passes each record to h with [String]
// applied to its message and to every string, error, []byte and
// json.RawMessage value, in groups too, and to the text of any other value
// that holds a secret. A handler from NewHandler is returned as it is.
func NewHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(handler); ok {
		return h
	}
	return handler{h}
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
