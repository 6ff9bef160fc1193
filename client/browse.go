package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hourglass-mq/hourglass/api"
)

// ListRequest asks for one page of a listing of messages by state. Topic
// is optional for pending messages; in flight and dead letters need Topic
// and Group. DueFrom and DueTo (Unix ms, 0 for no bound) bound the due
// times; Limit 0 is the broker's default (50, at most 500); Cursor is the
// NextCursor of the page before ("" for the first).
type ListRequest struct {
	Topic, Group   string
	KeyPrefix, Tag string
	DueFrom, DueTo int64
	Limit          int
	Cursor         string
}

// MessagePage is one page of a listing; its NextCursor is nil at the end.
type MessagePage = api.MessagePage

// ListedMessage is one message of a listing.
type ListedMessage = api.ListedMessage

// ListPending returns a page of the messages not yet visible, by the
// time each fires.
func (c *Client) ListPending(ctx context.Context, r ListRequest) (MessagePage, error) {
	q := r.query()
	if r.Topic != "" {
		q.Set("topic", r.Topic)
	}
	return c.list(ctx, "/v1/pending", q)
}

// ListInFlight returns a page of the messages group has under a lease,
// with each delivery's attempt and lease end.
func (c *Client) ListInFlight(ctx context.Context, r ListRequest) (MessagePage, error) {
	if err := required("topic", r.Topic, "group", r.Group); err != nil {
		return MessagePage{}, err
	}
	return c.list(ctx, "/v1"+path("topics", r.Topic, "groups", r.Group, "inflight"), r.query())
}

// ListDead returns a page of group's dead letters, with reason and
// attempts.
func (c *Client) ListDead(ctx context.Context, r ListRequest) (MessagePage, error) {
	if err := required("topic", r.Topic, "group", r.Group); err != nil {
		return MessagePage{}, err
	}
	return c.list(ctx, "/v1"+path("topics", r.Topic, "groups", r.Group, "dead"), r.query())
}

// query is the request's filters and paging as query parameters.
func (r ListRequest) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"key_prefix": r.KeyPrefix, "tag": r.Tag, "cursor": r.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]int64{"due_from": r.DueFrom, "due_to": r.DueTo, "limit": int64(r.Limit)} {
		if v != 0 {
			q.Set(k, strconv.FormatInt(v, 10))
		}
	}
	return q
}

func (c *Client) list(ctx context.Context, p string, q url.Values) (MessagePage, error) {
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out MessagePage
	err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}

// ResendDead sends the dead letters ids (as listed) of group back to it,
// and to it only, and returns how many moved.
func (c *Client) ResendDead(ctx context.Context, topic, group string, ids []string) (int, error) {
	return c.deadAction(ctx, topic, group, "resend", &api.DeadSelection{IDs: ids})
}

// DeleteDead removes the dead letters ids of group for good.
func (c *Client) DeleteDead(ctx context.Context, topic, group string, ids []string) (int, error) {
	return c.deadAction(ctx, topic, group, "delete", &api.DeadSelection{IDs: ids})
}

// PurgeDead removes every dead letter of group and returns how many.
func (c *Client) PurgeDead(ctx context.Context, topic, group string) (int, error) {
	return c.deadAction(ctx, topic, group, "purge", nil)
}

func (c *Client) deadAction(ctx context.Context, topic, group, action string, in *api.DeadSelection) (int, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return 0, err
	}
	var out api.DeadLetterResult
	var body any
	if in != nil {
		body = in
	}
	err := c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "dead", action), body, &out)
	return out.Count, err
}
