package message

import (
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
)

func TestCodecRoundTrip(t *testing.T) {
	in := &Stored{Message: Message{Topic: "orders", Key: "order-123", Tag: "close", Group: "g",
		Properties: map[string]string{"b": "2", "a": "1", "empty": ""}, Body: []byte("hello\x00world")},
		Queue: 3, Due: 1764417600000, Sent: 1764417000000}
	b := Encode(nil, in)
	out, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n in %+v\nout %+v", in, out)
	}
	// Every strict prefix is rejected, never half-decoded.
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
	if _, err := Decode(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(nil, &Stored{Message: Message{Topic: "t", Body: []byte("x")}}))
	f.Add([]byte{1, 0, 0})
	f.Add(Encode(nil, &Stored{Message: Message{Topic: "t"}, ForGroup: "g"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes must survive a second round trip unchanged
		// (the input itself may have had duplicate or unsorted properties).
		again, err := Decode(Encode(nil, s))
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip of a decoded message changed it: %v", err)
		}
	})
}

// negativeNumber finds a negative number or duration in a text.
var negativeNumber = regexp.MustCompile(`(^|[ (])-[0-9]`)

func TestDueAt(t *testing.T) {
	l := Limits{}.Defaults()
	now := int64(1_000_000_000)
	cases := []struct {
		w    When
		due  int64
		code errs.Code
		msg  string
	}{
		{When{}, now, "", ""},
		{When{Delay: 30 * time.Minute}, now + 1_800_000, "", ""},
		{When{At: now - 5}, now, "", ""},
		{When{At: now + 5}, now + 5, "", ""},
		{When{Level: 1}, now + 1000, "", ""},
		{When{Level: 18}, now + 7_200_000, "", ""},
		{When{Level: 19}, 0, errs.InvalidArgument, "levels are 1 to 18"},
		{When{Level: -1}, 0, errs.InvalidArgument, "does not exist"},
		{When{Delay: 401 * 24 * time.Hour}, 0, errs.InvalidArgument, "maximum delay"},
		{When{At: now + (400*24*time.Hour + time.Second).Milliseconds()}, 0, errs.InvalidArgument, "maximum delay"},
		{When{Delay: -1}, 0, errs.InvalidArgument, "negative"},
		{When{At: -1}, 0, errs.InvalidArgument, "negative"},
		{When{Delay: 1, At: 1}, 0, errs.InvalidArgument, "at most one"},
		// A sub-millisecond remainder rounds up, never early.
		{When{Delay: 1500 * time.Microsecond}, now + 2, "", ""},
		{When{Delay: time.Nanosecond}, now + 1, "", ""},
		// at so large that at-now overflows a time.Duration.
		{When{At: math.MaxInt64}, 0, errs.InvalidArgument, "at 9223372036854775807 is beyond the maximum delay of 9600h0m0s"},
		{When{At: math.MaxInt64 / 1000}, 0, errs.InvalidArgument, "beyond the maximum delay"},
	}
	for _, c := range cases {
		due, err := l.DueAt(c.w, now)
		if errs.CodeOf(err) != c.code || (c.code == "" && due != c.due) || (c.msg != "" && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("%+v: got %d, %v; want %d, code %q containing %q", c.w, due, err, c.due, c.code, c.msg)
		}
		if err != nil && negativeNumber.MatchString(err.Error()) && c.w.At >= 0 && c.w.Delay >= 0 && c.w.Level >= 0 {
			t.Errorf("%+v: error %q has a minus sign (a negative duration?)", c.w, err)
		}
	}
}

