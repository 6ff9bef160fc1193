package client

import (
	"context"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// SetGroupPolicy changes a group's retry policy: the non-zero fields of
// cfg change, the others stay. The new policy rules every failure from
// now on.
func (c *Client) SetGroupPolicy(ctx context.Context, topic, group string, cfg GroupConfig) (GroupInfo, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return GroupInfo{}, err
	}
	var g GroupInfo
	err := c.do(ctx, http.MethodPatch, "/v1"+path("topics", topic, "groups", group), cfg.wire(), &g)
	return g, err
}

// PauseGroup pauses (paused true) or resumes a group's consumption,
// durably: a paused group's receives hand out nothing.
func (c *Client) PauseGroup(ctx context.Context, topic, group string, paused bool) (GroupInfo, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return GroupInfo{}, err
	}
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var g GroupInfo
	err := c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, verb), nil, &g)
	return g, err
}

// SeekResult is what a seek did: the group after it, and each queue's
// first offset not done before (From) and its new start (To).
type SeekResult struct {
	Group  GroupInfo
	Queues []api.SeekQueue
}

// SeekGroup moves a group to the time to: in every queue its position
// becomes the first message made visible at or after to; earlier ones
// count as done, later ones are delivered again, acked or not.
func (c *Client) SeekGroup(ctx context.Context, topic, group string, to time.Time) (SeekResult, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return SeekResult{}, err
	}
	ms := api.MillisOf(to)
	var out struct {
		Group  GroupInfo       `json:"group"`
		Queues []api.SeekQueue `json:"queues"`
	}
	err := c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "seek"), api.SeekRequest{To: &ms}, &out)
	return SeekResult{Group: out.Group, Queues: out.Queues}, err
}
