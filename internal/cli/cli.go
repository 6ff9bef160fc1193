// Package cli implements the hourglass command line: the broker (serve),
// the client commands that talk to it over the HTTP API (send, receive,
// inspect, ...), and an in-process demo.
//
// Every command is a function of its arguments, its input and its outputs
// (see App), so tests run commands in-process against an httptest server
// and check what was sent and what was printed. Exit codes: 0 success,
// 1 the operation failed (the server's error, a network error), 2 the
// command line was wrong.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Exit codes returned by Run.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailed: the operation failed; stderr has the server's error code
	// and message, or the network error.
	ExitFailed = 1
	// ExitUsage: the command line was wrong; stderr says what and how to
	// get help.
	ExitUsage = 2
)

// App is one invocation's environment. Its zero value is not usable; Run
// fills it from the process, tests fill it with buffers and a fixed
// environment.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// LookupEnv reads an environment variable (os.LookupEnv in Run).
	LookupEnv func(string) (string, bool)
	// Now is the wall clock, used only to print relative times ("in 10s").
	Now func() time.Time
}

// Run runs the command line args (without the program name) and returns
// the exit code. SIGINT and SIGTERM cancel the command's context: serve
// shuts down gracefully, receive --follow stops, a pending request is
// abandoned. A second signal gets the default behaviour (the process dies).
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default handlers: a second Ctrl-C kills
	}()
	a := &App{Stdin: stdin, Stdout: stdout, Stderr: stderr, LookupEnv: os.LookupEnv, Now: time.Now}
	return a.Run(ctx, args)
}

// command is one subcommand.
type command struct {
	name string
	// synopsis shows the positional arguments after "[flags]".
	synopsis string
	// summary is the one line shown by "hourglass help".
	summary string
	// help is the paragraph shown by "hourglass <cmd> --help".
	help string
	run  func(ctx context.Context, a *App, c *command, args []string) int
}

// commands lists the subcommands in the order help shows them.
func commands() []*command {
	return []*command{
		serveCommand(),
		sendCommand(),
		receiveCommand(),
		ackCommand(),
		nackCommand(),
		cancelCommand(),
		rescheduleCommand(),
		inspectCommand(),
		traceCommand(),
		topicsCommand(),
		groupsCommand(),
		redriveCommand(),
		listCommand(),
		deadCommand(),
		statsCommand(),
		clockCommand(),
		scheduleCommand(),
		forecastCommand(),
		repairCommand(),
		checkCommand(),
		backupCommand(),
		principalCommand(),
		restoreCommand(),
		benchCommand(),
		kafkaCommand(),
		demoCommand(),
		versionCommand(),
	}
}

// Run runs one command line (without the program name) with ctx.
func (a *App) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.printHelp(a.Stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "--version", "-version", "-v":
		// The spelling people try first; the command is "version".
		if c := lookup("version"); c != nil {
			return c.run(ctx, a, c, args[1:])
		}
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				// The flag set prints its usage to stderr; help was
				// asked for, so it goes to stdout.
				h := *a
				h.Stderr = a.Stdout
				c.run(ctx, &h, c, []string{"--help"})
				return ExitOK
			}
			fmt.Fprintf(a.Stderr, "hourglass: unknown command %q; run 'hourglass help' for the list\n", args[1])
			return ExitUsage
		}
		a.printHelp(a.Stdout)
		return ExitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(a.Stderr, "hourglass: unknown command %q; run 'hourglass help' for the list\n", name)
		return ExitUsage
	}
	return c.run(ctx, a, c, args[1:])
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (a *App) printHelp(w io.Writer) {
	fmt.Fprint(w, `hourglass is a durable delayed-message broker: a message is written now and
becomes visible to consumers at a chosen time.

usage: hourglass <command> [flags] [arguments]

commands:
`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Run 'hourglass <command> --help' for the flags of a command.
Client commands talk to --server (default `+defaultServer+`, or $HOURGLASS_SERVER)
with an optional --token (or $HOURGLASS_TOKEN); add --json for machine-readable output.
Exit status: 0 success, 1 the operation failed, 2 bad command line.
`)
}

// newFlagSet returns the flag set of c; its usage text goes to stderr.
func (a *App) newFlagSet(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("hourglass "+c.name, flag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: hourglass %s [flags]", c.name)
		if c.synopsis != "" {
			fmt.Fprintf(w, " %s", c.synopsis)
		}
		fmt.Fprintf(w, "\n\n%s\n", strings.TrimSpace(c.help))
		if hasFlags(fs) {
			fmt.Fprint(w, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseFlags parses args with fs and returns the positional arguments.
// Unlike fs.Parse it accepts flags after positional arguments
// ("cancel ID --server URL"); everything after "--" is positional. It
// returns ok=false with the exit code to return when parsing ended the
// command: ExitOK after --help, ExitUsage after a bad flag (the flag
// package has printed the error and the usage).
func parseFlags(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := parseQuiet(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ExitOK, false
			}
			return nil, ExitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		// fs.Parse stops at "--" (consuming it) or at the first
		// non-flag argument; tell the two apart by what preceded rest.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseQuiet is fs.Parse, except that a bad flag prints one line naming
// the mistake and where to find the usage, not the whole flag list: a
// typo in "--delay 5x" should not scroll the error off the screen. Asked
// for with --help, the usage is printed in full.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		out.Write(buf.Bytes())
	default:
		fmt.Fprintf(out, "%s: %s\nrun '%s --help' for usage\n", fs.Name(), explainFlagError(fs, err), fs.Name())
	}
	return err
}

// badValue matches the flag package's error for a value its type refused.
var badValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): parse error$`)

// explainFlagError replaces the flag package's bare "parse error" for a
// number or duration with what the flag wants.
func explainFlagError(fs *flag.FlagSet, err error) string {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	f := fs.Lookup(m[2])
	if f == nil {
		return err.Error()
	}
	want := "a value of another form"
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			want = "a duration such as 500ms, 10s, 30m or 1h30m"
		case int, int64, uint, uint64:
			want = "a whole number"
		case float64:
			want = "a number"
		case bool:
			want = "true or false"
		}
	}
	return fmt.Sprintf("invalid value %q for flag -%s: want %s", m[1], m[2], want)
}

// usageError reports a command-line mistake and returns ExitUsage.
func (a *App) usageError(c *command, format string, args ...any) int {
	fmt.Fprintf(a.Stderr, "hourglass %s: %s\nrun 'hourglass %s --help' for usage\n", c.name, fmt.Sprintf(format, args...), c.name)
	return ExitUsage
}

// failed reports an operation's error and returns ExitFailed. A refused
// connection gets a hint: the usual cause is a broker that is not running,
// or one listening elsewhere than --server.
func (a *App) failed(c *command, err error) int {
	fmt.Fprintf(a.Stderr, "hourglass %s: %v\n", c.name, err)
	if errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintf(a.Stderr, "hint: no broker answers there; is one running ('hourglass serve')? --server or $HOURGLASS_SERVER names where it listens\n")
	}
	return ExitFailed
}

// env returns the environment variable name, or def when it is unset.
func (a *App) env(name, def string) string {
	if a.LookupEnv != nil {
		if v, ok := a.LookupEnv(name); ok && v != "" {
			return v
		}
	}
	return def
}

// propsFlag collects repeated --prop k=v flags.
type propsFlag map[string]string

func (p propsFlag) String() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + p[k]
	}
	return strings.Join(keys, ",")
}

func (p propsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	p[k] = v
	return nil
}
