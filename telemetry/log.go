package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log keys of the trace context on every line written inside a request.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// logHandler stamps records with the trace and span ids of the span in
// their context. It does no I/O of its own. (Under a WithGroup logger the
// ids land inside the group, as any attribute would; the platform's
// loggers use no groups.)
type logHandler struct {
	inner slog.Handler
}

// LogHandler wraps h so that every record logged with a context that
// carries a valid span (logger.InfoContext(ctx, …) inside a request) has
// trace_id and span_id attributes. Wrapping twice is harmless.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{inner: h}
}

// Logger returns l with its handler wrapped by LogHandler.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if _, ok := l.Handler().(*logHandler); ok {
		return l
	}
	return slog.New(LogHandler(l.Handler()))
}

func (h *logHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return h.inner.Enabled(ctx, lvl)
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{inner: h.inner.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{inner: h.inner.WithGroup(name)}
}
