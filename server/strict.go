package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
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
func checkStrict(body []byte, t reflect.Type) error {
	s := &strictWalk{dec: json.NewDecoder(bytes.NewReader(body)), body: body}
	s.dec.UseNumber()
	return s.value(t, "", false)
}

// strictWalk reads tokens and checks the raw bytes of every string token;
// last is the input offset where the previous token ended.
type strictWalk struct {
	dec  *json.Decoder
	body []byte
	last int64
}

// token returns the next token and the raw bytes it was read from (with
// any separator before it, which is plain ASCII).
func (s *strictWalk) token() (json.Token, []byte, error) {
	tok, err := s.dec.Token()
	if err != nil {
		return nil, nil, err
	}
	end := s.dec.InputOffset()
	raw := s.body[s.last:end]
	s.last = end
	return tok, raw, nil
}

// value checks one JSON value that decodes into t; path names it. element
// says it is an array element or a map value (where null is refused).
func (s *strictWalk) value(t reflect.Type, path string, element bool) error {
	tok, raw, err := s.token()
	if err != nil {
		return err
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok := tok.(type) {
	case nil:
		if element {
			return errs.New(errs.InvalidArgument, "%s is null; give a value or leave the entry out", describe(path))
		}
	case string:
		return checkRawString(raw, path)
	case json.Delim:
		switch tok {
		case '{':
			return s.object(t, path)
		case '[':
			var elem reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				elem = t.Elem()
			}
			for i := 0; s.dec.More(); i++ {
				if err := s.value(elem, path+"["+strconv.Itoa(i)+"]", true); err != nil {
					return err
				}
			}
			_, _, err := s.token() // ']'
			return err
		}
	}
	return nil
}

// object checks the members of an object after its '{'. Into a struct,
// every key must be a field's exact JSON name; into a map, any key.
func (s *strictWalk) object(t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = wireFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for s.dec.More() {
		tok, raw, err := s.token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if !utf8.Valid(raw) {
			// Name the key by the bytes sent, not by the decoder's
			// replacement characters.
			key = strings.Trim(strings.TrimLeft(string(raw), " \t\r\n,{"), `"`)
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
		vt, element := elem, t != nil && t.Kind() == reflect.Map
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return unknownField(fields, sub, key)
			}
			vt = ft
		}
		if err := s.value(vt, sub, element); err != nil {
			return err
		}
	}
	_, _, err := s.token() // '}'
	return err
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

// wireFields maps the JSON names of t's fields, those of embedded structs
// included, to their types.
func wireFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range wireFields(f.Type) {
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
