package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
)

// decode reads the request body, at most MaxRequestBytes of it, as exactly
// one JSON value into v, rejecting unknown fields. If optional, an empty
// body leaves v as it is (all defaults). Beyond what encoding/json checks,
// it refuses what that decoder would silently rewrite or guess (see
// checkStrict): every string reaches the engine exactly as the client sent
// it, or the request fails with invalid_argument naming the field.
//
// Once the body is read, the write deadline is set WriteTimeout ahead, so
// that WriteTimeout bounds the handling and the answer, however long the
// body took to arrive (that is bounded by ReadTimeout).
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeBody(body, v, optional)
}

// readBody reads the request body for decode, with its limits and errors,
// and sets the write deadline.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes), r.ContentLength)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errs.New(errs.TooLarge, "request body exceeds the limit of %d bytes (-max-request-bytes)", tooBig.Limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errs.New(errs.InvalidArgument, "the request body did not arrive within -read-timeout %v", h.opts.ReadTimeout)
		}
		return nil, errs.Wrap(errs.InvalidArgument, err, "cannot read the request body")
	}
	if h.opts.WriteTimeout > 0 {
		// Not supported only under a test's ResponseWriter; then no
		// deadline was set either.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	}
	return body, nil
}

// presizeMax bounds the buffer readAll makes from a Content-Length before
// any byte arrived: a client may announce the request limit and send
// nothing, and a buffer of the limit per connection would be an easy way
// to exhaust memory.
const presizeMax = 64 << 10

// readAll is io.ReadAll with the buffer sized from the announced length
// (up to presizeMax), so that a consumer's ack of a thousand receipts (30
// KiB) is read into one buffer, not one that doubled six times.
func readAll(r io.Reader, announced int64) ([]byte, error) {
	b := make([]byte, 0, min(max(announced, 0), presizeMax)+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as append does
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// decodeBody is decode's work on a body already read.
func decodeBody(body []byte, v any, optional bool) error {
	// An optional body is absent only when it has no bytes at all: white
	// space alone is a body, and not a JSON value (the OpenAPI document
	// lets the body out, not replace it with white space). JSON white
	// space only: bytes.TrimSpace would also take \f or \v, which are not
	// JSON.
	if len(body) == 0 && optional {
		return nil
	}
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		if optional {
			return errs.New(errs.InvalidArgument, "request body holds only white space; send a JSON object, or no body at all")
		}
		return errs.New(errs.InvalidArgument, "request body is empty; a JSON object is required")
	}
	if bytes.HasPrefix(bytes.Trim(body, " \t\r\n"), []byte("null")) {
		// The decoder would take null as "nothing given" and leave v alone.
		return errs.New(errs.InvalidArgument, "request body must be a JSON object, not null")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, reflect.TypeOf(v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.New(errs.InvalidArgument, "request body holds data after the JSON object (at byte %d); send exactly one JSON value", dec.InputOffset())
	}
	return checkStrict(body, reflect.TypeOf(v))
}

// jsonError turns a decoding error into an invalid_argument that names the
// problem and, where known, the field.
func jsonError(err error, root reflect.Type) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errs.New(errs.InvalidArgument, "request body is not valid JSON: %v (at byte %d)", syntax, syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errs.New(errs.InvalidArgument, "request body is not valid JSON: it ends in the middle of a value")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errs.New(errs.InvalidArgument, "request body must be a JSON %s, not %s", jsonKind(typ.Type), typ.Value)
		}
		return errs.New(errs.InvalidArgument, "field %q must be a JSON %s, not %s", fieldPath(root, typ.Field), jsonKind(typ.Type), typ.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errs.New(errs.InvalidArgument, "unknown field %s in the request body", f)
	}
	return errs.New(errs.InvalidArgument, "request body is not valid: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// fieldPath drops the Go names of embedded structs (api.Delivery) from a
// decoder's field path into a value of type root, leaving the JSON names
// the client sent.
func fieldPath(root reflect.Type, p string) string {
	var out []string
	t := root
	for _, part := range strings.Split(p, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(part); ok && f.Anonymous {
				t = f.Type
				continue
			}
		}
		out = append(out, part)
		if t != nil && t.Kind() == reflect.Struct {
			t = wireFields(t)[part]
		} else {
			t = nil
		}
	}
	return strings.Join(out, ".")
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// writeError writes err as the API's error body with its code's status.
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	h.writeErrorStatus(w, 0, err)
}

// writeErrorStatus is writeError with an explicit status (0: the code's).
// A cancelled request context means the client left or the server is
// stopping; it is answered as unavailable.
func (h *Handler) writeErrorStatus(w http.ResponseWriter, status int, err error) {
	code := errs.CodeOf(err)
	msg := err.Error()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code, msg = errs.Unavailable, "request cancelled: "+msg
	} else if _, ok := errors.AsType[*errs.Error](err); !ok {
		msg = "internal error: " + msg
	}
	if status == 0 {
		status = api.Status(code)
	}
	if rec, ok := w.(*recorder); ok {
		rec.errCode, rec.errMsg = string(code), msg
	}
	body := api.ErrorBody{Code: code, Message: msg}
	if he, ok := errors.AsType[*errs.Error](err); ok {
		body.ID = he.Ref
	}
	writeJSON(w, status, api.Error{Error: body})
}
