package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// otlpHTTPExporter is an OTLP/HTTP (binary protobuf) trace exporter that
// encodes ended spans straight into one reused buffer. The SDK's own
// exporter first builds the protobuf message objects (a few allocations
// per attribute) and then marshals them; on a tools/call round that cost
// more than everything else telemetry does (see the Observability
// section of README.md). The wire format is the same: the tests decode it
// with the official OTLP types. It is used for http/protobuf unless TLS
// client settings (OTEL_EXPORTER_OTLP_*CERTIFICATE, *CLIENT_KEY) ask for
// what only the SDK's exporter supports; gRPC always uses the SDK's.
type otlpHTTPExporter struct {
	url     string
	header  http.Header
	client  *http.Client
	timeout time.Duration
	gzip    bool

	mu      sync.Mutex // one export at a time; guards the buffers
	buf     []byte
	zbuf    bytes.Buffer
	zw      *gzip.Writer
	stopped atomic.Bool
}

// leanOTLP returns the lean exporter for the traces target, or nil when
// the settings need the SDK's exporter.
func leanOTLP(getenv func(string) string, tgt *otlpTarget) (*otlpHTTPExporter, error) {
	sig := func(name string) string {
		return firstNonEmpty(getenv("OTEL_EXPORTER_OTLP_TRACES_"+name), getenv("OTEL_EXPORTER_OTLP_"+name))
	}
	if sig("CERTIFICATE") != "" || sig("CLIENT_CERTIFICATE") != "" || sig("CLIENT_KEY") != "" {
		return nil, nil
	}
	u, ok := tgt.httpURL("/v1/traces")
	if !ok {
		u = "http://localhost:4318/v1/traces"
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("telemetry: OTLP endpoint %q is not an http(s) URL", u)
	}
	e := &otlpHTTPExporter{url: u, header: http.Header{}, timeout: 10 * time.Second}
	if v := sig("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("telemetry: OTLP timeout %q is not a positive number of milliseconds", v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := strings.ToLower(sig("COMPRESSION")); c {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("telemetry: OTLP compression %q is not supported (gzip or none)", c)
	}
	for _, h := range []string{getenv("OTEL_EXPORTER_OTLP_HEADERS"), getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")} {
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				continue
			}
			if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
				v = dv
			}
			e.header.Set(k, strings.TrimSpace(v))
		}
	}
	e.header.Set("Content-Type", "application/x-protobuf")
	e.header.Set("User-Agent", "opsmcp-platform-otlp/1")
	if e.gzip {
		e.header.Set("Content-Encoding", "gzip")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// ExportSpans sends one batch of the SDK's spans.
func (e *otlpHTTPExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return exportBatch(ctx, e, spans)
}

// export sends one batch of the platform's own spans. It runs on the
// batch processor's goroutine, never on a request.
func (e *otlpHTTPExporter) export(ctx context.Context, spans []*span) error {
	return exportBatch(ctx, e, spans)
}

func (e *otlpHTTPExporter) shutdown(ctx context.Context) error { return e.Shutdown(ctx) }

// exportBatch encodes spans into e's buffer and posts them.
func exportBatch[S spanData](ctx context.Context, e *otlpHTTPExporter, spans []S) error {
	if e.stopped.Load() || len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = appendExportRequest(e.buf[:0], spans)
	return e.post(ctx)
}

// post sends e.buf (compressed when configured), retrying what OTLP/HTTP
// says to retry, within the export timeout. e.mu is held.
func (e *otlpHTTPExporter) post(ctx context.Context) error {
	body := e.buf
	if e.gzip {
		e.zbuf.Reset()
		if e.zw == nil {
			e.zw = gzip.NewWriter(&e.zbuf)
		} else {
			e.zw.Reset(&e.zbuf)
		}
		_, _ = e.zw.Write(body)
		_ = e.zw.Close()
		body = e.zbuf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	backoff := 250 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = e.header.Clone()
		resp, err := e.client.Do(req)
		if err != nil {
			return fmt.Errorf("otlp traces export: %w", err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
			return nil
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			wait := backoff
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("otlp traces export: HTTP %d, gave up: %w", resp.StatusCode, ctx.Err())
			case <-t.C:
			}
			backoff = min(2*backoff, 5*time.Second)
		default:
			return fmt.Errorf("otlp traces export: HTTP %d", resp.StatusCode)
		}
	}
}

// Shutdown stops exporting.
func (e *otlpHTTPExporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}

// Field numbers of opentelemetry/proto (collector/trace/v1, trace/v1,
// common/v1, resource/v1).
const (
	fExportResourceSpans = 1

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3

	fResourceAttributes = 1
	fResourceDropped    = 2

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3

	fScopeName       = 1
	fScopeVersion    = 2
	fScopeAttributes = 3

	fSpanTraceID      = 1
	fSpanSpanID       = 2
	fSpanTraceState   = 3
	fSpanParentSpanID = 4
	fSpanName         = 5
	fSpanKind         = 6
	fSpanStart        = 7
	fSpanEnd          = 8
	fSpanAttributes   = 9
	fSpanDroppedAttrs = 10
	fSpanEvents       = 11
	fSpanDroppedEvts  = 12
	fSpanLinks        = 13
	fSpanDroppedLinks = 14
	fSpanStatus       = 15
	fSpanFlags        = 16

	fEventTime       = 1
	fEventName       = 2
	fEventAttributes = 3
	fEventDropped    = 4

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkTraceState = 3
	fLinkAttributes = 4
	fLinkDropped    = 5
	fLinkFlags      = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKVKey   = 1
	fKVValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fArrayValues = 1

	spanFlagsHasIsRemote = 0x100
	spanFlagsIsRemote    = 0x200
)

// openMsg appends field f's tag and a one-byte length placeholder, and
// returns where the message body starts.
func openMsg(b []byte, f protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, f, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// closeMsg writes the length of the body that started at start, moving
// the body when the length needs more than one byte.
func closeMsg(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	for i := 1; i < k; i++ {
		b = append(b, 0)
	}
	copy(b[start-1+k:], b[start:start+n])
	protowire.AppendVarint(b[:start-1], uint64(n))
	return b
}

func appendString(b []byte, f protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, f, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, f protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, f, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendUvarint(b []byte, f protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, f, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, f protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, f, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, f protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, f, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

func unixNano(t time.Time) uint64 {
	if n := t.UnixNano(); n > 0 {
		return uint64(n)
	}
	return 0
}

func clamp32(v int) uint64 {
	switch {
	case v < 0:
		return 0
	case v > math.MaxUint32:
		return math.MaxUint32
	}
	return uint64(v)
}

// spanData is what the encoder reads of an ended span: the SDK's
// ReadOnlySpan and the platform's own span both provide it.
type spanData interface {
	Name() string
	SpanContext() trace.SpanContext
	Parent() trace.SpanContext
	SpanKind() trace.SpanKind
	StartTime() time.Time
	EndTime() time.Time
	Attributes() []attribute.KeyValue
	Links() []sdktrace.Link
	Events() []sdktrace.Event
	Status() sdktrace.Status
	InstrumentationScope() instrumentation.Scope
	Resource() *resource.Resource
	DroppedAttributes() int
	DroppedLinks() int
	DroppedEvents() int
}

// appendExportRequest encodes an ExportTraceServiceRequest: the spans
// grouped by resource, then by instrumentation scope, in first-seen
// order.
func appendExportRequest[S spanData](b []byte, spans []S) []byte {
	type group struct {
		res   *resource.Resource
		scope instrumentation.Scope
		spans []S
	}
	var groups []group
	for _, s := range spans {
		res, scope := s.Resource(), s.InstrumentationScope()
		i := 0
		for ; i < len(groups); i++ {
			if groups[i].res.Equivalent() == res.Equivalent() && groups[i].scope == scope {
				break
			}
		}
		if i == len(groups) {
			groups = append(groups, group{res: res, scope: scope})
		}
		groups[i].spans = append(groups[i].spans, s)
	}
	for i := 0; i < len(groups); {
		// One ResourceSpans per resource, with each of its scopes.
		res := groups[i].res
		var rs int
		b, rs = openMsg(b, fExportResourceSpans)
		var r int
		b, r = openMsg(b, fResourceSpansResource)
		for _, kv := range res.Attributes() {
			b = appendKeyValue(b, fResourceAttributes, kv)
		}
		b = closeMsg(b, r)
		for ; i < len(groups) && groups[i].res.Equivalent() == res.Equivalent(); i++ {
			g := groups[i]
			var ss int
			b, ss = openMsg(b, fResourceSpansScopeSpans)
			var sc int
			b, sc = openMsg(b, fScopeSpansScope)
			b = appendString(b, fScopeName, g.scope.Name)
			b = appendString(b, fScopeVersion, g.scope.Version)
			for _, kv := range g.scope.Attributes.ToSlice() {
				b = appendKeyValue(b, fScopeAttributes, kv)
			}
			b = closeMsg(b, sc)
			for _, s := range g.spans {
				b = appendSpan(b, s)
			}
			b = appendString(b, fScopeSpansSchemaURL, g.scope.SchemaURL)
			b = closeMsg(b, ss)
		}
		b = appendString(b, fResourceSpansSchemaURL, res.SchemaURL())
		b = closeMsg(b, rs)
	}
	return b
}

func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | spanFlagsHasIsRemote
	if parent.IsRemote() {
		f |= spanFlagsIsRemote
	}
	return f
}

func appendSpan[S spanData](b []byte, s S) []byte {
	var start int
	b, start = openMsg(b, fScopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, fSpanTraceID, tid[:])
	b = appendBytes(b, fSpanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, fSpanTraceState, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, fSpanParentSpanID, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	b = appendUvarint(b, fSpanKind, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, fSpanStart, unixNano(s.StartTime()))
	b = appendFixed64(b, fSpanEnd, unixNano(s.EndTime()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = appendUvarint(b, fSpanDroppedAttrs, clamp32(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		var e int
		b, e = openMsg(b, fSpanEvents)
		b = appendFixed64(b, fEventTime, unixNano(ev.Time))
		b = appendString(b, fEventName, ev.Name)
		for _, kv := range ev.Attributes {
			b = appendKeyValue(b, fEventAttributes, kv)
		}
		b = appendUvarint(b, fEventDropped, clamp32(ev.DroppedAttributeCount))
		b = closeMsg(b, e)
	}
	b = appendUvarint(b, fSpanDroppedEvts, clamp32(s.DroppedEvents()))
	for _, l := range s.Links() {
		var lk int
		b, lk = openMsg(b, fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, fLinkTraceID, ltid[:])
		b = appendBytes(b, fLinkSpanID, lsid[:])
		if ts := l.SpanContext.TraceState(); ts.Len() > 0 {
			b = appendString(b, fLinkTraceState, ts.String())
		}
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, fLinkAttributes, kv)
		}
		b = appendUvarint(b, fLinkDropped, clamp32(l.DroppedAttributeCount))
		b = appendFixed32(b, fLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeMsg(b, lk)
	}
	b = appendUvarint(b, fSpanDroppedLinks, clamp32(s.DroppedLinks()))
	var st int
	b, st = openMsg(b, fSpanStatus)
	status := s.Status()
	b = appendString(b, fStatusMessage, status.Description)
	switch status.Code {
	case codes.Ok:
		b = appendUvarint(b, fStatusCode, 1)
	case codes.Error:
		b = appendUvarint(b, fStatusCode, 2)
	}
	b = closeMsg(b, st)
	b = appendFixed32(b, fSpanFlags, spanFlags(sc.TraceFlags(), parent))
	return closeMsg(b, start)
}

// spanKind is the OTLP enum value of a span kind.
func spanKind(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

func appendKeyValue(b []byte, f protowire.Number, kv attribute.KeyValue) []byte {
	var start int
	b, start = openMsg(b, f)
	b = appendString(b, fKVKey, string(kv.Key))
	b = appendAnyValue(b, fKVValue, kv.Value)
	return closeMsg(b, start)
}

// appendAnyValue encodes an AnyValue message as field f. Empty strings,
// false and zero are written explicitly: in a oneof, presence is the
// value.
func appendAnyValue(b []byte, f protowire.Number, v attribute.Value) []byte {
	var start int
	b, start = openMsg(b, f)
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = appendBytes(b, fAnyBytes, v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		var arr int
		b, arr = openMsg(b, fAnyArray)
		for _, e := range sliceValues(v) {
			b = appendAnyValue(b, fArrayValues, e)
		}
		b = closeMsg(b, arr)
	case attribute.MAP:
		var kvl int
		b, kvl = openMsg(b, fAnyKVList)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fArrayValues, kv)
		}
		b = closeMsg(b, kvl)
	case attribute.EMPTY:
	default:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return closeMsg(b, start)
}

func sliceValues(v attribute.Value) []attribute.Value {
	switch v.Type() {
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		out := make([]attribute.Value, len(s))
		for i, e := range s {
			out[i] = attribute.BoolValue(e)
		}
		return out
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		out := make([]attribute.Value, len(s))
		for i, e := range s {
			out[i] = attribute.Int64Value(e)
		}
		return out
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		out := make([]attribute.Value, len(s))
		for i, e := range s {
			out[i] = attribute.Float64Value(e)
		}
		return out
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		out := make([]attribute.Value, len(s))
		for i, e := range s {
			out[i] = attribute.StringValue(e)
		}
		return out
	case attribute.SLICE:
		return v.AsSlice()
	}
	return nil
}

var _ sdktrace.SpanExporter = (*otlpHTTPExporter)(nil)
