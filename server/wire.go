package server

import (
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
)

// The JSON shapes of API v1 are package api's types; this file turns the
// engine's answers into them.

// receiptOf is r as the API's receipt: the definition that the send
// answers, written by hand from engine.Receipt (dueTexts.appendReceipt),
// follow; TestWriteReceiptsMatchesJSON holds the two together.
func receiptOf(r engine.Receipt) api.Receipt {
	due := api.Millis(r.Due)
	return api.Receipt{ID: r.ID.String(), Topic: r.Topic, Queue: r.Queue, Due: due, DueTime: due.RFC3339(), Duplicate: r.Duplicate}
}

func infoOf(i engine.Info) api.MessageInfo {
	due := api.Millis(i.Due)
	return api.MessageInfo{ID: i.ID.String(), State: api.State(i.State), Topic: i.Topic, Queue: i.Queue, Key: i.Key, Tag: i.Tag,
		Due: due, DueTime: due.RFC3339(), Sent: api.Millis(i.Sent), Visible: api.Millis(i.Visible), BodyBytes: i.BodyBytes,
		Properties: i.Properties, DedupID: i.DedupID, Deadline: api.Millis(i.Deadline), Window: i.Window}
}

func groupOf(g engine.GroupInfo) api.Group {
	return api.Group{Topic: g.Topic, Name: g.Name, MaxAttempts: g.Config.MaxAttempts,
		BackoffBase: g.Config.BackoffBase.String(), BackoffMax: g.Config.BackoffMax.String(),
		Backlog: g.Backlog, InFlight: g.InFlight, Delivered: g.Delivered, Acked: g.Acked,
		Redelivered: g.Redelivered, DeadLettered: g.DeadLettered, DeadLetterTopic: g.DeadLetterTopic, Paused: g.Paused}
}

func topicOf(t engine.TopicStats) api.Topic {
	out := api.Topic{Name: t.Name, Queues: t.Queues, FIFO: t.FIFO, Pending: t.Pending, Visible: t.Visible, Groups: []api.Group{}}
	for _, g := range t.Groups {
		out.Groups = append(out.Groups, groupOf(g))
	}
	return out
}
