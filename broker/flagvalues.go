package broker

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cmdlineValue marks a setting as given on the command line when the flag
// package sets it.
type cmdlineValue struct {
	flag.Value
	name string
	seen map[string]bool
}

// Set sets the wrapped setting and, when that succeeds, marks it as given
// on the command line.
func (v *cmdlineValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.seen[v.name] = true
	return nil
}

// String prints the wrapped setting.
func (v *cmdlineValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

// IsBoolFlag lets "-auto-create-topics" stand for "-auto-create-topics=true".
func (v *cmdlineValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

type stringValue string

// Set keeps s.
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

// String prints the setting in flag syntax, as -help shows its default.
func (v *stringValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

// secretValue is a string whose value is never printed (in -help defaults).
type secretValue string

// Set keeps s as the secret.
func (v *secretValue) Set(s string) error { *v = secretValue(s); return nil }

// String prints nothing: -help must not show a secret.
func (v *secretValue) String() string { return "" }

type intValue int

// Set parses s into the setting; a bad value is an error that says what
// a good one looks like.
func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*v = intValue(n)
	return nil
}

// String prints the setting in flag syntax, as -help shows its default.
func (v *intValue) String() string {
	if v == nil {
		return "0"
	}
	return strconv.Itoa(int(*v))
}

type boolValue bool

// Set parses s into the setting; a bad value is an error that says what
// a good one looks like.
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*v = boolValue(b)
	return nil
}

// String prints the setting in flag syntax, as -help shows its default.
func (v *boolValue) String() string { return strconv.FormatBool(v != nil && bool(*v)) }

// IsBoolFlag lets the flag stand alone for true.
func (v *boolValue) IsBoolFlag() bool { return true }

type durationValue time.Duration

// Set parses s into the setting; a bad value is an error that says what
// a good one looks like.
func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 250ms, 30s or 1h30m", s)
	}
	*v = durationValue(d)
	return nil
}

// String prints the setting in flag syntax, as -help shows its default.
func (v *durationValue) String() string {
	if v == nil {
		return "0s"
	}
	return time.Duration(*v).String()
}

type durationsValue []time.Duration

// Set parses s into the setting; a bad value is an error that says what
// a good one looks like.
func (v *durationsValue) Set(s string) error {
	var out []time.Duration
	fields := strings.Split(s, ",")
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" && i == len(fields)-1 {
			continue // a trailing comma
		}
		if f == "" {
			// Skipped, it would renumber the entries after it.
			return fmt.Errorf("entry %d is empty", i+1)
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 1s or 2h", f)
		}
		out = append(out, d)
	}
	*v = out
	return nil
}

// String prints the setting in flag syntax, as -help shows its default.
func (v *durationsValue) String() string {
	if v == nil {
		return ""
	}
	parts := make([]string, len(*v))
	for i, d := range *v {
		parts[i] = shortDuration(d)
	}
	return strings.Join(parts, ",")
}

// shortDuration prints 1m rather than 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// sizeValue is a byte count written as an integer with an optional binary
// suffix (KiB, MiB, GiB).
type sizeValue int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// Set parses s into the setting; a bad value is an error that says what
// a good one looks like.
func (v *sizeValue) Set(s string) error {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size such as 1048576, 512KiB or 4MiB", s)
	}
	*v = sizeValue(n * mult)
	return nil
}

// String prints the setting in flag syntax, as -help shows its default.
func (v *sizeValue) String() string {
	if v == nil {
		return "0"
	}
	n := int64(*v)
	for _, u := range sizeUnits {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
