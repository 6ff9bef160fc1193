package engine

// Frontier returns the fire frontier in Unix milliseconds: every message
// due at or before it that was sent before the call is visible. The
// virtual clock's advance waits on it, so that a user's test that advances
// time finds what fell due already in its queue.
func (e *Engine) Frontier() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.disp.frontierLocked()
}
