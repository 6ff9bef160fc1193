package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/errs"
)

// checkStrict walks a request body that encoding/json has already decoded
// into a value of type t, and rejects what that decoder accepts by
// rewriting or guessing:
//
//   - invalid UTF-8 inside a string (the decoder stores U+FFFD instead);
//   - an escape of a lone UTF-16 surrogate such as \ud800 (same);
//   - a key given twice in one object (the decoder keeps the last);
//   - a field name that matches only when case is ignored ("Body");
//   - null as an element of an array or a map (the decoder stores the zero
//     value, "" for a property). null for an object field means "absent",
//     as if the field were left out, and stays accepted.
//
// Each error names the field by its JSON path ("messages[2].properties.k").
// The body must be one well-formed JSON value (the decoder said so); the
// walk reads its bytes directly, without decoding strings, so it costs
// little next to the decoding.
func checkStrict(body []byte, t reflect.Type) error {
	s := &strictWalk{b: body}
	if err := s.value(t, "", false); err != nil {
		return err
	}
	if s.ws(); s.i != len(s.b) {
		return errs.New(errs.InvalidArgument, "request body holds data after the JSON object (at byte %d)", s.i)
	}
	return nil
}

// strictWalk is a position in a JSON text.
type strictWalk struct {
	b []byte
	i int
}

// malformed is returned where the text is not the JSON the decoder
// accepted; it cannot happen after a successful decode.
func (s *strictWalk) malformed() error {
	return errs.New(errs.InvalidArgument, "request body is not valid JSON (at byte %d)", s.i)
}

// ws skips white space.
func (s *strictWalk) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// str reads a string at s.i and returns its raw bytes between the quotes.
func (s *strictWalk) str() ([]byte, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, s.malformed()
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		switch s.b[i] {
		case '\\':
			i++
		case '"':
			s.i = i + 1
			return s.b[start:i], nil
		}
	}
	return nil, s.malformed()
}

// value checks one JSON value that decodes into t; path names it. element
// says it is an array element or a map value (where null is refused).
func (s *strictWalk) value(t reflect.Type, path string, element bool) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s.ws(); s.i >= len(s.b) {
		return s.malformed()
	}
	switch s.b[s.i] {
	case '"':
		raw, err := s.str()
		if err != nil {
			return err
		}
		return checkRawString(raw, path)
	case '{':
		return s.object(t, path)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		s.i++
		for n := 0; ; n++ {
			if end, err := s.member(n, ']'); end || err != nil {
				return err
			}
			if err := s.value(elem, path+"["+strconv.Itoa(n)+"]", true); err != nil {
				return err
			}
		}
	case 'n':
		if element {
			return errs.New(errs.InvalidArgument, "%s is null; give a value or leave the entry out", describe(path))
		}
	}
	// A literal or a number: up to the next delimiter.
	for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
		s.i++
	}
	return nil
}

// member moves to the n-th member of an array or object: past the
// separator before it, if n > 0, and any white space. At the closing
// delimiter it moves past it and reports the end.
func (s *strictWalk) member(n int, closing byte) (end bool, err error) {
	if s.ws(); s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		return true, nil
	}
	if n > 0 {
		if s.i >= len(s.b) || s.b[s.i] != ',' {
			return false, s.malformed()
		}
		s.i++
		s.ws()
	}
	return false, nil
}

// object checks an object at s.i. Into a struct, every key must be a
// field's exact JSON name; into a map, any key.
func (s *strictWalk) object(t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	isMap := t != nil && t.Kind() == reflect.Map
	if t != nil && t.Kind() == reflect.Struct {
		fields = wireFields(t)
	}
	if isMap {
		elem = t.Elem()
	}
	seen := map[string]bool{}
	s.i++ // '{'
	for n := 0; ; n++ {
		if end, err := s.member(n, '}'); end || err != nil {
			return err
		}
		raw, err := s.str()
		if err != nil {
			return err
		}
		// The key as the decoder saw it; for an invalid one, the bytes
		// sent, so that the error shows them.
		key := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 && utf8.Valid(raw) {
			if err := json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &key); err != nil {
				return s.malformed()
			}
		}
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		if err := checkRawString(raw, sub); err != nil {
			return err
		}
		if seen[key] {
			return errs.New(errs.InvalidArgument, "%s appears more than once in one object", describe(sub))
		}
		seen[key] = true
		if s.ws(); s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.malformed()
		}
		s.i++
		vt := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return unknownField(fields, sub, key)
			}
			vt = ft
		}
		if err := s.value(vt, sub, isMap); err != nil {
			return err
		}
	}
}

// unknownField reports a key that is no field's exact name (the decoder
// let it through because it matches one when case is ignored).
func unknownField(fields map[string]reflect.Type, path, key string) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return errs.New(errs.InvalidArgument, "unknown field %q in the request body; field names are case-sensitive: did you mean %q?", path, name)
		}
	}
	return errs.New(errs.InvalidArgument, "unknown field %q in the request body", path)
}

// fieldCache holds wireFields by type: the wire types are few and fixed.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// wireFields maps the JSON names of t's fields, those of embedded structs
// included, to their types. The map is shared: do not modify it.
func wireFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := collectFields(t)
	fieldCache.Store(t, m)
	return m
}

func collectFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range collectFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// checkRawString refuses a JSON string token whose raw bytes hold invalid
// UTF-8 or an escaped lone surrogate, naming the field at path.
func checkRawString(raw []byte, path string) error {
	if !utf8.Valid(raw) {
		hint := ""
		if path == "body" || strings.HasSuffix(path, ".body") {
			hint = "; send binary data as body_base64"
		}
		return errs.New(errs.InvalidArgument, "%s is not valid UTF-8%s", describe(path), hint)
	}
	if esc, ok := loneSurrogate(raw); ok {
		return errs.New(errs.InvalidArgument, "%s holds the escape %s, a lone UTF-16 surrogate, which is no character", describe(path), esc)
	}
	return nil
}

// loneSurrogate finds a \uXXXX escape of a surrogate that is not the
// first half of a valid pair followed by its second half.
func loneSurrogate(raw []byte) (string, bool) {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] != 'u' {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		r, ok := hexRune(raw, i)
		if !ok {
			continue
		}
		if !utf16.IsSurrogate(r) {
			i += 5
			continue
		}
		r2, ok2 := hexRune(raw, i+6)
		if r < 0xdc00 && ok2 && utf16.DecodeRune(r, r2) != utf8.RuneError {
			i += 11
			continue
		}
		return string(raw[i : i+6]), true
	}
	return "", false
}

// hexRune decodes the escape \uXXXX at raw[i:].
func hexRune(raw []byte, i int) (rune, bool) {
	if i < 0 || i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}

// describe names a JSON path for an error message.
func describe(path string) string {
	if path == "" {
		return "the request body"
	}
	return fmt.Sprintf("field %q", path)
}
