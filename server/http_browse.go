package server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// The operator's listings of messages by state and the dead-letter
// actions (issue 30), over engine.Browser and engine.DeadLetters. Every
// query parameter is checked here or by the engine, each with an error
// that names it; none is ignored.

// managesListedTopic is the check of GET /v1/pending: manage on the
// topic its query names, or on every topic when it names none (the list
// then shows messages of every topic).
func managesListedTopic(_ *Handler, r *http.Request, p *access.Principal) (access.Action, string, error) {
	topic := r.URL.Query().Get("topic")
	if topic == "" {
		if p.AllowedAll(access.Manage) {
			return access.Manage, "every topic", nil
		}
		return access.Manage, "every topic", errs.New(errs.PermissionDenied,
			"principal %q may not list the pending messages of every topic: give topic=, one it may manage", p.Name)
	}
	return access.Manage, topic, p.Check(access.Manage, topic)
}

// listParams are the query parameters every listing takes.
var listParams = []string{"key_prefix", "tag", "due_from", "due_to", "limit", "cursor"}

// listPending serves GET /v1/pending: messages not yet visible, by the
// time they fire, topic optional.
func (h *Handler) listPending(w http.ResponseWriter, r *http.Request) {
	h.list(w, r, engine.ListPending)
}

// listInFlight serves GET /v1/topics/{topic}/groups/{group}/inflight.
func (h *Handler) listInFlight(w http.ResponseWriter, r *http.Request) {
	h.list(w, r, engine.ListInFlight)
}

// listDead serves GET /v1/topics/{topic}/groups/{group}/dead.
func (h *Handler) listDead(w http.ResponseWriter, r *http.Request) {
	h.list(w, r, engine.ListDead)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, kind engine.ListKind) {
	req, err := listRequest(r, kind)
	if err != nil {
		h.writeError(w, err)
		return
	}
	b := engine.NewBrowser(h.eng)
	var page engine.ListPage
	switch kind {
	case engine.ListPending:
		page, err = b.Pending(req)
	case engine.ListInFlight:
		page, err = b.InFlight(req)
	default:
		page, err = b.Dead(req)
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(page))
}

// listRequest reads a listing's query parameters.
func listRequest(r *http.Request, kind engine.ListKind) (engine.ListRequest, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil { // r.URL.Query() would drop the bad part and answer for the rest
		return engine.ListRequest{}, errs.New(errs.InvalidArgument, "query %q is malformed: %v", r.URL.RawQuery, err)
	}
	allowed := listParams
	if kind == engine.ListPending {
		allowed = append([]string{"topic"}, listParams...)
	}
	if err := onlyParams(q, allowed...); err != nil {
		return engine.ListRequest{}, err
	}
	req := engine.ListRequest{Topic: q.Get("topic"), KeyPrefix: q.Get("key_prefix"), Tag: q.Get("tag"), Cursor: q.Get("cursor")}
	if kind != engine.ListPending {
		req.Topic, req.Group = pathTopic(r), r.PathValue("group")
	}
	for _, p := range []struct {
		name string
		v    *int64
	}{{"due_from", &req.DueFrom}, {"due_to", &req.DueTo}} {
		if *p.v, err = millisParam(q, p.name, 0); err != nil {
			return req, err
		}
		if *p.v > int64(api.MaxMillis) {
			return req, errs.New(errs.InvalidArgument, "%s %d is beyond the end of the year 9999 (%d)", p.name, *p.v, int64(api.MaxMillis))
		}
	}
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > api.MaxListLimit {
			return req, errs.New(errs.InvalidArgument, "limit %q is not a whole number in [1, %d]", s[0], api.MaxListLimit)
		}
		req.Limit = n
	}
	return req, nil
}

// pageOf is a page on the wire.
func pageOf(p engine.ListPage) api.MessagePage {
	out := api.MessagePage{Items: make([]api.ListedMessage, len(p.Items)), Scanned: p.Scanned, Read: p.Read}
	if p.Next != "" {
		out.NextCursor = &p.Next
	}
	for i, l := range p.Items {
		due := api.Millis(l.Due)
		out.Items[i] = api.ListedMessage{ID: l.ID.String(), State: api.State(l.State), Topic: l.Topic, Queue: l.Queue,
			Key: l.Key, Tag: l.Tag, Due: due, DueTime: due.RFC3339(), Sent: api.Millis(l.Sent), BodyBytes: l.BodyBytes,
			Properties: l.Properties, FireAt: api.Millis(l.FireAt), Group: l.Group, Attempt: l.Attempt,
			LeaseEnd: api.Millis(l.LeaseEnd), Reason: l.Reason, Attempts: l.Attempts, OriginTopic: l.OriginTopic, OriginID: l.OriginID}
	}
	return out
}

// deadResend serves POST .../dead/resend: the selected dead letters go
// back to their group, and to it only.
func (h *Handler) deadResend(w http.ResponseWriter, r *http.Request) {
	h.deadSelected(w, r, "resend", engine.NewDeadLetters(h.eng).Resend)
}

// deadDelete serves POST .../dead/delete: the selected dead letters are
// removed.
func (h *Handler) deadDelete(w http.ResponseWriter, r *http.Request) {
	h.deadSelected(w, r, "delete", engine.NewDeadLetters(h.eng).Delete)
}

// deadSelected reads a selection of dead-letter IDs and applies act.
func (h *Handler) deadSelected(w http.ResponseWriter, r *http.Request, action string,
	act func(ctx context.Context, topic, group string, ids []message.ID) (int, error)) {
	var in api.DeadSelection
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if len(in.IDs) > api.MaxDeadSelection {
		h.writeError(w, errs.New(errs.TooLarge, "ids: %d dead letters selected; the limit is %d", len(in.IDs), api.MaxDeadSelection))
		return
	}
	ids := make([]message.ID, len(in.IDs))
	for i, s := range in.IDs {
		id, err := message.ParseID(s)
		if err != nil {
			h.writeError(w, errs.Wrap(errs.InvalidArgument, err, "ids[%d]", i))
			return
		}
		ids[i] = id
	}
	n, err := act(r.Context(), pathTopic(r), r.PathValue("group"), ids)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DeadLetterResult{Action: action, Count: n})
}

// deadPurge serves POST .../dead/purge: every dead letter of the group
// is removed. The body is empty or {}.
func (h *Handler) deadPurge(w http.ResponseWriter, r *http.Request) {
	var in api.Empty
	if err := h.decode(w, r, &in, true); err != nil {
		h.writeError(w, err)
		return
	}
	n, err := engine.NewDeadLetters(h.eng).Purge(r.Context(), pathTopic(r), r.PathValue("group"))
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DeadLetterResult{Action: "purge", Count: n})
}
