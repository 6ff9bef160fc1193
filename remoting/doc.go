// Package remoting serves RocketMQ's classic remoting protocol, the one of
// the RocketMQ 4.x clients (and the 5.x clients' remoting API), over the
// engine's public API, so that those clients work against hourglass with
// nothing changed but the name server address. One listener is both name
// server and broker: every route names the address the client reached.
//
// # Mapping
//
//	RocketMQ                          hourglass
//	topic, message queue              topic, engine queue (the producer's pick is kept, see queueGroup)
//	queue offset                      engine queue offset (ReadQueue): a message has one once visible
//	delay level, timer properties     When.Delay (+1 ms: the broker clock counts whole ms) or When.At
//	UNIQ_KEY (the message ID)         dedup ID; the key when the message has no KEYS
//	first of KEYS                     the message's key (inspect, cancel, reschedule by topic and key)
//	TAGS                              Message.Tag
//	flag, born time and host,         properties named rocketmq.* (reserved)
//	reconsume count
//	consumer offsets                  offsets.go: a checksummed file, replaced atomically
//	%RETRY%<group>                    a topic of one queue, consumed by that group only
//	%DLQ%<group>                      a topic of the reserved dead-letter namespace (engine.SendDeadLetters)
//	half and op topics                RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
//	commit log offset of a pulled     its queue << 48 | queue offset (send-back names it so)
//	message
//	offset message ID of a send       store address, port, handle of the log position (handle.go)
//
// # Invariants
//
//   - Every request is answered (but one-way ones), never with a panic: a
//     request code not served gets REQUEST_CODE_NOT_SUPPORTED and one log
//     line per code; a malformed frame closes its connection with a log
//     line; a request's bad field gets an error naming it.
//   - Memory per connection is bounded: one frame being read (at most
//     MaxFrame) and frames in hand of at most twice that; a frame must
//     arrive within ReadTimeout once begun.
//   - A send is durable before its answer; an UPDATE_CONSUMER_OFFSET before
//     it is handled (one-way too); offsets carried by pulls within a second.
//   - Nothing is delivered before its due time: relative delays are counted
//     from the broker's millisecond clock plus one millisecond.
//   - A client names only messages it was given: a send-back names a
//     message by queue, offset and message ID together; a view by offset
//     message ID by a handle the broker sealed (a bare commit-log position
//     names nothing).
package remoting
