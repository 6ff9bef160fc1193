package client

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/api"
)

// Schedule describes a recurring schedule (package api's).
type Schedule = api.Schedule

// ScheduleConfig defines a recurring schedule: every time Cron falls due
// in TZ, a message with the key "<Key>@<fire time>", Tag, Properties and
// Body is sent to Topic.
type ScheduleConfig struct {
	Topic string
	// Cron is 5 fields (minute hour day-of-month month day-of-week) or a
	// descriptor (@daily, @every 10m).
	Cron string
	// TZ is an IANA time zone name; empty means UTC.
	TZ string
	// CatchUp is "skip", "once" (the default when empty) or "all": what
	// happens to fire times missed while the broker was down.
	CatchUp string
	// Key prefixes every firing's key; empty means the schedule's ID.
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
}

func (s ScheduleConfig) wire() api.ScheduleConfig {
	out := api.ScheduleConfig{Topic: s.Topic, Cron: s.Cron, TZ: s.TZ, CatchUp: s.CatchUp, Key: s.Key, Tag: s.Tag, Properties: s.Properties}
	if utf8.Valid(s.Body) {
		b := string(s.Body)
		out.Body = &b
	} else {
		b := base64.StdEncoding.EncodeToString(s.Body)
		out.BodyBase64 = &b
	}
	return out
}

// CreateSchedule creates the schedule id. An existing id gives an
// already_exists error; a bad cron expression or time zone invalid_argument.
func (c *Client) CreateSchedule(ctx context.Context, id string, cfg ScheduleConfig) (Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPut, id, "", cfg.wire())
}

// Schedule returns a schedule with its progress and next fire times.
func (c *Client) Schedule(ctx context.Context, id string) (Schedule, error) {
	return c.scheduleCall(ctx, http.MethodGet, id, "", nil)
}

// Schedules lists every schedule, by ID.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	var out api.ScheduleList
	err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, &out)
	return out.Schedules, err
}

// PauseSchedule pauses a schedule: the firing sent ahead is cancelled and
// fire times that pass while paused are skipped.
func (c *Client) PauseSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, id, "pause", nil)
}

// ResumeSchedule resumes a paused schedule from now.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, id, "resume", nil)
}

// DeleteSchedule deletes a schedule; it returns its last state.
func (c *Client) DeleteSchedule(ctx context.Context, id string) (Schedule, error) {
	return c.scheduleCall(ctx, http.MethodDelete, id, "", nil)
}

func (c *Client) scheduleCall(ctx context.Context, method, id, action string, in any) (Schedule, error) {
	var out Schedule
	if err := required("schedule id", id); err != nil {
		return out, err
	}
	p := "/v1" + path("schedules", id)
	if action != "" {
		p += "/" + action
	}
	err := c.do(ctx, method, p, in, &out)
	return out, err
}

// ScheduleFirings is what became of a schedule's latest firings (package
// api's).
type ScheduleFirings = api.ScheduleFirings

// ScheduleFirings returns the firings of schedule id sent ahead of their
// time, then up to n (1 to 50; 0: the broker's default of 10) of its
// latest fire times, newest first, each with its message and state, or
// sent false for one skipped.
func (c *Client) ScheduleFirings(ctx context.Context, id string, n int) (ScheduleFirings, error) {
	if err := required("schedule id", id); err != nil {
		return ScheduleFirings{}, err
	}
	p := "/v1" + path("schedules", id, "firings")
	if n != 0 {
		p += "?n=" + strconv.Itoa(n)
	}
	var out ScheduleFirings
	err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}
