package openapispec

import (
	"fmt"
	"strconv"
	"strings"
)

// The standard library has no YAML parser and the module takes no
// dependency for a test, so ParseYAML reads the subset of YAML that
// docs/openapi.yaml and docs/openapi-kafka.yaml are written in: block
// mappings and sequences indented by spaces, flow sequences and mappings of
// scalars ([a, b], {type: x}), quoted and plain scalars, and block scalars
// (| and >-), read as text. Every value is a map[string]any, a []any or a
// string.

type yamlLine struct {
	indent int
	text   string
	no     int
}

type yamlReader struct {
	lines []yamlLine
	i     int
}

// ParseYAML reads src, a document in the subset described above.
func ParseYAML(src string) (any, error) {
	r := &yamlReader{}
	for n, l := range strings.Split(src, "\n") {
		t := strings.TrimLeft(l, " ")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		r.lines = append(r.lines, yamlLine{indent: len(l) - len(t), text: strings.TrimRight(t, " "), no: n + 1})
	}
	if len(r.lines) == 0 {
		return nil, fmt.Errorf("empty document")
	}
	return r.block(r.lines[0].indent)
}

// block reads the mapping or sequence whose entries start at indent.
func (r *yamlReader) block(indent int) (any, error) {
	if strings.HasPrefix(r.lines[r.i].text, "- ") {
		var seq []any
		for r.i < len(r.lines) && r.lines[r.i].indent == indent && strings.HasPrefix(r.lines[r.i].text, "- ") {
			// The item is a block at indent+2: rewrite "- k: v" as "k: v" there.
			r.lines[r.i].indent, r.lines[r.i].text = indent+2, r.lines[r.i].text[2:]
			v, err := r.block(indent + 2)
			if err != nil {
				return nil, err
			}
			seq = append(seq, v)
		}
		return seq, nil
	}
	m := map[string]any{}
	for r.i < len(r.lines) && r.lines[r.i].indent == indent {
		l := r.lines[r.i]
		key, rest, ok := cutKey(l.text)
		if !ok {
			if len(m) == 0 { // a lone scalar (a sequence item)
				r.i++
				return unquote(l.text), nil
			}
			return nil, fmt.Errorf("line %d: %q is not key: value", l.no, l.text)
		}
		r.i++
		var v any
		var err error
		switch {
		case rest == "|" || rest == ">-" || rest == ">":
			v = r.text(indent)
		case rest == "":
			if r.i < len(r.lines) && r.lines[r.i].indent > indent {
				v, err = r.block(r.lines[r.i].indent)
			} else {
				v = ""
			}
		default:
			v, err = flow(rest)
			if s, isStr := v.(string); isStr && err == nil && r.i < len(r.lines) && r.lines[r.i].indent > indent {
				v = s + " " + r.text(indent) // a plain scalar folded over lines
			}
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.no, err)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: key %q twice", l.no, key)
		}
		m[key] = v
	}
	if r.i < len(r.lines) && r.lines[r.i].indent > indent {
		return nil, fmt.Errorf("line %d: unexpected indentation", r.lines[r.i].no)
	}
	return m, nil
}

// text joins the lines indented deeper than indent.
func (r *yamlReader) text(indent int) string {
	var parts []string
	for r.i < len(r.lines) && r.lines[r.i].indent > indent {
		parts = append(parts, r.lines[r.i].text)
		r.i++
	}
	return strings.Join(parts, " ")
}

// cutKey splits "key: rest"; the key may be quoted.
func cutKey(t string) (key, rest string, ok bool) {
	if strings.HasPrefix(t, `"`) {
		end := strings.Index(t[1:], `"`) + 1
		if end <= 0 || !strings.HasPrefix(t[end+1:], ":") {
			return "", "", false
		}
		return t[1:end], strings.TrimSpace(t[end+2:]), true
	}
	if strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
		return "", "", false
	}
	if k, v, found := strings.Cut(t, ": "); found {
		return k, strings.TrimSpace(v), true
	}
	if k, found := strings.CutSuffix(t, ":"); found && !strings.Contains(k, " ") {
		return k, "", true
	}
	return "", "", false
}

// flow reads an inline value: [a, b], {k: v, ...} or a scalar.
func flow(s string) (any, error) {
	switch {
	case strings.HasPrefix(s, "["):
		if !strings.HasSuffix(s, "]") {
			return nil, fmt.Errorf("unclosed %q", s)
		}
		out := []any{}
		for _, item := range splitFlow(s[1 : len(s)-1]) {
			out = append(out, unquote(item))
		}
		return out, nil
	case strings.HasPrefix(s, "{"):
		if !strings.HasSuffix(s, "}") {
			return nil, fmt.Errorf("unclosed %q", s)
		}
		out := map[string]any{}
		for _, item := range splitFlow(s[1 : len(s)-1]) {
			k, v, ok := cutKey(item)
			if !ok {
				return nil, fmt.Errorf("%q is not key: value", item)
			}
			out[k] = unquote(v)
		}
		return out, nil
	}
	return unquote(s), nil
}

// splitFlow splits the items of a flow collection at top-level commas.
func splitFlow(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		out = append(out, last)
	}
	return out
}

// unquote reads a scalar; a double-quoted one has JSON-like escapes.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
		return s[1 : len(s)-1]
	}
	return s
}
