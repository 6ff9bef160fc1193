package kafkabench

import (
	"fmt"
	"os"
	"time"
)

// A System is one delay forwarder under test.
type System struct {
	// Name is what -systems calls it; Help its line in -help.
	Name, Help string
	// Hourglass says its workers run the hourglass binary (-hourglass).
	Hourglass bool
	// DupAfterCrash: it may deliver a message twice after a worker was
	// killed (at least once), and -strict then forgives duplicates.
	// DupAlways: it may duplicate at any time (the seed's scheme C
	// commits its progress on a timer), and -strict never counts them.
	DupAfterCrash, DupAlways bool
	// NoKill: -kill leaves its workers alone. The floor keeps no progress
	// of its own: a kill loses what it held by design, which measures
	// nothing.
	NoKill bool
	// Prepare creates the topics the system consumes, beside the business
	// topic, and returns how to start its i-th worker process (nil: start
	// none, the workers already run).
	Prepare func(env Env) (Start, error)
	// Route names the topic a message of the tier is produced to, without
	// the _delayMs header (the topic is the delay); nil: the run's delay
	// topic, with the header.
	Route func(prefix string, tier time.Duration) string
}

// Env is what a System's Prepare gets for one run.
type Env struct {
	Config *Config
	// Prefix names the run's topics: the business topic Prefix.biz, the
	// delay topic Prefix.delay; the workers' group is Prefix.
	Prefix string
	// Create creates a topic with the run's replication factor.
	Create func(topic string, partitions int32, conf map[string]*string) error
	// Reexec is the command line that runs this benchmark again.
	Reexec []string
}

// Start starts the i-th worker of a system.
type Start func(i int) (*Child, error)

// Options are what the command that embeds the benchmark supplies.
type Options struct {
	// Name is the command's name in messages and -help.
	Name string
	// Reexec is the command line that runs this benchmark again (its
	// arguments follow); the floor runs in such a process.
	Reexec []string
	// Hourglass is -hourglass's default; Brokers -brokers's (the
	// command's $HOURGLASS_KAFKA_BROKERS).
	Hourglass, Brokers string
	// Extra are systems beyond the shipped ones (the developer's).
	Extra []System
}

// delayPartitions is the partition count of the delay topics (and scheme
// C's level topics); bizPartitions that of the business topic.
const (
	delayPartitions = 6
	bizPartitions   = 3
)

// DelayPartitions is the partition count of the topics the benchmark
// consumes, for the systems of Options.Extra.
const DelayPartitions = delayPartitions

// builtin are the shipped systems.
func builtin() []System {
	return []System{
		{Name: "floor", Help: "a bare exactly-once loop: Kafka's own floor", NoKill: true, Prepare: prepareFloor("floor")},
		{Name: "floor-alo", Help: "a bare at-least-once loop: Kafka's own floor for --delivery at-least-once",
			NoKill: true, Prepare: prepareFloor("floor-alo")},
		HourglassSystem("hourglass", "hourglass kafka, exactly once", "exactly-once", ""),
		HourglassSystem("hourglass-alo", "hourglass kafka --delivery at-least-once", "at-least-once", ""),
	}
}

// HourglassSystem is a system of `hourglass kafka` workers with the
// delivery mode, running the binary bin ("": -hourglass).
func HourglassSystem(name, help, delivery, bin string) System {
	return System{Name: name, Help: help, Hourglass: true, DupAfterCrash: delivery == "at-least-once",
		Prepare: prepareHourglass(delivery, bin)}
}

func (o Options) systems() []System { return append(builtin(), o.Extra...) }

// system is the system called name, or nil.
func (o Options) system(name string) *System {
	for _, s := range o.systems() {
		if s.Name == name {
			return &s
		}
	}
	return nil
}

func (o Options) systemNames() []string {
	var names []string
	for _, s := range o.systems() {
		names = append(names, s.Name)
	}
	return names
}

// systemHelp lists the systems with what each is.
func (o Options) systemHelp() string {
	out := ""
	for i, s := range o.systems() {
		if i > 0 {
			out += "; "
		}
		out += s.Name + " (" + s.Help + ")"
	}
	return out
}

// prepareFloor creates the delay topic and starts the floor of the role
// ("floor" or "floor-alo") in a process of this benchmark run again.
func prepareFloor(role string) func(Env) (Start, error) {
	return func(env Env) (Start, error) {
		if err := env.Create(env.Prefix+".delay", delayPartitions, nil); err != nil {
			return nil, err
		}
		return func(int) (*Child, error) {
			args := append(append([]string{}, env.Reexec[1:]...), "-role", role, "-prefix", env.Prefix, "-brokers", env.Config.Brokers)
			return StartChild(env.Reexec[0], args...)
		}, nil
	}
}

// prepareHourglass creates the delay topic, its state topic (compacted)
// and its dead-letter topic, and starts `hourglass kafka` workers of bin
// ("": -hourglass) with the delivery.
func prepareHourglass(delivery, bin string) func(Env) (Start, error) {
	return func(env Env) (Start, error) {
		c := env.Config
		if c.DelayTopic != "" {
			return nil, nil // the workers already run
		}
		compact := "compact"
		for _, t := range []struct {
			name string
			conf map[string]*string
		}{{env.Prefix + ".delay", nil}, {env.Prefix + ".delay.state", map[string]*string{"cleanup.policy": &compact}}, {env.Prefix + ".delay.dlq", nil}} {
			if err := env.Create(t.name, delayPartitions, t.conf); err != nil {
				return nil, err
			}
		}
		return func(i int) (*Child, error) {
			args := []string{"kafka", "--brokers", c.Brokers, "--delay-topic", env.Prefix + ".delay",
				"--group", env.Prefix, "--worker-id", fmt.Sprintf("w%d", i+1), "--session-timeout", c.SessionTimeout.String(),
				"--log-level", logLevel(), "--delivery", delivery}
			if c.Static {
				args = append(args, "--static-membership")
			}
			b := bin
			if b == "" {
				b = c.Hourglass
			}
			return StartChild(b, args...)
		}, nil
	}
}

// logLevel is the workers': debug with KAFKABENCH_VERBOSE=2.
func logLevel() string {
	if os.Getenv("KAFKABENCH_VERBOSE") == "2" {
		return "debug"
	}
	return "info"
}