func TestValidate(t *testing.T) {
	l := Limits{MaxBodyBytes: 4, MaxProperties: 1, MaxHeaderBytes: 8}.Defaults()
	cases := []struct {
		m    Message
		code errs.Code
	}{
		{Message{Topic: "ok", Body: []byte("1234")}, ""},
		{Message{Topic: ""}, errs.InvalidArgument},
		{Message{Topic: strings.Repeat("a", 201)}, errs.InvalidArgument},
		{Message{Topic: "a/b"}, errs.InvalidArgument},
		{Message{Topic: "ok", Body: []byte("12345")}, errs.TooLarge},
		{Message{Topic: "ok", Properties: map[string]string{"a": "1", "b": "2"}}, errs.TooLarge},
		{Message{Topic: "ok", Properties: map[string]string{"": "1"}}, errs.InvalidArgument},
		{Message{Topic: "ok", Key: "123456789"}, errs.TooLarge},
		{Message{Topic: "ok", Key: "\xff"}, errs.InvalidArgument},
		{Message{Topic: "ok", Tag: "a\xc3"}, errs.InvalidArgument},
		{Message{Topic: "ok", Group: "\xed\xa0\x80"}, errs.InvalidArgument}, // an encoded surrogate
		{Message{Topic: "ok", Properties: map[string]string{"\xfe": "v"}}, errs.InvalidArgument},
		{Message{Topic: "ok", Properties: map[string]string{"k": "\xfe"}}, errs.InvalidArgument},
		{Message{Topic: "o\xffk"}, errs.InvalidArgument},
		{Message{Topic: "."}, errs.InvalidArgument},
		{Message{Topic: ".."}, errs.InvalidArgument},
		{Message{Topic: "..."}, ""},
		{Message{Topic: ".a"}, ""},
		// Invalid UTF-8 is named as such, even where a size limit is also broken.
		{Message{Topic: "ok", Key: strings.Repeat("\xff", 9)}, errs.InvalidArgument},
	}
	for i, c := range cases {
		if got := errs.CodeOf(l.Validate(&c.m)); got != c.code {
			t.Errorf("case %d: code %q, want %q", i, got, c.code)
		}
	}
}

func TestValidateNameErrors(t *testing.T) {
	cases := []struct{ kind, name, want string }{
		{"topic", "..", `topic ".." is reserved`},
		{"group", ".", `group "." is reserved`},
		{"group", "a\xffb", `group "a\xffb" is not valid UTF-8`},
		{"topic", "", "topic is required"},
		{"group", "a b", `group "a b" has the character ' '`},
	}
	for _, c := range cases {
		err := ValidateName(c.kind, c.name)
		if errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateName(%q, %q) = %v; want invalid_argument containing %q", c.kind, c.name, err, c.want)
		}
	}
}

func TestIDRoundTripAndOrder(t *testing.T) {
	a := ID{Tag: 0xdeadbeef, Pos: 42}
	b := ID{Tag: 0xdeadbeef, Pos: 1 << 40}
	for _, id := range []ID{a, b} {
		got, err := ParseID(id.String())
		if err != nil || got != id {
			t.Fatalf("parse %s: %v %v", id, got, err)
		}
	}
	if !(a.String() < b.String()) {
		t.Fatalf("text form does not sort like positions: %s %s", a, b)
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("g", IDLen), a.String() + "0"} {
		if _, err := ParseID(bad); errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("ParseID(%q) = %v", bad, err)
		}
	}
}

// TestCodecExtension: a message with scheduling fields takes version 3 and
// round-trips; one without stays version 2, byte for byte.
func TestCodecExtension(t *testing.T) {
	in := &Stored{Message: Message{Topic: "t", Body: []byte("b"), DedupID: "op-1"},
		Due: 5, Sent: 4, Nonce: 9, DedupHash: 77, DedupWindow: DedupUntilDelivered, Deadline: 100, Window: 10}
	b := Encode(nil, in)
	if b[0] != 3 {
		t.Fatalf("version %d", b[0])
	}
	out, err := Decode(b)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
	plain := Encode(nil, &Stored{Message: Message{Topic: "t"}})
	if plain[0] != 2 {
		t.Fatalf("plain message took version %d", plain[0])
	}
	// Version 3 with an empty extension is not what Encode writes.
	ext := append([]byte{3}, plain[1:]...)
	ext = append(ext, make([]byte, 2+32)...)
	if _, err := Decode(ext); err == nil {
		t.Fatal("an empty extension decoded")
	}
}

