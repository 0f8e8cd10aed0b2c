package store

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendRounds encodes rounds as a JSON array, the form flow_rounds keeps
// them in (FlowRound's json tags read it back). It is written by hand:
// the recorder encodes every round of every flow, and encoding/json
// re-validates each embedded JSON document (questions, principal,
// webhook) that the recorder has just produced.
func appendRounds(b []byte, rounds []FlowRound) []byte {
	b = append(b, '[')
	for i := range rounds {
		if i > 0 {
			b = append(b, ',')
		}
		b = rounds[i].appendJSON(b)
	}
	return append(b, ']')
}

func (r *FlowRound) appendJSON(b []byte) []byte {
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, int64(r.N), 10)
	b = appendTime(append(b, `,"arrivedAt":`...), r.ArrivedAt)
	b = appendTime(append(b, `,"endedAt":`...), r.EndedAt)
	b = strconv.AppendInt(append(b, `,"serverUs":`...), r.ServerUS, 10)
	b = strconv.AppendInt(append(b, `,"clientWaitUs":`...), r.ClientWaitUS, 10)
	for _, f := range [...]struct {
		key, val string
	}{
		{`,"resultType":`, r.ResultType}, {`,"errorClass":`, r.ErrorClass}, {`,"stateIn":`, r.StateIn},
		{`,"keyIn":`, r.KeyIn}, {`,"keyOut":`, r.KeyOut}, {`,"replica":`, r.Replica},
		{`,"traceId":`, r.TraceID}, {`,"spanId":`, r.SpanID},
	} {
		if f.val != "" {
			b = appendString(append(b, f.key...), f.val)
		}
	}
	if r.StateExpiresAt != nil {
		b = appendTime(append(b, `,"stateExpiresAt":`...), *r.StateExpiresAt)
	}
	// The documents below were encoded by the recorder (encoding/json),
	// so they are valid JSON as they stand.
	for _, f := range [...]struct {
		key string
		val []byte
	}{
		{`,"asked":`, r.Asked}, {`,"answers":`, r.Answers}, {`,"webhook":`, r.Webhook},
		{`,"principal":`, r.Principal}, {`,"client":`, r.Client},
	} {
		if len(f.val) > 0 {
			b = append(append(b, f.key...), f.val...)
		}
	}
	return append(b, '}')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 and NUL become
// U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == 0:
				// PostgreSQL's text holds no NUL (and refuses the whole
				// batch over one), and SQLite's C strings end at one: the
				// record keeps a mark where a client or tenant sent it.
				b = append(b, `\ufffd`...)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
