package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendStringMatchesJSON: AppendString writes what encoding/json
// writes for a string, escapes, HTML characters, U+2028/U+2029 and
// invalid UTF-8 included, at every alignment of the 8-byte fast path.
func TestAppendStringMatchesJSON(t *testing.T) {
	for _, s := range []string{"", "plain", strings.Repeat("abcdefgh", 5), "a\"b\\c\nd\re\tf\bg\fh\x01\x1f",
		"<tag>&amp;", "é ü 日本 \u2028 \u2029", "bad \xff\xfe utf8", strings.Repeat("x", 13) + "<" + strings.Repeat("y", 9)} {
		for pre := 0; pre < 8; pre++ {
			in := strings.Repeat("p", pre) + s
			want, _ := json.Marshal(in)
			if got := AppendString([]byte("x"), in); !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Errorf("%q:\n got  %s\n want %s", in, got, want)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a<b>\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}

// TestAppendStringMapMatchesJSON: a map's object is encoding/json's, its
// keys in encoding/json's order, with more keys than the inline array.
func TestAppendStringMapMatchesJSON(t *testing.T) {
	big := map[string]string{}
	for i := range 40 {
		big[strings.Repeat("k", i%7)+string(rune('A'+i))] = strings.Repeat("<v>", i%3)
	}
	for _, m := range []map[string]string{{}, {"": ""}, {"b": "1", "a": "2", "B": "\u2028", "é": "\xff", "a<": "&"}, big} {
		want, _ := json.Marshal(m)
		if got := AppendStringMap(nil, m); !bytes.Equal(got, want) {
			t.Errorf("%v:\n got  %s\n want %s", m, got, want)
		}
	}
}

// TestPlainEndMatchesLoop: the word-at-a-time scan stops where the byte
// loop stops, for every byte value at every position of strings of 0 to
// 17 bytes, with neighbours that borrow or carry (0x00, a quote, 0xff, a
// backslash) just above.
func TestPlainEndMatchesLoop(t *testing.T) {
	loop := func(b []byte) int {
		for i, c := range b {
			if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				return i
			}
		}
		return len(b)
	}
	for n := 0; n <= 17; n++ {
		for pos := 0; pos < n; pos++ {
			for _, fill := range []byte{'a', ' ', 0x7f, '!', '#', '[', ']'} {
				for v := 0; v < 256; v++ {
					b := bytes.Repeat([]byte{fill}, n)
					b[pos] = byte(v)
					if got, want := PlainEnd(b), loop(b); got != want {
						t.Fatalf("PlainEnd(%q) = %d, want %d", b, got, want)
					}
					for _, next := range []byte{0x00, '"', 0xff, '\\'} {
						if pos+1 < n {
							c := bytes.Clone(b)
							c[pos+1] = next
							if got, want := PlainEnd(c), loop(c); got != want {
								t.Fatalf("PlainEnd(%q) = %d, want %d", c, got, want)
							}
						}
					}
				}
			}
		}
	}
}
