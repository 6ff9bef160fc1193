package access

import (
	"fmt"
	"strings"
)

// Action is what a rule permits. The values are part of the credentials
// file format and of refusal messages: never change them.
type Action string

// The actions.
const (
	// Send: send to a topic (resource: the topic).
	Send Action = "send"
	// Receive: receive, ack, nack and change leases as a consumer group of
	// a topic (resource: topic/group).
	Receive Action = "receive"
	// Manage: inspect, cancel and reschedule messages of a topic
	// (resource: the topic).
	Manage Action = "manage"
	// Admin: topics, groups, redrive, schedules, the clock, backups
	// (resources: topic/T, group/T/G, schedule/S, clock, backup, damage).
	Admin Action = "admin"
	// Metrics: read /metrics, /v1/stats and /v1/forecast (resources:
	// metrics, stats, forecast).
	Metrics Action = "metrics"
)

// Actions lists every action, in the order refusals and help show them.
var Actions = []Action{Send, Receive, Manage, Admin, Metrics}

func (a Action) valid() bool {
	for _, v := range Actions {
		if a == v {
			return true
		}
	}
	return false
}

// Rule permits one action on the resources its pattern matches.
type Rule struct {
	Action  Action
	Pattern string
}

// String is the rule's written form, "action:pattern".
func (r Rule) String() string { return string(r.Action) + ":" + r.Pattern }

// ParseRule reads "action:pattern". The pattern is exact, or ends with one
// '*' (a prefix match; "*" alone matches everything).
func ParseRule(s string) (Rule, error) {
	a, pat, ok := strings.Cut(s, ":")
	if !ok {
		return Rule{}, fmt.Errorf("rule %q is not action:pattern (for example send:orders)", s)
	}
	r := Rule{Action: Action(a), Pattern: pat}
	if !r.Action.valid() {
		return Rule{}, fmt.Errorf("rule %q: unknown action %q; the actions are send, receive, manage, admin and metrics", s, a)
	}
	if pat == "" {
		return Rule{}, fmt.Errorf("rule %q: the pattern is empty; use * for every resource", s)
	}
	if i := strings.IndexByte(pat, '*'); i >= 0 && i != len(pat)-1 {
		return Rule{}, fmt.Errorf("rule %q: '*' may only end a pattern", s)
	}
	return r, nil
}

// Matches reports whether the rule permits action a on resource.
func (r Rule) Matches(a Action, resource string) bool {
	if r.Action != a {
		return false
	}
	if prefix, ok := strings.CutSuffix(r.Pattern, "*"); ok {
		return strings.HasPrefix(resource, prefix)
	}
	return r.Pattern == resource
}

// The resources of the admin and metrics actions that are not names.
const (
	ResClock    = "clock"
	ResBackup   = "backup"
	ResDamage   = "damage"
	ResMetrics  = "metrics"
	ResStats    = "stats"
	ResForecast = "forecast"
)

// TopicResource is the admin resource of topic t.
func TopicResource(t string) string { return "topic/" + t }

// GroupResource is the admin resource of group g of topic t.
func GroupResource(t, g string) string { return "group/" + t + "/" + g }

// ScheduleResource is the admin resource of schedule s.
func ScheduleResource(s string) string { return "schedule/" + s }

// ConsumerResource is the receive resource of group g of topic t.
func ConsumerResource(t, g string) string { return t + "/" + g }
