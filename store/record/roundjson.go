package record

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/opsmcp/platform/internal/jsontext"
)

// appendJSON encodes r as flow_rounds keeps it, one object of a flow's
// array of rounds (Round's json tags read it back). It is written by
// hand: every round of every flow is encoded, and encoding/json
// re-validates each embedded JSON document (questions, principal,
// webhook) that the recorder has just produced.
func (r *Round) appendJSON(b []byte) []byte {
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, int64(r.N), 10)
	b = appendTime(append(b, `,"arrivedAt":`...), r.ArrivedAt)
	b = appendTime(append(b, `,"endedAt":`...), r.EndedAt)
	b = strconv.AppendInt(append(b, `,"serverUs":`...), r.ServerUS, 10)
	b = strconv.AppendInt(append(b, `,"clientWaitUs":`...), r.ClientWaitUS, 10)
	for _, f := range [...]struct {
		key string
		val int64
	}{{`,"authUs":`, r.AuthUS}, {`,"openUs":`, r.OpenUS}, {`,"recordUs":`, r.RecordUS}, {`,"sealUs":`, r.SealUS}} {
		if f.val > 0 {
			b = strconv.AppendInt(append(b, f.key...), f.val, 10)
		}
	}
	for _, f := range [...]struct {
		key, val string
	}{
		{`,"resultType":`, r.ResultType}, {`,"errorClass":`, r.ErrorClass}, {`,"stateIn":`, r.StateIn},
		{`,"keyIn":`, r.KeyIn}, {`,"keyOut":`, r.KeyOut}, {`,"replica":`, r.Replica},
		{`,"traceId":`, r.TraceID}, {`,"spanId":`, r.SpanID}, {`,"event":`, r.Event}, {`,"by":`, r.By},
		{`,"message":`, r.Message}, {`,"cause":`, r.Cause},
	} {
		if f.val != "" {
			b = jsontext.AppendString(append(b, f.key...), f.val)
		}
	}
	if r.StateExpiresAt != nil {
		b = appendTime(append(b, `,"stateExpiresAt":`...), *r.StateExpiresAt)
	}
	// The documents below were encoded by the recorder, so they are
	// valid JSON as they stand; a tenant's question may still carry
	// invalid UTF-8 in its strings, which PostgreSQL's text refuses, and
	// the rounds reach PostgreSQL as text.
	for _, f := range [...]struct {
		key string
		val []byte
	}{
		{`,"asked":`, r.Asked}, {`,"answers":`, r.Answers}, {`,"webhook":`, r.Webhook},
		{`,"principal":`, r.Principal}, {`,"client":`, r.Client},
	} {
		if len(f.val) > 0 {
			v := f.val
			if !utf8.Valid(v) {
				v = bytes.ToValidUTF8(v, []byte("\uFFFD"))
			}
			if bytes.IndexByte(v, 0) >= 0 {
				// Not in valid JSON; refused by PostgreSQL's text, with
				// the batch, if it came.
				v = bytes.ReplaceAll(v, []byte{0}, []byte("\uFFFD"))
			}
			b = append(append(b, f.key...), v...)
		}
	}
	return append(b, '}')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = appendRFC3339(b, t)
	return append(b, '"')
}
