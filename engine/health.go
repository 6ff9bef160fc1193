package engine

import (
	"fmt"
	"sync"
	"time"
)

// Storage trouble that does not stop the engine, and that no caller sees.
//
// A send, ack or receive whose record cannot be written (a full disk)
// answers its caller with the error. Two writers have no caller: the
// dispatch loop's fire records and the checkpointer. A full disk made both
// fail and retry while /healthz answered ok (issue 29, defect 8): due
// messages were not made visible, and only a log line and a counter said
// so. healthState remembers the first failure of each since the last
// success, so that Degraded can say what is wrong and since when.

// healthState holds the failures Degraded reports, under its own lock
// (taken alone or after mu).
type healthState struct {
	mu        sync.Mutex
	fireErr   error  // the last failure of a fire record append, nil after a success
	fireSince int64  // broker ms of the first failure in a row
	fireFails uint64 // failures in a row
	ckptErr   error
	ckptSince int64
	ckptFails uint64
}

// fireFailed notes a failed fire record append at broker time now.
func (h *healthState) fireFailed(err error, now int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fireErr == nil {
		h.fireSince = now
	}
	h.fireErr = err
	h.fireFails++
}

// fireOK notes a fire record written.
func (h *healthState) fireOK() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fireErr, h.fireFails = nil, 0
}

// checkpointDone notes a checkpoint's outcome at broker time now.
func (h *healthState) checkpointDone(err error, now int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.ckptErr, h.ckptFails = nil, 0
		return
	}
	if h.ckptErr == nil {
		h.ckptSince = now
	}
	h.ckptErr = err
	h.ckptFails++
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// Degraded lists, one sentence each, what is wrong with a running engine
// that has not stopped: fire records or checkpoints that fail (a full
// disk), and damage found in the log (Damage). Empty means nothing is
// known to be wrong. A stopped engine says so through Err instead.
func (e *Engine) Degraded() []string {
	var out []string
	h := &e.side.health
	h.mu.Lock()
	if h.fireErr != nil {
		out = append(out, fmt.Sprintf("due messages are not being made visible: %d fire record write(s) failed in a row since %s, the last with: %v; they are retried, and nothing is lost (free disk space if it is full)",
			h.fireFails, msTime(h.fireSince), h.fireErr))
	}
	if h.ckptErr != nil {
		out = append(out, fmt.Sprintf("checkpoints fail: %d in a row since %s, the last with: %v; nothing is lost, but a restart replays more of the log",
			h.ckptFails, msTime(h.ckptSince), h.ckptErr))
	}
	h.mu.Unlock()
	if s := e.Damage().Summary(); s != "" {
		out = append(out, s)
	}
	return out
}
