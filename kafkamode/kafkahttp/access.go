package kafkahttp

import (
	"net/http"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/errs"
)

// principalKey is the context key of the request's principal.
type principalKey struct{}

// needFunc is the action and resource a request needs; all means on
// every resource (no resource is known before a lookup).
type needFunc func(r *http.Request) (a access.Action, resource string, all bool)

func onTopic(a access.Action) needFunc {
	return func(r *http.Request) (access.Action, string, bool) { return a, r.PathValue("topic"), false }
}

func fixed(a access.Action, res string) needFunc {
	return func(*http.Request) (access.Action, string, bool) { return a, res, false }
}

// everyTopic is the need of the routes by message ID or by key alone. A
// Kafka-mode ID is a delay-record position anyone can write down, and it
// names no topic: only a principal that may manage every topic uses them,
// so that a refusal never depends on what the position holds.
func everyTopic(*http.Request) (access.Action, string, bool) { return access.Manage, "*", true }

// permit checks the request's principal against the route's need before
// the handler looks anything up, and audits refusals. done, called with
// the handler's error, audits message management with its outcome.
func (h *Handler) permit(r *http.Request, need needFunc) (done func(error), err error) {
	done = func(error) {}
	if need == nil {
		return done, nil
	}
	p, _ := r.Context().Value(principalKey{}).(*access.Principal)
	if p == nil {
		p = access.Anonymous
	}
	a, res, all := need(r)
	if (all && !p.AllowedAll(a)) || (!all && !p.Allowed(a, res)) {
		if all {
			res = "every topic (" + r.Method + " " + r.URL.Path + ")"
		}
		h.opts.Audit.Record(r.Context(), "kafka-http", p.Name, a, res, access.ResultDenied, r.Method+" "+r.Pattern)
		return done, access.Denied(p, a, res)
	}
	if access.Audited(a) {
		done = func(err error) {
			result := access.ResultOK
			if err != nil {
				result = access.ResultFailed + ": " + string(errs.CodeOf(err))
			}
			h.opts.Audit.Record(r.Context(), "kafka-http", p.Name, a, res, result, r.Method+" "+r.Pattern)
		}
	}
	return done, nil
}
