package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// How each route maps onto package access's rules. The check runs before
// the handler looks anything up, so a refusal is the same whether or not
// what the request names exists:
//
//	send, batch, send stream             send      {topic}
//	inspect, cancel, reschedule, preview manage    the message's topic (below)
//	lookup by key                        manage    {topic}
//	create topic                         admin     topic/{topic}
//	create group, redrive                admin     group/{topic}/{group}
//	dead letters: resend, delete, purge  admin     group/{topic}/{group}
//	list in flight, list dead letters    manage    {topic}
//	list pending                         manage    ?topic=, or every topic without it
//	receive, stream, ack, nack, lease    receive   {topic}/{group}
//	schedules (each)                     admin     schedule/{schedule}
//	  creating one, also                 send      its topic (createSchedule)
//	advance the clock, backup, damage    admin     clock, backup, damage
//	stats, forecast, /metrics            metrics   stats, forecast, metrics
//	list topics, schedules               any principal; the list holds what it may see
//	describe a topic, list its groups    any rule that names the topic
//	read the clock                       any principal
//
// A message ID names no topic. A principal that may manage every topic
// goes on; any other is refused unless the ID names a message of a topic
// it may manage, with the same refusal for an ID that names nothing: IDs
// are sealed (message.ID), so only a holder of the ID learns anything.

// principalKey is the context key of the request's principal.
type principalKey struct{}

// principalOf returns the request's principal (set by ServeHTTP).
func principalOf(r *http.Request) *access.Principal {
	if p, ok := r.Context().Value(principalKey{}).(*access.Principal); ok {
		return p
	}
	return access.Anonymous
}

// need is a route's permission check: the action and resource it needs,
// or nil when the route needs only a verified principal.
type need func(h *Handler, r *http.Request, p *access.Principal) (access.Action, string, error)

func onTopic(a access.Action) need {
	return func(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
		return a, pathTopic(r), p.Check(a, pathTopic(r))
	}
}

func onConsumer(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	res := access.ConsumerResource(pathTopic(r), r.PathValue("group"))
	return access.Receive, res, p.Check(access.Receive, res)
}

func adminTopic(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	res := access.TopicResource(pathTopic(r))
	return access.Admin, res, p.Check(access.Admin, res)
}

func adminGroup(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	res := access.GroupResource(pathTopic(r), r.PathValue("group"))
	return access.Admin, res, p.Check(access.Admin, res)
}

func adminSchedule(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	res := access.ScheduleResource(r.PathValue("schedule"))
	return access.Admin, res, p.Check(access.Admin, res)
}

func fixed(a access.Action, res string) need {
	return func(_ *Handler, _ *http.Request, p *access.Principal) (access.Action, string, error) {
		return a, res, p.Check(a, res)
	}
}

// seesTopic lets a principal read a topic's description and groups when
// some rule of its names the topic.
func seesTopic(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	t := pathTopic(r)
	if p.SeesTopic(t) {
		return "", t, nil
	}
	return "", t, errs.New(errs.PermissionDenied, "principal %q may not see topic %s: no rule of its names it", p.Name, t)
}

// byMessage is the manage check of a route by message ID.
func byMessage(h *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	raw := r.PathValue("id")
	res := "message " + raw
	if p.AllowedAll(access.Manage) {
		return access.Manage, res, nil
	}
	id, err := message.ParseID(raw)
	if err != nil {
		return access.Manage, res, err
	}
	info, err := h.eng.Inspect(id)
	if err != nil || !p.Allowed(access.Manage, info.Topic) {
		return access.Manage, res, access.Denied(p, access.Manage, res)
	}
	return access.Manage, info.Topic, nil
}

// permit runs a route's check and audits: every refusal, and, through
// done, every admin and message-management request with its status.
func (h *Handler) permit(r *http.Request, n need) (done func(status int), err error) {
	done = func(int) {}
	if n == nil {
		return done, nil
	}
	p := principalOf(r)
	a, res, err := n(h, r, p)
	if errs.CodeOf(err) == errs.PermissionDenied {
		h.audit.Record(r.Context(), "http", p.Name, a, res, access.ResultDenied, r.Method+" "+r.Pattern)
		return done, err
	}
	if err != nil {
		return done, err
	}
	if access.Audited(a) {
		done = func(status int) {
			result := access.ResultOK
			if status >= 400 {
				result = access.ResultFailed + ": " + http.StatusText(status)
			}
			h.audit.Record(context.WithoutCancel(r.Context()), "http", p.Name, a, res, result, r.Method+" "+r.Pattern)
		}
	}
	return done, nil
}

// authenticate finds the request's principal before routing, so that no
// spelling of a path slips past: /healthz and the console's files are
// open; /metrics is open while the store says so.
func (h *Handler) authenticate(r *http.Request) (*access.Principal, error) {
	var p *access.Principal
	var err error
	switch {
	case r.URL.Path == "/healthz" || isConsolePath(r.URL.Path):
		return access.Anonymous, nil
	case r.URL.Path == "/metrics":
		p, err = h.access.FromMetricsRequest(r)
	default:
		p, err = h.access.FromRequest(r)
	}
	if err != nil {
		if errors.Is(err, access.ErrBadCredentials) {
			h.audit.Record(r.Context(), "http", "", "", r.Method+" "+r.URL.Path, access.ResultDenied, err.Error())
		}
		return nil, errs.New(errs.Unauthenticated, "%v: send the header Authorization: Bearer <name>:<secret> (or the -auth-token)", err)
	}
	return p, nil
}

// statusOf is the status a handler wrote to w (200 when it wrote none).
func statusOf(w http.ResponseWriter) int {
	for {
		switch x := w.(type) {
		case *recorder:
			if x.status == 0 {
				return http.StatusOK
			}
			return x.status
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return http.StatusOK
		}
	}
}

// whoami answers the request's principal and its rules.
func (h *Handler) whoami(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	out := api.Whoami{Principal: p.Name, Allow: []string{}}
	for _, rule := range p.Rules() {
		out.Allow = append(out.Allow, rule.String())
	}
	writeJSON(w, http.StatusOK, out)
}

// visibleGroups keeps the groups of t that p sees (SeesGroup): a consumer
// of one group learns nothing of the others of its topic.
func visibleGroups(t api.Topic, p *access.Principal) api.Topic {
	kept := t.Groups[:0:0]
	for _, g := range t.Groups {
		if p.SeesGroup(t.Name, g.Name) {
			kept = append(kept, g)
		}
	}
	if t.Groups != nil {
		t.Groups = kept
	}
	return t
}
