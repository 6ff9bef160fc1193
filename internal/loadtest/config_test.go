package loadtest

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseArgsDefaults(t *testing.T) {
	t.Setenv("HOURGLASS_SERVER", "")
	t.Setenv("HOURGLASS_TOKEN", "")
	var stderr bytes.Buffer
	cfg, _, ok := parseArgs(nil, &stderr)
	if !ok {
		t.Fatalf("no arguments rejected: %s", stderr.String())
	}
	wantTiers := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Minute}
	if cfg.Mode != ModeTiers || len(cfg.Tiers) != 4 {
		t.Fatalf("mode %s tiers %v, want tiers %v", cfg.Mode, cfg.Tiers, wantTiers)
	}
	for i := range wantTiers {
		if cfg.Tiers[i] != wantTiers[i] {
			t.Errorf("tier %d = %s, want %s", i, cfg.Tiers[i], wantTiers[i])
		}
	}
	if cfg.Server != defaultServer || cfg.Deadline != defaultDeadline || cfg.Linger != 0 || cfg.Topic != "" {
		t.Errorf("server %q deadline %s linger %s topic %q: not the defaults", cfg.Server, cfg.Deadline, cfg.Linger, cfg.Topic)
	}
}

func TestParseArgsEnvironment(t *testing.T) {
	t.Setenv("HOURGLASS_SERVER", "http://10.0.0.1:7070")
	t.Setenv("HOURGLASS_TOKEN", "s3cret")
	cfg, _, ok := parseArgs(nil, &bytes.Buffer{})
	if !ok || cfg.Server != "http://10.0.0.1:7070" || cfg.Token != "s3cret" {
		t.Errorf("server %q token %q, want them from the environment", cfg.Server, cfg.Token)
	}
	cfg, _, _ = parseArgs([]string{"--server", "http://127.0.0.1:1"}, &bytes.Buffer{})
	if cfg.Server != "http://127.0.0.1:1" {
		t.Errorf("the flag did not override the environment: %q", cfg.Server)
	}
}

func TestParseArgsModes(t *testing.T) {
	cfg, _, ok := parseArgs([]string{"--spread", "100ms-10m"}, &bytes.Buffer{})
	if !ok || cfg.Mode != ModeSpread || cfg.SpreadMin != 100*time.Millisecond || cfg.SpreadMax != 10*time.Minute {
		t.Errorf("spread: mode %s %s-%s", cfg.Mode, cfg.SpreadMin, cfg.SpreadMax)
	}
	cfg, _, ok = parseArgs([]string{"--herd", "5000@30s"}, &bytes.Buffer{})
	if !ok || cfg.Mode != ModeHerd || cfg.N != 5000 || cfg.HerdIn != 30*time.Second || cfg.HerdAbs {
		t.Errorf("relative herd: %+v", cfg)
	}
	cfg, _, ok = parseArgs([]string{"--herd", "7@2030-01-02T03:04:05.5Z"}, &bytes.Buffer{})
	want := time.Date(2030, 1, 2, 3, 4, 5, 5e8, time.UTC)
	if !ok || !cfg.HerdAbs || !cfg.HerdAt.Equal(want) || cfg.N != 7 {
		t.Errorf("absolute herd: abs %v at %s n %d", cfg.HerdAbs, cfg.HerdAt, cfg.N)
	}
	cfg, _, ok = parseArgs([]string{"--drill", "--binary", "/bin/true", "--downtime", "2s", "--invisible", "3s"}, &bytes.Buffer{})
	if !ok || cfg.Deadline != 2*time.Second+3*time.Second+defaultDeadline || cfg.Linger != 5*time.Second {
		t.Errorf("drill defaults: deadline %s linger %s", cfg.Deadline, cfg.Linger)
	}
	cfg, _, ok = parseArgs([]string{"--drill", "--binary", "x", "--deadline", "1s", "--linger", "0s"}, &bytes.Buffer{})
	if !ok || cfg.Deadline != time.Second || cfg.Linger != 0 {
		t.Errorf("explicit deadline and linger were not kept: %s %s", cfg.Deadline, cfg.Linger)
	}
}

func TestParseArgsErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"--tiers", "1s", "--spread", "0s-1s"}, "alternatives"},
		{[]string{"--tiers", "1s,,2s"}, "empty tier"},
		{[]string{"--tiers", "1s,1s"}, "twice"},
		{[]string{"--tiers", "-1s"}, "negative"},
		{[]string{"--spread", "5s-1s"}, "MIN <= MAX"},
		{[]string{"--spread", "5s"}, "MIN-MAX"},
		{[]string{"--herd", "10"}, "N@T"},
		{[]string{"--herd", "0@1s"}, "positive"},
		{[]string{"--herd", "5@tomorrow"}, "RFC 3339"},
		{[]string{"--herd", "5@1s", "-n", "5"}, "drop -n"},
		{[]string{"-n", "0"}, "-n must be"},
		{[]string{"--batch", "1001"}, "--batch"},
		{[]string{"--max", "0"}, "--max"},
		{[]string{"--rate", "-1"}, "--rate"},
		{[]string{"--wait", "31s"}, "--wait"},
		{[]string{"--kills", "3"}, "only applies to --drill"},
		{[]string{"--drill", "--server", "http://x"}, "drop --server"},
		{[]string{"--drill", "--kills", "0"}, "--kills"},
		{[]string{"--deadline", "-1s"}, "negative"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--no-such-flag"}, "not defined"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		_, code, ok := parseArgs(c.args, &stderr)
		if ok || code != 2 {
			t.Errorf("%v: ok %v code %d, want a usage error (2)", c.args, ok, code)
			continue
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: stderr %q does not mention %q", c.args, stderr.String(), c.want)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stderr bytes.Buffer
	_, code, ok := parseArgs([]string{"--help"}, &stderr)
	if ok || code != 0 {
		t.Errorf("--help: ok %v code %d, want 0 and stop", ok, code)
	}
	for _, want := range []string{"--drill", "--herd", "N@T", "zero tolerance", "-tiers"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help does not mention %q", want)
		}
	}
	if code := Main(t.Context(), []string{"-n", "x"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("Main with a bad flag returned %d, want 2", code)
	}
}

// TestPNGFlagPointsToSVG: the chart is SVG now; the old --png is refused
// with a usage error naming --svg, not silently ignored.
func TestPNGFlagPointsToSVG(t *testing.T) {
	var stderr bytes.Buffer
	if _, code, ok := parseArgs([]string{"--png", "run.png"}, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), "--svg run.svg") {
		t.Fatalf("--png: ok %v, code %d, stderr %q", ok, code, stderr.String())
	}
	cfg, _, ok := parseArgs([]string{"--svg", "run.svg"}, &bytes.Buffer{})
	if !ok || cfg.SVGPath != "run.svg" {
		t.Fatalf("--svg: ok %v, path %q", ok, cfg.SVGPath)
	}
}
