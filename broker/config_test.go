package broker

import (
	"flag"
	"github.com/hourglass-mq/hourglass/engine"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	o := c.EngineOptions(nil)
	if o.Dir != "./hourglass-data" || o.Flush != engine.FlushSync || o.Limits.MaxBodyBytes != 4<<20 ||
		o.Limits.MaxDelay != 400*24*time.Hour || !reflect.DeepEqual(o.Limits.DelayLevels, message.DefaultDelayLevels) ||
		o.NoAutoCreate || o.MaxBatch != 1000 || o.DispatchRate != 500_000 {
		t.Fatalf("engine options from defaults: %+v", o)
	}
}

// TestPrecedence: flags beat the environment, which beats the file, which
// beats the defaults, whatever order the sources are applied in.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hourglass.json")
	os.WriteFile(file, []byte(`{"listen":"127.0.0.1:1","data_dir":"/from-file","max_batch":7,"read_timeout":"20s","write_timeout":"50s","max_header_bytes":"64KiB","flush":"async","delay_levels":"2s, 3s","auto_create_topics":false,"max_body_bytes":"1MiB"}`), 0o644)
	env := map[string]string{
		"HOURGLASS_CONFIG":       file,
		"HOURGLASS_LISTEN":       "127.0.0.1:2",
		"HOURGLASS_DATA_DIR":     "/from-env",
		"HOURGLASS_READ_TIMEOUT": "40s",
		"HOURGLASS_IDLE_TIMEOUT": "3m",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-listen", "127.0.0.1:3", "-flush-interval=25ms", "-idle-timeout", "90s"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(lookup); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.ConfigFile = ""
	want.Listen = "127.0.0.1:3"                                          // flag over env and file
	want.DataDir = "/from-env"                                           // env over file
	want.MaxBatch = 7                                                    // file over default
	want.Flush = "async"                                                 // file
	want.DelayLevels = []time.Duration{2 * time.Second, 3 * time.Second} // file, list syntax
	want.AutoCreateTopics = false                                        // file, JSON boolean
	want.MaxBodyBytes = 1 << 20                                          // file, size syntax
	want.FlushInterval = 25 * time.Millisecond                           // flag
	want.ReadTimeout = 40 * time.Second                                  // env over file
	want.WriteTimeout = 50 * time.Second                                 // file
	want.MaxHeaderBytes = 64 << 10                                       // file, size syntax
	want.IdleTimeout = 90 * time.Second                                  // flag over env
	c.cmdline, c.ConfigFile = nil, ""
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("resolved\n%+v\nwant\n%+v", c, want)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	none := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", `{"listn":"x"}`, nil, `unknown key "listn"`},
		{"not an object", `[1]`, nil, "not a JSON object"},
		{"bad duration", `{"max_delay":"forever"}`, nil, `"forever" is not a duration`},
		{"object value", `{"listen":{}}`, nil, "not a string, number or boolean"},
		{"bad env", `{}`, map[string]string{"HOURGLASS_MAX_BATCH": "many"}, "HOURGLASS_MAX_BATCH"},
		{"bad size", `{"segment_bytes":"12XB"}`, nil, "is not a size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.LoadFile(write(tc.file))
			if err == nil {
				err = c.ApplyEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %s", err, tc.want)
			}
		})
	}
	if err := (&Config{}).LoadFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("a missing config file is not an error")
	}
	c := DefaultConfig()
	if err := c.Resolve(none); err != nil {
		t.Fatalf("no file, no env: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.DataDir = "" }, "-data-dir"},
		{func(c *Config) { c.Listen = "7070" }, "-listen"},
		{func(c *Config) { c.Listen = "127.0.0.1:-5" }, "-listen"},
		{func(c *Config) { c.Flush = "sometimes" }, "-flush"},
		{func(c *Config) { c.SegmentBytes = 1000 }, "-segment-bytes"},
		{func(c *Config) { c.DelayLevels = []time.Duration{time.Hour}; c.MaxDelay = time.Minute }, "-delay-levels"},
		{func(c *Config) { c.DelayLevels = nil }, "-delay-levels"},
		{func(c *Config) { c.MaxBodyBytes = 16 << 20 }, "-max-request-bytes"},
		{func(c *Config) { c.DispatchRate = 0 }, "-dispatch-rate"},
		{func(c *Config) { c.MaxProperties = 0 }, "-max-properties 0 is not in [1, 60000]"},
		{func(c *Config) { c.GRPCSignatureSkew = 500 * time.Millisecond }, "-grpc-signature-skew 500ms is not in [1s, 15m0s]"},
		{func(c *Config) { c.GRPCSignatureSkew = 16 * time.Minute }, "-grpc-signature-skew 16m0s is not in [1s, 15m0s]"},
		{func(c *Config) { c.MaxProperties = 60_001 }, "-max-properties 60001 is not in [1, 60000]"},
		{func(c *Config) { c.DefaultQueues = 0 }, "-default-queues"},
		{func(c *Config) { c.LogLevel = "loud" }, "-log-level"},
		{func(c *Config) { c.LogFormat = "xml" }, "-log-format"},
		{func(c *Config) { c.DrainTimeout = -time.Second }, "-drain-timeout"},
		{func(c *Config) { c.ReadHeaderTimeout = 0 }, "-read-header-timeout"},
		{func(c *Config) { c.ReadTimeout = time.Second }, "-read-timeout"},
		{func(c *Config) { c.WriteTimeout = 30 * time.Second }, "-write-timeout 30s must be at least 35s"},
		{func(c *Config) { c.IdleTimeout = 0 }, "-idle-timeout"},
		{func(c *Config) { c.MaxHeaderBytes = 100 }, "-max-header-bytes"},
		{func(c *Config) { c.FlushInterval = time.Nanosecond }, "-flush-interval 1ns is below 1ms"},
		{func(c *Config) { c.CheckpointInterval = time.Microsecond }, "-checkpoint-interval 1µs is below 1ms"},
		{func(c *Config) { c.CheckpointBytes = -1 }, "-checkpoint-bytes -1 is negative; 0 leaves only the interval"},
		{func(c *Config) { c.DedupTopics = "t=1ms,t=24h" }, `topic "t" is given twice`},
		{func(c *Config) { c.DedupTopics = "%DLQ%x.g=1h" }, "dead-letter topic"},
		{func(c *Config) { c.MetricsToken = "scrape\n" }, "-metrics-token"},
		{func(c *Config) { c.MetricsToken = "a\x00b" }, "-metrics-token"},
		{func(c *Config) { c.RemotingMaxConns = -1 }, "-remoting-max-conns -1 must not be negative"},
	} {
		c := DefaultConfig()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
	}
}

