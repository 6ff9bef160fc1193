package broker

import (
	"fmt"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// Dedup policies as flags. A policy is a window and an optional
// "+first-wins":
//
//	24h                  a dedup ID holds 24 h after its first message was accepted
//	delivered            it holds until that message becomes visible
//	10m+first-wins       a conflicting send gets the first receipt, not 409
//
// -dedup-window is the policy of every topic; -dedup-topics overrides it
// per topic as comma-separated topic=policy pairs
// ("payments=delivered,orders=1h+first-wins").

// parseDedupPolicy reads one policy.
func parseDedupPolicy(s string) (engine.DedupPolicy, error) {
	var p engine.DedupPolicy
	win, flag, hasFlag := strings.Cut(s, "+")
	if hasFlag {
		if flag != "first-wins" {
			return p, fmt.Errorf("dedup policy %q: unknown option %q (the one option is +first-wins)", s, flag)
		}
		p.FirstWins = true
	}
	if win == "delivered" {
		p.UntilDelivered = true
		return p, nil
	}
	d, err := time.ParseDuration(win)
	switch {
	case err != nil:
		// Say why: a duration past about 290 years does not parse either.
		return p, fmt.Errorf("dedup policy %q: %v; the window must be a duration of at least 1ms or \"delivered\"", s, err)
	case d < time.Millisecond:
		return p, fmt.Errorf("dedup policy %q: the window must be a duration of at least 1ms or \"delivered\"", s)
	}
	p.Window = d
	return p, nil
}

// parseDedupTopics reads the per-topic overrides.
func parseDedupTopics(s string) (map[string]engine.DedupPolicy, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]engine.DedupPolicy{}
	for _, pair := range strings.Split(s, ",") {
		topic, spec, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("-dedup-topics entry %q is not topic=policy", pair)
		}
		if err := message.ValidateTopic(topic); err != nil {
			return nil, fmt.Errorf("-dedup-topics: %v", err)
		}
		if engine.IsDeadLetterTopic(topic) {
			return nil, fmt.Errorf("-dedup-topics: %q is a dead-letter topic, which only the broker sends to", topic)
		}
		if _, dup := out[topic]; dup {
			return nil, fmt.Errorf("-dedup-topics: topic %q is given twice", topic)
		}
		p, err := parseDedupPolicy(spec)
		if err != nil {
			return nil, fmt.Errorf("-dedup-topics: %v", err)
		}
		out[topic] = p
	}
	return out, nil
}
