package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/gin-gonic/gin"
)

// Problem is an RFC 9457 problem response. Type is stable: clients branch
// on it, never on Title or Detail.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
}

// FieldError names one invalid field of a request body.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

const problemBase = "urn:opsmcp:problem:"

// The problem types the admin API answers with.
var (
	probMalformed    = problemKind{"malformed-request", "Malformed request", http.StatusBadRequest}
	probValidation   = problemKind{"validation-failed", "Validation failed", http.StatusUnprocessableEntity}
	probTooLarge     = problemKind{"body-too-large", "Request body too large", http.StatusRequestEntityTooLarge}
	probTimeout      = problemKind{"request-timeout", "Request timeout", http.StatusRequestTimeout}
	probMediaType    = problemKind{"unsupported-media-type", "Unsupported media type", http.StatusUnsupportedMediaType}
	probNotFound     = problemKind{"not-found", "Not found", http.StatusNotFound}
	probConflict     = problemKind{"conflict", "Conflict", http.StatusConflict}
	probSlugRetired  = problemKind{"slug-retired", "Slug retired", http.StatusConflict}
	probPrecondition = problemKind{"precondition-failed", "Precondition failed", http.StatusPreconditionFailed}
	probUnauthorized = problemKind{"unauthorized", "Unauthorized", http.StatusUnauthorized}
	probForbidden    = problemKind{"forbidden", "Forbidden", http.StatusForbidden}
	probInternal     = problemKind{"internal", "Internal error", http.StatusInternalServerError}
	probQuota        = problemKind{"quota-exceeded", "Quota exceeded", http.StatusConflict}
)

type problemKind struct {
	slug   string
	title  string
	status int
}

func (k problemKind) with(detail string, fields ...FieldError) *Problem {
	return &Problem{Type: problemBase + k.slug, Title: k.title, Status: k.status, Detail: detail, Errors: fields}
}

// writeProblem sends p and stops the chain.
func writeProblem(c *gin.Context, p *Problem) {
	p.Instance = c.Request.URL.Path
	c.Header("Content-Type", "application/problem+json")
	c.Header("Cache-Control", "no-store")
	c.Status(p.Status)
	body, _ := json.Marshal(p)
	_, _ = c.Writer.Write(body)
	c.Abort()
}

// decodeJSON reads exactly one JSON object from the request body into v,
// refusing unknown fields, trailing data and oversize bodies. The problem
// it returns says what is wrong and where.
func decodeJSON(c *gin.Context, maxBytes int64, v any) *Problem {
	ct := c.GetHeader("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/json" {
		return probMediaType.with(fmt.Sprintf("Content-Type must be application/json, not %q", ct))
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBytes))
	if err != nil {
		return jsonProblem(err, maxBytes)
	}
	if hasNUL(body) {
		// No field takes one, and PostgreSQL cannot store one in text.
		return probMalformed.with(`the body holds a NUL character (\u0000), which no field accepts`)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err, maxBytes)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return probMalformed.with("the body must hold exactly one JSON object; found data after it")
	}
	return nil
}

// hasNUL reports whether a JSON text decodes to a string holding U+0000:
// a \u0000 escape (a raw NUL byte is not valid JSON anyway). An escape
// is one preceded by an odd number of backslashes; "\\u0000" is the
// text \u0000.
func hasNUL(body []byte) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`u0000`))
		if j < 0 {
			return bytes.IndexByte(body, 0) >= 0
		}
		j += i
		n := 0
		for k := j - 1; k >= 0 && body[k] == '\\'; k-- {
			n++
		}
		if n%2 == 1 {
			return true
		}
		i = j + 1
	}
}

// jsonProblem turns a decoding error into a precise problem.
func jsonProblem(err error, maxBytes int64) *Problem {
	var (
		mbe    *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return probTooLarge.with(fmt.Sprintf("the body exceeds the %d-byte limit", maxBytes))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return probTimeout.with("the body did not arrive within the server's read timeout")
	case errors.As(err, &syntax):
		return probMalformed.with(fmt.Sprintf("invalid JSON at byte %d: %v", syntax.Offset, syntax))
	case errors.Is(err, io.EOF):
		return probMalformed.with("the body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return probMalformed.with("the body ends in the middle of a JSON value")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return probMalformed.with(fmt.Sprintf("the body must be a JSON object, not %s", typ.Value))
		}
		return probValidation.with("a field has the wrong type",
			FieldError{Field: field, Message: fmt.Sprintf("must be %s, not %s", jsonTypeName(typ.Type.String()), typ.Value)})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return probValidation.with("the body has a field this endpoint does not know",
			FieldError{Field: name, Message: "unknown field"})
	}
	return probMalformed.with("the body is not valid JSON for this endpoint")
}

func jsonTypeName(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "a string"
	case goType == "bool" || goType == "*bool":
		return "a boolean"
	case strings.Contains(goType, "int") || strings.Contains(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map[") || strings.Contains(goType, "."):
		return "an object"
	}
	return goType
}
