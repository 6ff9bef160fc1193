package server

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/engine"
)

// The JSON shapes of API v1. Field names are part of the public API; the
// OpenAPI document (docs/openapi.yaml) describes each.

// deliveryJSON is "when": at most one field set; none means now.
type deliveryJSON struct {
	Delay string `json:"delay,omitempty"` // Go duration
	At    int64  `json:"at,omitempty"`    // Unix ms
	Level int    `json:"level,omitempty"` // 1-based
}

// sendJSON is one message to send, with its delivery options inline.
type sendJSON struct {
	Key        string            `json:"key"`
	Tag        string            `json:"tag"`
	Group      string            `json:"group"`
	Properties map[string]string `json:"properties"`
	Body       *string           `json:"body"`
	BodyBase64 *string           `json:"body_base64"`
	deliveryJSON
}

type batchJSON struct {
	Messages []sendJSON `json:"messages"`
}

type receiptJSON struct {
	ID      string `json:"id"`
	Topic   string `json:"topic"`
	Queue   int    `json:"queue"`
	Due     int64  `json:"due"`
	DueTime string `json:"due_time"`
}

type batchReceiptsJSON struct {
	Receipts []receiptJSON `json:"receipts"`
}

type infoJSON struct {
	ID         string            `json:"id"`
	State      string            `json:"state"`
	Topic      string            `json:"topic"`
	Queue      int               `json:"queue"`
	Key        string            `json:"key"`
	Tag        string            `json:"tag"`
	Due        int64             `json:"due"`
	DueTime    string            `json:"due_time"`
	Sent       int64             `json:"sent"`
	Visible    int64             `json:"visible"`
	BodyBytes  int               `json:"body_bytes"`
	Properties map[string]string `json:"properties,omitempty"`
}

type cancelledJSON struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

type rescheduleJSON struct {
	deliveryJSON
	IfDue int64 `json:"if_due,omitempty"`
}

type rescheduledJSON struct {
	ID      string `json:"id"`
	Due     int64  `json:"due"`
	DueTime string `json:"due_time"`
}

type topicConfigJSON struct {
	Queues int  `json:"queues"`
	FIFO   bool `json:"fifo"`
}

type topicJSON struct {
	Name    string      `json:"name"`
	Queues  int         `json:"queues"`
	FIFO    bool        `json:"fifo"`
	Pending int64       `json:"pending"`
	Visible uint64      `json:"visible"`
	Groups  []groupJSON `json:"groups"`
}

type topicsJSON struct {
	Topics []topicJSON `json:"topics"`
}

type groupConfigJSON struct {
	MaxAttempts int    `json:"max_attempts"`
	BackoffBase string `json:"backoff_base"`
	BackoffMax  string `json:"backoff_max"`
}

type groupJSON struct {
	Topic           string `json:"topic"`
	Name            string `json:"name"`
	MaxAttempts     int    `json:"max_attempts"`
	BackoffBase     string `json:"backoff_base"`
	BackoffMax      string `json:"backoff_max"`
	Backlog         int64  `json:"backlog"`
	InFlight        int64  `json:"in_flight"`
	Delivered       uint64 `json:"delivered"`
	Acked           uint64 `json:"acked"`
	Redelivered     uint64 `json:"redelivered"`
	DeadLettered    uint64 `json:"dead_lettered"`
	DeadLetterTopic string `json:"dead_letter_topic"`
}

type groupsJSON struct {
	Groups []groupJSON `json:"groups"`
}

type receiveJSON struct {
	Max       int    `json:"max"`
	Invisible string `json:"invisible"`
	Wait      string `json:"wait"`
}

type receivedJSON struct {
	ID         string            `json:"id"`
	Receipt    string            `json:"receipt"`
	Attempt    int               `json:"attempt"`
	Queue      int               `json:"queue"`
	Offset     uint64            `json:"offset"`
	Key        string            `json:"key"`
	Tag        string            `json:"tag"`
	Group      string            `json:"group"`
	Properties map[string]string `json:"properties,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64"`
	Due        int64             `json:"due"`
	Visible    int64             `json:"visible"`
}

