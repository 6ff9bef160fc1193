package api

// Kafka mode (hourglass kafka --listen) serves a subset of this API over
// the delay topic of a Kafka cluster; these are the types it adds. Its
// message IDs are "k:<partition>:<offset>", the delay record's position.
// Its sends, inspects, forecasts, reschedules and cancels by ID use the
// types above; what differs is written here.

// The states a Kafka-mode inspect reports beyond States: a record whose
// control headers are bad is dead-lettered, and a resolved record whose
// forward the search of the business topic could not settle either way
// is "resolved" (forwarded or cancelled).
const (
	StateDeadLettered State = "dead_lettered"
	StateResolved     State = "resolved"
)

// KafkaStates lists every state a Kafka-mode inspect reports: pending,
// due, visible (forwarded), cancelled, dead_lettered, resolved.
func KafkaStates() []State {
	return append(States(), StateDeadLettered, StateResolved)
}

// StateCancelRequested is the state a Kafka-mode cancel answers with
// (202) when the worker did not apply it within the answer's wait: the
// cancel record is in the delay topic (durably, acks=all), and the worker
// that owns the partition applies it unless it forwarded the message
// first. Inspect tells which.
const StateCancelRequested State = "cancel_requested"

// KafkaCancel answers a Kafka-mode cancel, by ID (DELETE
// /v1/messages/{id}) or by key (DELETE /v1/keys/{key}): 200 with State
// cancelled once the worker applied it, 202 with StateCancelRequested
// when it did not within the wait.
type KafkaCancel struct {
	// ID is the message cancelled by ID; Key the key cancelled by key.
	ID  string `json:"id,omitempty"`
	Key string `json:"key,omitempty"`
	// Control is the ID of the cancel record written.
	Control string `json:"control"`
	State   State  `json:"state"`
	// Matched, for a cancel by key, is how many messages with the key
	// were pending when the cancel was written (at least 1: with none the
	// answer is 404 and no cancel record is written).
	Matched int `json:"matched,omitempty"`
}

// KafkaForecast answers GET /v1/forecast in Kafka mode: Forecast over the
// worker's own index, which holds the delay partitions the worker owns
// (Partitions). With several workers each answers for its own; the sum of
// all workers' answers is the delay topic's forecast.
type KafkaForecast struct {
	Forecast
	Partitions []int32 `json:"partitions"`
	// Pending is every pending message of the worker's index, whatever
	// its due time.
	Pending int64 `json:"pending"`
}

// KafkaMessageInfo answers a Kafka-mode inspect: MessageInfo (State one
// of KafkaStates; Topic the business topic; Queue the delay partition;
// Sent the record's timestamp; Visible when its forward was produced;
// Properties its headers but the control headers) plus what only Kafka
// mode knows.
type KafkaMessageInfo struct {
	MessageInfo
	// Reason is why a dead-lettered message was refused (its control
	// headers), as the dead-letter record's hourglass-dlq-reason says.
	Reason string `json:"reason,omitempty"`
	// CommittedOffset is the group's committed offset of the message's
	// delay partition (-1: none yet): every offset below it is resolved.
	CommittedOffset int64 `json:"committed_offset"`
	// CopyID is set when the message was copied forward within its delay
	// partition (before the topic's retention would delete it): the ID of
	// the copy that holds it now. ID stays the one asked for; State, Due
	// and the rest describe the copy.
	CopyID string `json:"copy_id,omitempty"`
}
