package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/client"
)

// defaultServer is where client commands connect without --server or
// HOURGLASS_SERVER: the default listen address of serve.
const defaultServer = "http://127.0.0.1:7070"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	server string
	token  string
	json   bool
}

// addClientFlags registers --server, --token and --json on fs. The token
// is read from the environment only when used, so --help never prints it.
func (a *App) addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.server, "server", a.env("HOURGLASS_SERVER", defaultServer), "broker URL (env HOURGLASS_SERVER)")
	fs.StringVar(&cf.token, "token", "", "bearer token for a broker started with -auth-token (env HOURGLASS_TOKEN)")
	fs.BoolVar(&cf.json, "json", false, "print JSON instead of text, for scripts")
	return cf
}

// client returns the API client the flags describe.
func (a *App) client(cf *clientFlags) *client.Client {
	token := cf.token
	if token == "" {
		token = a.env("HOURGLASS_TOKEN", "")
	}
	return client.New(cf.server, client.WithToken(token))
}

// printJSON writes v as indented JSON.
func (a *App) printJSON(v any) {
	enc := json.NewEncoder(a.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// deliveryFlags are --delay, --at and --level.
type deliveryFlags struct {
	delay time.Duration
	at    string
	level int
}

func addDeliveryFlags(fs *flag.FlagSet, verb string) *deliveryFlags {
	d := &deliveryFlags{}
	fs.DurationVar(&d.delay, "delay", 0, verb+" after this duration, e.g. 10s, 30m, 1h30m")
	fs.StringVar(&d.at, "at", "", verb+" at this time: RFC 3339 (2030-01-02T09:00:00Z) or Unix milliseconds")
	fs.IntVar(&d.level, "level", 0, verb+" after delay level N of the broker's table (1-based; level 3 is 10s by default)")
	return d
}

// when returns the delivery time the flags give; it rejects more than one.
func (d *deliveryFlags) when() (client.When, error) {
	var w client.When
	n := 0
	if d.delay != 0 {
		if d.delay < 0 {
			return w, fmt.Errorf("--delay %v is negative", d.delay)
		}
		w.Delay = d.delay
		n++
	}
	if d.at != "" {
		t, err := parseTime(d.at)
		if err != nil {
			return w, fmt.Errorf("--at: %v", err)
		}
		w.At = t
		n++
	}
	if d.level != 0 {
		if d.level < 0 {
			return w, fmt.Errorf("--level %d is negative; levels start at 1", d.level)
		}
		w.Level = d.level
		n++
	}
	if n > 1 {
		return w, errors.New("give at most one of --delay, --at and --level")
	}
	return w, nil
}

// parseTime reads an instant written as Unix milliseconds or RFC 3339.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms <= 0 {
			return time.Time{}, fmt.Errorf("%q must be a positive Unix time in milliseconds", s)
		}
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2030-01-02T09:00:00Z) nor Unix milliseconds", s)
	}
	return t, nil
}

// when renders an instant with its distance from now: "2030-...Z (in 10s)".
func (a *App) when(m client.Millis) string {
	if m == 0 {
		return "-"
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	d := m.Time().Sub(now())
	switch {
	case d > 0:
		return fmt.Sprintf("%s (in %s)", m, roundDuration(d))
	case d < 0:
		return fmt.Sprintf("%s (%s ago)", m, roundDuration(-d))
	}
	return fmt.Sprintf("%s (now)", m)
}

// roundDuration keeps two or three significant figures, which is what a
// reader wants from "in 9.998s".
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// formatProps renders properties sorted by name: "a=1, b=2".
func formatProps(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + p[k]
	}
	return strings.Join(keys, ", ")
}

// formatBody renders a body for a terminal: as text when it is UTF-8,
// else in base64, saying so.
func formatBody(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "(base64) " + base64.StdEncoding.EncodeToString(b)
}

// field prints one "name: value" line of a detail view, aligned.
func field(w io.Writer, name, value string) {
	fmt.Fprintf(w, "%-13s %s\n", name+":", value)
}

// subfield prints an indented "name: value" line under a heading.
func subfield(w io.Writer, name, value string) {
	fmt.Fprintf(w, "  %-11s %s\n", name+":", value)
}
