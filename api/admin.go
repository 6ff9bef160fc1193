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
