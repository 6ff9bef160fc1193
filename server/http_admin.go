package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
)

// backup serves POST /v1/admin/backup: an online backup of the data
// directory into a new directory inside Options.BackupDir, on the broker's
// machine (engine.Backup). Like every /v1 route it needs the token when
// one is set.
func (h *Handler) backup(w http.ResponseWriter, r *http.Request) {
	var in api.BackupRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if h.opts.BackupDir == "" {
		h.writeError(w, errs.New(errs.FailedPrecondition, "backups are disabled: start hourglass serve with --backup-dir DIR, the directory backups may be written in"))
		return
	}
	if !filepath.IsAbs(in.Dir) {
		h.writeError(w, errs.New(errs.InvalidArgument, "dir: %q is not an absolute path", in.Dir))
		return
	}
	root, dir := filepath.Clean(h.opts.BackupDir), filepath.Clean(in.Dir)
	if !strings.HasPrefix(dir, root+string(filepath.Separator)) || !insideResolved(root, dir) {
		h.writeError(w, errs.New(errs.InvalidArgument, "dir: %q is not inside the backup directory %q (--backup-dir)", in.Dir, root))
		return
	}
	// A large backup may take longer than the write timeout meant for
	// ordinary requests; it ends with the request's context instead.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	// The server's files are read before the engine fixes the end of the
	// log it copies: a firing the schedules' journal records as sent is
	// then in that log, and one sent after is past the journal's progress,
	// where a restore's runner looks for it. They go into the copy before
	// its rename, so no crash leaves a backup without them.
	state, err := readStateFiles(h.opts.DataDir, h.opts.StateFiles)
	if err != nil {
		h.writeError(w, err)
		return
	}
	info, err := h.eng.BackupWith(r.Context(), dir, state)
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

// insideResolved reports whether dir, with the symbolic links of its
// parent resolved, still lies inside root (resolved too): a link placed in
// the backup directory must not lead a backup elsewhere. A parent that
// does not exist resolves to nothing and is left to the engine's refusal.
func insideResolved(root, dir string) bool {
	rr, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
	if err != nil {
		return os.IsNotExist(err)
	}
	if _, err := os.Lstat(dir); err == nil {
		if target, err := filepath.EvalSymlinks(dir); err == nil && target != filepath.Join(parent, filepath.Base(dir)) {
			return false // dir itself is a link
		}
	}
	return parent == rr || strings.HasPrefix(parent, rr+string(filepath.Separator))
}

// readStateFiles reads the files of names (relative to dataDir) that
// exist, for the backup to carry. A schedule change racing the read may
// leave a torn last journal record, which the journal's reader cuts.
func readStateFiles(dataDir string, names []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, rel := range names {
		b, err := os.ReadFile(filepath.Join(dataDir, rel))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("backup: %s: %w", rel, err)
		}
		out[rel] = b
	}
	return out, nil
}