// TestDelayLevelsRefuseAnEmptyEntry: "1s,,2s" is refused, not read as
// two levels, which would renumber the levels after the gap.
func TestDelayLevelsRefuseAnEmptyEntry(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-delay-levels", "1s,,2s"}); err == nil || !strings.Contains(err.Error(), "entry 2 is empty") {
		t.Fatalf("-delay-levels 1s,,2s: %v", err)
	}
	if err := fs.Parse([]string{"-delay-levels", "1s,2s,"}); err != nil || len(c.DelayLevels) != 2 {
		t.Fatalf("-delay-levels 1s,2s, (a trailing comma): %v, %v", err, c.DelayLevels)
	}
}

// TestFlagsHelp: every setting has a flag with help text and its default.
func TestFlagsHelp(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if f.Usage == "" {
			t.Errorf("flag -%s has no help", f.Name)
		}
	})
	if want := reflect.TypeOf(Config{}).NumField() - 1; n != want {
		t.Fatalf("%d flags for %d settings", n, want)
	}
	for name, def := range map[string]string{"listen": "127.0.0.1:7070", "max-body-bytes": "4MiB", "max-request-bytes": "8MiB",
		"max-delay": "9600h0m0s", "delay-levels": "1s,5s,10s,30s,1m,2m,3m,4m,5m,6m,7m,8m,9m,10m,20m,30m,1h,2h", "auto-create-topics": "true", "auth-token": "",
		"read-header-timeout": "10s", "read-timeout": "1m0s", "write-timeout": "1m0s", "idle-timeout": "2m0s", "max-header-bytes": "256KiB", "max-properties": "128", "grpc-signature-skew": "30s"} {
		if got := fs.Lookup(name).DefValue; got != def {
			t.Errorf("-%s default %q, want %q", name, got, def)
		}
	}
	c.AuthToken, c.MetricsToken = "hidden", "hidden"
	for _, name := range []string{"auth-token", "metrics-token"} {
		if s := fs.Lookup(name).Value.String(); s != "" {
			t.Errorf("-%s is printed: %q", name, s)
		}
	}
	if err := fs.Parse([]string{"-auto-create-topics=false", "-max-body-bytes", "2MiB"}); err != nil {
		t.Fatal(err)
	}
	if c.AutoCreateTopics || c.MaxBodyBytes != 2<<20 {
		t.Fatalf("flags not applied: %+v", c)
	}
}

// TestDefaultsAreTheEngines: the server's defaults for engine settings map
// onto exactly the engine's own defaults, so that running the broker
// without flags and opening the engine without options mean the same,
// but for two deliberate differences (the scrub's delay, preallocation).
func TestDefaultsAreTheEngines(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = "d"
	got, want := c.EngineOptions(nil), engine.NewOptions("d")
	got.Clock, want.Clock, got.Logger, want.Logger = nil, nil, nil, nil
	// The one deliberate difference: serve scrubs a second after its
	// start, where the engine waits a minute (engine.Options.ScrubDelay).
	if got.ScrubDelay != time.Second || want.ScrubDelay != engine.DefaultScrubDelay {
		t.Fatalf("scrub delay: serve %v, engine %v", got.ScrubDelay, want.ScrubDelay)
	}
	got.ScrubDelay = want.ScrubDelay
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("server defaults give engine options\n%+v\nthe engine's defaults are\n%+v", got, want)
	}
}
