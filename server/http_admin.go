package server

import (
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
)

// backup serves POST /v1/admin/backup: an online backup of the data
// directory into a new directory inside Config.BackupDir, on the broker's
// machine (engine.Backup). Like every /v1 route it needs the token when
// one is set.
func (h *Handler) backup(w http.ResponseWriter, r *http.Request) {
	var in api.BackupRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if h.cfg.BackupDir == "" {
		h.writeError(w, errs.New(errs.FailedPrecondition, "backups are disabled: start hourglass serve with --backup-dir DIR, the directory backups may be written in"))
		return
	}
	if !filepath.IsAbs(in.Dir) {
		h.writeError(w, errs.New(errs.InvalidArgument, "dir: %q is not an absolute path", in.Dir))
		return
	}
	root, dir := filepath.Clean(h.cfg.BackupDir), filepath.Clean(in.Dir)
	if !strings.HasPrefix(dir, root+string(filepath.Separator)) {
		h.writeError(w, errs.New(errs.InvalidArgument, "dir: %q is not inside the backup directory %q (--backup-dir)", in.Dir, root))
		return
	}
	// A large backup may take longer than the write timeout meant for
	// ordinary requests; it ends with the request's context instead.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	info, err := h.eng.Backup(r.Context(), dir)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.BackupResult{
		Dir: info.Dir, CheckpointPos: info.CheckpointPos, LogHead: info.LogHead,
		Files: info.Files, Bytes: info.Bytes, LinkedFiles: info.LinkedFiles, LinkedBytes: info.LinkedBytes,
		PauseMs: float64(info.Pause.Microseconds()) / 1000, DurationMs: info.Duration.Milliseconds(),
	})
}
