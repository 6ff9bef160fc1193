package api

// BackupRequest is POST /v1/admin/backup: where on the broker's machine
// to write the backup.
type BackupRequest struct {
	// Dir is an absolute path inside the broker's --backup-dir that does
	// not exist yet (or is an empty directory) and whose parent exists.
	Dir string `json:"dir"`
}

// BackupResult is what POST /v1/admin/backup wrote (engine.BackupInfo).
type BackupResult struct {
	Dir string `json:"dir"`
	// CheckpointPos is the backup checkpoint's log position: every message
	// acknowledged before the request lies below it. LogHead is the end of
	// the log copied.
	CheckpointPos uint64 `json:"checkpoint_pos"`
	LogHead       uint64 `json:"log_head"`
	// Files and Bytes were copied; LinkedFiles and LinkedBytes (sealed log
	// segments) hard-linked, taking no new disk space.
	Files       int   `json:"files"`
	Bytes       int64 `json:"bytes"`
	LinkedFiles int   `json:"linked_files"`
	LinkedBytes int64 `json:"linked_bytes"`
	// PauseMs is how long sends waited (the checkpoint's capture);
	// DurationMs the whole backup.
	PauseMs    float64 `json:"pause_ms"`
	DurationMs int64   `json:"duration_ms"`
}

// Damage is GET /v1/admin/damage: what the broker knows of damage in its
// commit log (engine.DamageReport) and its scrub's state.
type Damage struct {
	// Ranges are the damaged byte ranges the scrub found in sealed log
	// segments, oldest first.
	Ranges []DamagedRange `json:"ranges"`
	// SetAside lists the latest messages (at most 1,000) consumer groups
	// passed over because their records were damaged; SetAsideTotal
	// counts them all, since the start or replayed from the log.
	SetAside      []SetAside `json:"set_aside"`
	SetAsideTotal int        `json:"set_aside_total"`
	Scrub         Scrub      `json:"scrub"`
}

// DamagedRange is one damaged byte range of a log segment.
type DamagedRange struct {
	// Segment is the file under the data directory ("log/<base>.log");
	// Pos the log position of the range's first byte and Offset its
	// offset in the file; Length its bytes.
	Segment string `json:"segment"`
	Pos     uint64 `json:"pos"`
	Offset  int64  `json:"offset"`
	Length  int64  `json:"length"`
	// Reason says what failed validation.
	Reason string `json:"reason"`
	// RecordsAfter counts the valid records after it in its segment, up
	// to the next damaged range.
	RecordsAfter int `json:"records_after"`
}

// SetAside is a message a group passed over because its record was
// damaged: the receive that met it answered data_loss.
type SetAside struct {
	// Pos is the message's log position (its identity); Segment the file
	// under the data directory, absent once retention removed it.
	Pos     uint64 `json:"pos"`
	Segment string `json:"segment,omitempty"`
	Topic   string `json:"topic"`
	Group   string `json:"group"`
	Queue   int    `json:"queue"`
	Offset  uint64 `json:"offset"`
	// Reason is what failed validation; absent for one replayed from the
	// log at a restart.
	Reason string `json:"reason,omitempty"`
}

// Scrub is the background scrub's state.
type Scrub struct {
	// Enabled is false when the server runs with a negative -scrub-rate.
	Enabled bool `json:"enabled"`
	// RateBytes is the bound on its reads, bytes per second.
	RateBytes int64 `json:"rate_bytes_per_second"`
	// Passes counts complete passes since the start; Bytes what they read.
	Passes uint64 `json:"passes"`
	Bytes  uint64 `json:"bytes"`
	// LastPassTime is when the last complete pass ended (RFC 3339); absent
	// before the first.
	LastPassTime string `json:"last_pass_time,omitempty"`
	// LastError is the last read error of a pass, absent if none.
	LastError string `json:"last_error,omitempty"`
}
