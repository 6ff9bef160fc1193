package api

// SeekRequest is POST /v1/topics/{topic}/groups/{group}/seek: move the
// group to the time To (Unix ms). In every queue its position becomes the
// first message made visible at or after To: messages made visible before
// it count as done, those at or after it are delivered again, acked or
// not. Leases and backoffs under way end.
type SeekRequest struct {
	// To is required: a seek without a time is refused rather than taken
	// as 0, which would deliver everything again.
	To *Millis `json:"to"`
}

// SeekQueue is what a seek did to one queue of the group: From is the
// first offset the group was not done with before, To its new start.
type SeekQueue struct {
	Queue int    `json:"queue"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// SeekResult answers a seek with the group after it.
type SeekResult struct {
	Group  Group       `json:"group"`
	Queues []SeekQueue `json:"queues"`
}