type messagesJSON struct {
	Messages []receivedJSON `json:"messages"`
}

type ackJSON struct {
	Receipts []string `json:"receipts"`
}

type ackedJSON struct {
	Acked int `json:"acked"`
}

type nackJSON struct {
	Receipt string `json:"receipt"`
	Delay   string `json:"delay"`
}

type invisibilityJSON struct {
	Receipt   string `json:"receipt"`
	Invisible string `json:"invisible"`
}

type redriveJSON struct {
	Max int `json:"max"`
}

type redrivenJSON struct {
	Redriven int `json:"redriven"`
}

// statsJSON is GET /v1/stats. Lateness quantiles are the upper bound of
// the histogram bucket that holds them, in ms; null when the quantile is
// above the largest bucket or nothing was observed yet.
type statsJSON struct {
	Pending         int64    `json:"pending"`
	Sent            uint64   `json:"sent"`
	Fired           uint64   `json:"fired"`
	Cancelled       uint64   `json:"cancelled"`
	Rescheduled     uint64   `json:"rescheduled"`
	LatenessCount   uint64   `json:"lateness_count"`
	LatenessP50Ms   *float64 `json:"lateness_p50_ms"`
	LatenessP99Ms   *float64 `json:"lateness_p99_ms"`
	RecoverySeconds float64  `json:"recovery_seconds"`
	ClockJumps      uint64   `json:"clock_jumps"`
}

type errorJSON struct {
	Error errorBodyJSON `json:"error"`
}

type errorBodyJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// msTime renders Unix ms as RFC 3339 in UTC with milliseconds.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func receiptOf(r engine.Receipt) receiptJSON {
	return receiptJSON{ID: r.ID.String(), Topic: r.Topic, Queue: r.Queue, Due: r.Due, DueTime: msTime(r.Due)}
}

func infoOf(i engine.Info) infoJSON {
	return infoJSON{ID: i.ID.String(), State: string(i.State), Topic: i.Topic, Queue: i.Queue, Key: i.Key, Tag: i.Tag,
		Due: i.Due, DueTime: msTime(i.Due), Sent: i.Sent, Visible: i.Visible, BodyBytes: i.BodyBytes, Properties: i.Properties}
}

func groupOf(g engine.GroupInfo) groupJSON {
	return groupJSON{Topic: g.Topic, Name: g.Name, MaxAttempts: g.Config.MaxAttempts,
		BackoffBase: g.Config.BackoffBase.String(), BackoffMax: g.Config.BackoffMax.String(),
		Backlog: g.Backlog, InFlight: g.InFlight, Delivered: g.Delivered, Acked: g.Acked,
		Redelivered: g.Redelivered, DeadLettered: g.DeadLettered, DeadLetterTopic: g.DeadLetterTopic}
}

func topicOf(t engine.TopicStats) topicJSON {
	out := topicJSON{Name: t.Name, Queues: t.Queues, FIFO: t.FIFO, Pending: t.Pending, Visible: t.Visible, Groups: []groupJSON{}}
	for _, g := range t.Groups {
		out.Groups = append(out.Groups, groupOf(g))
	}
	return out
}

func receivedOf(r engine.Received) receivedJSON {
	m := r.Message
	out := receivedJSON{ID: r.ID.String(), Receipt: r.Receipt, Attempt: r.Attempt, Queue: r.Queue, Offset: r.Offset,
		Key: m.Key, Tag: m.Tag, Group: m.Group, Properties: m.Properties,
		BodyBase64: base64.StdEncoding.EncodeToString(m.Body), Due: r.Due, Visible: r.Visible.Visible}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		out.Body = &s
	}
	return out
}
