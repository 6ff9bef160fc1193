package remoting

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonFields are the JSON names of Command's fields. encoding/json
// matches a name to a field case-insensitively; the fast path only
// takes the exact names and leaves the rest to encoding/json.
var jsonFields = []string{"code", "language", "version", "opaque", "flag", "remark", "extFields"}

// decodeJSONFast decodes the header shape the clients send: an object
// of integers, strings and one object of strings.
// It is a fast path for encoding/json, which took a tenth of the
// broker's CPU under a send load: ok is false for anything else (a
// surrogate escape, a nested array, a float, a null, a name that differs from a
// field's only in case, a syntax error), and the caller then decodes
// with encoding/json, which is the reference: whenever ok is true the
// result equals encoding/json's (FuzzJSONHeaderFast holds it to that).
func decodeJSONFast(h []byte) (c *Command, ok bool) {
	p := &jsonScan{b: h}
	if !p.byte('{') {
		return nil, false
	}
	c = &Command{}
	if p.byte('}') {
		return c, p.end()
	}
	for {
		name, ok := p.str()
		if !ok || !p.byte(':') {
			return nil, false
		}
		if !p.field(c, name) {
			return nil, false
		}
		if p.byte('}') {
			return c, p.end()
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

// jsonScan reads JSON from b at i.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte skips white space and then c, if it is next.
func (p *jsonScan) byte(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end says whether only white space is left.
func (p *jsonScan) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// str reads a string in valid UTF-8 (encoding/json replaces invalid
// bytes: not the fast path's job). Escapes are decoded, but for a
// surrogate (\uD800 to \uDFFF: pairs and their errors go to encoding/json).
func (p *jsonScan) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start, wide := p.i, false
	var out []byte // the decoded string, once an escape is met
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if wide && !utf8.Valid(s) {
				return "", false
			}
			if out != nil {
				return string(append(out, s...)), true
			}
			return string(s), true
		case c == '\\':
			if wide && !utf8.Valid(p.b[start:p.i]) {
				return "", false
			}
			out = append(out, p.b[start:p.i]...)
			var ok bool
			if out, ok = p.escape(out); !ok {
				return "", false
			}
			start, wide = p.i, false
			continue
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			wide = true
		}
		p.i++
	}
	return "", false
}

// escape decodes the escape at p.i (a backslash) onto out.
func (p *jsonScan) escape(out []byte) ([]byte, bool) {
	if p.i+1 >= len(p.b) {
		return out, false
	}
	c := p.b[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return append(out, c), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
		if p.i+4 > len(p.b) {
			return out, false
		}
		var r rune
		for _, h := range p.b[p.i : p.i+4] {
			switch {
			case h >= '0' && h <= '9':
				r = r<<4 | rune(h-'0')
			case h >= 'a' && h <= 'f':
				r = r<<4 | rune(h-'a'+10)
			case h >= 'A' && h <= 'F':
				r = r<<4 | rune(h-'A'+10)
			default:
				return out, false
			}
		}
		p.i += 4
		if r >= 0xD800 && r <= 0xDFFF {
			return out, false
		}
		return utf8.AppendRune(out, r), true
	}
	return out, false
}

// int32 reads an integer that fits an int32, as encoding/json takes it.
func (p *jsonScan) int32() (int32, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || (n > 1 && p.b[digits] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 32)
	return int32(v), err == nil
}

// field reads the value of name into c, or skips a name c has no field
// for; false sends the header to encoding/json.
func (p *jsonScan) field(c *Command, name string) bool {
	var ok bool
	switch name {
	case "code":
		c.Code, ok = p.int32()
	case "version":
		c.Version, ok = p.int32()
	case "opaque":
		c.Opaque, ok = p.int32()
	case "flag":
		c.Flag, ok = p.int32()
	case "language":
		c.Language, ok = p.str()
	case "remark":
		c.Remark, ok = p.str()
	case "extFields":
		ok = p.strMap(c)
	default:
		for _, f := range jsonFields {
			if strings.EqualFold(f, name) {
				return false
			}
		}
		ok = p.skip()
	}
	return ok
}

// strMap reads an object of strings into c.ExtFields, merging as
// encoding/json does (a repeated extFields adds to the same map).
func (p *jsonScan) strMap(c *Command) bool {
	if !p.byte('{') {
		return false
	}
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	if p.byte('}') {
		return true
	}
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') {
			return false
		}
		v, ok := p.str()
		if !ok {
			return false
		}
		c.ExtFields[k] = v
		if p.byte('}') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// skip skips a string, an integer, true or false.
func (p *jsonScan) skip() bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok := p.int32()
		return ok
	}
	for _, lit := range []string{"true", "false"} {
		if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+5)]), lit) {
			p.i += len(lit)
			return true
		}
	}
	return false
}
