package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/hourglass-mq/hourglass/access"
)

func principalCommand() *command {
	return &command{
		name:     "principal",
		synopsis: "add NAME --allow ACTION:PATTERN ... | list | remove NAME",
		summary:  "manage the principals of a credentials file (who may do what)",
		help: `Edits the credentials file of --credentials (the broker's -credentials), which
a running broker rereads within seconds. 'principal add NAME' creates a
principal with the rules of --allow (repeatable, or comma-separated) and prints
its secret once: the file keeps only a salted hash of it, and no command can
show it again (remove the principal and add it anew to get a new one).

Rules are ACTION:PATTERN. The actions: send (a topic), receive (topic/group:
receive, ack, nack, leases), manage (a topic: inspect, cancel, reschedule),
admin (topic/T, group/T/G, schedule/S, clock, backup, damage) and metrics
(metrics, stats, forecast). A pattern is exact or ends with '*'.

The secret is derived from the key file (--key-file, default the credentials
file with ".key" appended), made on the first add: the broker needs it to
verify RocketMQ signatures, so it is equivalent to every secret. Keep it on the
broker's host only.`,
		run: runPrincipal,
	}
}

// rulesFlag collects --allow rules.
type rulesFlag []access.Rule

func (r *rulesFlag) String() string {
	s := make([]string, len(*r))
	for i, x := range *r {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (r *rulesFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		rule, err := access.ParseRule(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		*r = append(*r, rule)
	}
	return nil
}

func runPrincipal(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	file := fs.String("credentials", a.env("HOURGLASS_CREDENTIALS", ""), "credentials file to edit (env HOURGLASS_CREDENTIALS)")
	keyFile := fs.String("key-file", "", "key file the secrets derive from; empty: the credentials file with .key appended")
	var rules rulesFlag
	fs.Var(&rules, "allow", "add: a rule ACTION:PATTERN (repeatable, or comma-separated)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *file == "" {
		return a.usageError(c, "--credentials names the file to edit")
	}
	if len(pos) == 0 {
		return a.usageError(c, "give a subcommand: add, list or remove")
	}
	f, err := access.ReadFile(*file)
	if err != nil {
		return a.failed(c, err)
	}
	switch sub := pos[0]; {
	case sub == "list" && len(pos) == 1:
		tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tALLOW")
		for _, e := range f.Principals {
			fmt.Fprintf(tw, "%s\t%s\n", e.Name, strings.Join(e.Allow, " "))
		}
		tw.Flush()
		return ExitOK
	case sub == "remove" && len(pos) == 2:
		if !f.RemovePrincipal(pos[1]) {
			return a.failed(c, fmt.Errorf("no principal %q in %s", pos[1], *file))
		}
		if err := f.Write(*file); err != nil {
			return a.failed(c, err)
		}
		fmt.Fprintf(a.Stdout, "removed principal %s\n", pos[1])
		return ExitOK
	case sub == "add" && len(pos) == 2:
		return a.principalAdd(c, f, *file, *keyFile, pos[1], rules)
	default:
		return a.usageError(c, "want add NAME, list or remove NAME")
	}
}

func (a *App) principalAdd(c *command, f *access.File, file, keyFile, name string, rules rulesFlag) int {
	if len(rules) == 0 {
		return a.usageError(c, "add: give the principal's rules with --allow (for example --allow send:orders)")
	}
	if keyFile == "" {
		keyFile = access.DefaultKeyFile(file)
	}
	key, err := access.LoadOrCreateKey(keyFile)
	if err != nil {
		return a.failed(c, err)
	}
	secret, err := f.AddPrincipal(key, name, rules)
	if err != nil {
		return a.failed(c, err)
	}
	if err := f.Write(file); err != nil {
		return a.failed(c, err)
	}
	fmt.Fprintf(a.Stdout, `added principal %s, allowed %s
its secret, shown this once (the file keeps only a hash):

  %s

HTTP API and console: Authorization: Bearer %s:<secret> (hourglass --token %s:<secret>),
  or HTTP Basic with user %s
RocketMQ clients (gRPC and remoting): access key %s, secret key <secret>
`, name, rules.String(), secret, name, name, name, name)
	return ExitOK
}
