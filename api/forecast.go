package api

// Forecast answers GET /v1/forecast: how many pending messages fall due in
// each bucket [start, end) from From to To. Counts are kept per second, so
// From is rounded down and To up to whole seconds.
type Forecast struct {
	// Topic is the topic asked for; empty for every topic.
	Topic string `json:"topic"`
	From  Millis `json:"from"`
	To    Millis `json:"to"`
	// StepSeconds is the width of each bucket (the last may be shorter).
	StepSeconds int64 `json:"step_seconds"`
	// Total is the sum of the buckets' counts.
	Total   int64            `json:"total"`
	Buckets []ForecastBucket `json:"buckets"`
}

// ForecastBucket is one bucket of a forecast.
type ForecastBucket struct {
	Start     Millis `json:"start"`
	End       Millis `json:"end"`
	StartTime string `json:"start_time"`
	Count     int64  `json:"count"`
}

// BodyPreview answers GET /v1/messages/{id}/preview: the first bytes of a
// message's body, for an operator's eyes.
type BodyPreview struct {
	ID string `json:"id"`
	// BodyBytes is the length of the whole body.
	BodyBytes int `json:"body_bytes"`
	// Truncated is true when the preview is shorter than the body.
	Truncated bool `json:"truncated"`
	// Text is the preview when it is valid UTF-8, else null.
	Text *string `json:"text"`
	// Base64 is the preview's bytes in standard base64, always set.
	Base64 string `json:"base64"`
}

// MaxPreviewBytes is the most body bytes a preview shows.
const MaxPreviewBytes = 1024
