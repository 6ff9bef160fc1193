// Package rocketmq serves the RocketMQ 5 gRPC protocol
// (apache.rocketmq.v2.MessagingService) over the engine, so that the
// official RocketMQ 5 clients work against hourglass with nothing changed
// but the endpoint. It is a thin adapter: every message, timer, lease and
// receipt is the engine's; this package only translates.
//
// The protocol types and the service interface are the generated ones of
// the official Go client module (its protocol/v2 package), so the wire
// format is exactly what the clients speak.
//
// # Mapping
//
//	RocketMQ                         hourglass
//	topic, message queue             topic (queues are advertised; the engine picks the queue)
//	consumer group                   consumer group of the topic (created on first receive)
//	client message ID                key and dedup ID of the message (a resend with the same ID is not stored twice)
//	keys, born time/host, encoding   properties named rocketmq.* (refused from users)
//	delivery_timestamp               When.At (absolute, ms)
//	message_group (FIFO)             Message.Group in a FIFO topic
//	recall handle                    the message's sealed hourglass ID
//	receipt handle                   the engine's sealed receipt
//	delivery_attempt                 Received.Attempt
//
// # Invariants
//
//   - Every call answers: each RPC not implemented answers a status of the
//     UNSUPPORTED class (or gRPC's Unimplemented) at once; long polls are
//     bounded by the request's long-polling timeout, the engine's
//     MaxReceiveWait and the call's deadline; Close ends telemetry streams
//     and long polls.
//   - A recall cancels only the message its handle names: the handle is a
//     sealed ID (forged or stale ones name nothing) and its topic must be
//     the request's topic.
//   - Receipts are the engine's, which are sealed with a per-process key:
//     after a broker restart an old receipt fails cleanly with
//     INVALID_RECEIPT_HANDLE, and the message comes back when its lease
//     would have ended (leases are not durable).
package rocketmq