// TestCodecForGroup: a message for one consumer group takes version 4,
// with or without scheduling fields, and round-trips; version 4 without a
// group is not what Encode writes.
func TestCodecForGroup(t *testing.T) {
	for _, in := range []*Stored{
		{Message: Message{Topic: "t", Body: []byte("b")}, Due: 5, Sent: 4, Nonce: 9, ForGroup: "billing"},
		{Message: Message{Topic: "t", DedupID: "op-1"}, DedupHash: 7, Deadline: 100, ForGroup: "audit"},
	} {
		b := Encode(nil, in)
		if b[0] != 4 {
			t.Fatalf("version %d", b[0])
		}
		out, err := Decode(b)
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip: %+v %v", out, err)
		}
		for i := 0; i < len(b); i++ {
			if _, err := Decode(b[:i]); err == nil {
				t.Fatalf("prefix of %d bytes decoded", i)
			}
		}
	}
	plain := Encode(nil, &Stored{Message: Message{Topic: "t"}})
	noGroup := append([]byte{4}, plain[1:]...)
	noGroup = append(noGroup, make([]byte, 2+32+2)...)
	if _, err := Decode(noGroup); err == nil {
		t.Fatal("version 4 without a group decoded")
	}
}

func TestExpiry(t *testing.T) {
	l := Limits{MaxDelay: time.Hour}.Defaults()
	now := int64(1_000_000)
	bad := []When{
		{Deadline: now + 10, TTL: time.Second},
		{Deadline: -1},
		{TTL: -time.Second},
		{TTL: 2 * time.Hour},
		{Window: -time.Millisecond},
		{Window: 2 * time.Hour},
		{Deadline: now + 2*3600_000},
		{Deadline: now + 10}, // before the due time below
	}
	for _, w := range bad {
		if _, _, err := l.Expiry(w, now+1000, now); errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("%+v: %v", w, err)
		}
	}
	d, win, err := l.Expiry(When{TTL: 1500 * time.Microsecond, Window: time.Second}, now, now)
	if err != nil || d != now+2 || win != 1000 {
		t.Fatalf("got %d %d %v", d, win, err)
	}
}

// TestSystemPropertiesHaveTheirOwnBudget: the properties a protocol
// adapter adds for itself count neither against the sender's count nor
// against the sender's bytes, and a refusal counts only what the sender
// sent and names the limit.
func TestSystemPropertiesHaveTheirOwnBudget(t *testing.T) {
	l := Limits{MaxProperties: 3, MaxHeaderBytes: 45}.Defaults()
	m := &Message{Topic: "t", Properties: map[string]string{"a": "1", "b": "2", "c": "3",
		"sys.born": "1800000000000", "sys.host": "10.0.0.1:1234"}}
	system := []string{"sys.born", "sys.host"}
	if err := l.ValidateSystem(m, system); err != nil {
		t.Fatalf("3 properties of the sender's and 2 of the adapter's, limit 3: %v", err)
	}
	if err := l.Validate(m); err == nil || !strings.Contains(err.Error(), "5 properties") {
		t.Fatalf("all counted as the sender's: %v", err)
	}
	m.Properties["d"] = "4"
	err := l.ValidateSystem(m, system)
	if errs.CodeOf(err) != errs.TooLarge || !strings.Contains(err.Error(), "message has 4 properties; the limit (max-properties) is 3") {
		t.Fatalf("4 of the sender's: %v", err)
	}
	delete(m.Properties, "d")
	m.Properties["sys.host"] = strings.Repeat("h", 46)
	if err := l.ValidateSystem(m, system); errs.CodeOf(err) != errs.TooLarge || !strings.Contains(err.Error(), "protocol adapter") {
		t.Fatalf("the adapter's properties beyond their budget: %v", err)
	}
	if err := l.ValidateSystem(m, []string{"sys.born", "nope"}); errs.CodeOf(err) != errs.Internal {
		t.Fatalf("an adapter naming a property the message lacks: %v", err)
	}
}
