package client

import (
	"context"
	"net/http"
)

// CreateTopic creates a topic. An existing topic gives an already_exists
// error (IsAlreadyExists). Topics are also created on first send unless
// the broker runs with -auto-create-topics=false.
func (c *Client) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (TopicInfo, error) {
	if err := required("topic", name); err != nil {
		return TopicInfo{}, err
	}
	var t TopicInfo
	err := c.do(ctx, http.MethodPut, "/v1"+path("topics", name), cfg, &t)
	return t, err
}

// Topics lists the topics.
func (c *Client) Topics(ctx context.Context) ([]TopicInfo, error) {
	var out struct {
		Topics []TopicInfo `json:"topics"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/topics", nil, &out)
	return out.Topics, err
}

// DescribeTopic returns a topic with its counts and its consumer groups.
func (c *Client) DescribeTopic(ctx context.Context, name string) (TopicInfo, error) {
	if err := required("topic", name); err != nil {
		return TopicInfo{}, err
	}
	var t TopicInfo
	err := c.do(ctx, http.MethodGet, "/v1"+path("topics", name), nil, &t)
	return t, err
}

// CreateGroup creates a consumer group of topic. An existing group gives an
// already_exists error. Receive also creates an unknown group, with the
// default configuration.
func (c *Client) CreateGroup(ctx context.Context, topic, group string, cfg GroupConfig) (GroupInfo, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return GroupInfo{}, err
	}
	var g GroupInfo
	err := c.do(ctx, http.MethodPut, "/v1"+path("topics", topic, "groups", group), cfg.wire(), &g)
	return g, err
}

// Groups lists the consumer groups of topic.
func (c *Client) Groups(ctx context.Context, topic string) ([]GroupInfo, error) {
	if err := required("topic", topic); err != nil {
		return nil, err
	}
	var out struct {
		Groups []GroupInfo `json:"groups"`
	}
	err := c.do(ctx, http.MethodGet, "/v1"+path("topics", topic, "groups"), nil, &out)
	return out.Groups, err
}
