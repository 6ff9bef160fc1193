package access

import (
	"strings"

	"github.com/hourglass-mq/hourglass/errs"
)

// Principal is who a request acts as, with what it may do. A Principal is
// immutable once made: a reload makes new ones.
type Principal struct {
	// Name is the principal's name: the user of HTTP Basic, the part before
	// ':' of a bearer credential, the RocketMQ access key, a client
	// certificate's subject common name.
	Name  string
	rules []Rule
}

// The names of the principals that stand for the flags' tokens and for a
// broker without authentication.
const (
	TokenName     = "auth-token"
	MetricsName   = "metrics-token"
	AnonymousName = "anonymous"
)

var everything = []Rule{
	{Send, "*"}, {Receive, "*"}, {Manage, "*"}, {Admin, "*"}, {Metrics, "*"},
}

// Anonymous is the principal of every request to a broker that has no
// authentication configured: it may do everything, as before principals
// existed.
var Anonymous = &Principal{Name: AnonymousName, rules: everything}

// NewPrincipal returns a principal with the given rules (a copy).
func NewPrincipal(name string, rules []Rule) *Principal {
	return &Principal{Name: name, rules: append([]Rule(nil), rules...)}
}

// Rules returns a copy of the principal's rules.
func (p *Principal) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// Allowed reports whether the principal may do a on resource.
func (p *Principal) Allowed(a Action, resource string) bool {
	for _, r := range p.rules {
		if r.Matches(a, resource) {
			return true
		}
	}
	return false
}

// Check returns nil when the principal may do a on resource, else a
// permission_denied error that names the principal, the action and the
// resource and nothing else: callers check before they look the resource
// up, so the refusal is the same whether or not it exists.
func (p *Principal) Check(a Action, resource string) error {
	if p.Allowed(a, resource) {
		return nil
	}
	return Denied(p, a, resource)
}

// Denied is the refusal of action a on resource to p.
func Denied(p *Principal, a Action, resource string) error {
	return errs.New(errs.PermissionDenied, "principal %q may not %s %s", p.Name, a, resource)
}

// AllowedAll reports whether the principal may do a on every resource:
// what a route that names no resource before its lookup (a message ID)
// needs to skip the per-resource check.
func (p *Principal) AllowedAll(a Action) bool {
	for _, r := range p.rules {
		if r.Action == a && r.Pattern == "*" {
			return true
		}
	}
	return false
}

// Touches reports whether some resource that starts with prefix is
// allowed for a: a rule "receive:orders/*" touches "orders/".
func (p *Principal) Touches(a Action, prefix string) bool {
	for _, r := range p.rules {
		if r.Action != a {
			continue
		}
		if pre, ok := strings.CutSuffix(r.Pattern, "*"); ok {
			if strings.HasPrefix(prefix, pre) || strings.HasPrefix(pre, prefix) {
				return true
			}
		} else if strings.HasPrefix(r.Pattern, prefix) {
			return true
		}
	}
	return false
}

// SeesTopic reports whether the principal may do anything with topic t:
// then it may see the topic's description and groups. Listings show a
// principal only the topics it sees.
func (p *Principal) SeesTopic(t string) bool {
	return p.Allowed(Send, t) || p.Allowed(Manage, t) || p.Allowed(Admin, TopicResource(t)) ||
		p.Touches(Receive, t+"/") || p.Touches(Admin, GroupResource(t, ""))
}

// SeesGroup reports whether the principal may do anything with group g of
// topic t.
func (p *Principal) SeesGroup(t, g string) bool {
	return p.Allowed(Receive, ConsumerResource(t, g)) || p.Allowed(Admin, GroupResource(t, g)) ||
		p.Allowed(Manage, t) || p.Allowed(Admin, TopicResource(t))
}

// ConsumesGroup reports whether the principal may receive as group g of
// some topic: what a request that names only the group needs (RocketMQ's
// retry topic %RETRY%g, a send-back, a group's member list). Topic names
// hold no '/', so a rule's pattern splits at its first '/'.
func (p *Principal) ConsumesGroup(g string) bool {
	for _, r := range p.rules {
		if r.Action != Receive {
			continue
		}
		pre, prefix := strings.CutSuffix(r.Pattern, "*")
		_, rest, slash := strings.Cut(pre, "/")
		switch {
		case !prefix:
			if slash && rest == g {
				return true
			}
		case !slash || strings.HasPrefix(g, rest):
			return true
		}
	}
	return false
}
