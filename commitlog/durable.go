package commitlog

// What AppendUnsynced and WaitDurable add to the writer: answers between a
// chunk's write and its fdatasync, and the durable position that lets a
// caller wait for an fdatasync already under way instead of asking for one.

// answerUnsynced publishes the written chunk and answers its
// AppendUnsynced requests, if it has any, and returns the others (in
// w.rest, reused). The answered requests are not touched again.
func (w *writer) answerUnsynced(chunk []*request) []*request {
	w.rest = w.rest[:0]
	for _, r := range chunk {
		if !r.unsynced {
			w.rest = append(w.rest, r)
		}
	}
	if len(w.rest) == len(chunk) {
		return chunk
	}
	w.publish()
	for _, r := range chunk {
		if r.unsynced {
			r.err = nil
			r.done <- struct{}{}
		}
	}
	return w.rest
}

// publish makes the records written so far readable: the active segment's
// size and the log's head.
func (w *writer) publish() {
	l := w.log
	l.mu.Lock()
	w.active.size = w.written
	l.mu.head = w.active.end()
	l.mu.Unlock()
}

// wakeDurable wakes every WaitDurable to look again.
func (l *Log) wakeDurable() {
	l.mu.Lock()
	close(l.mu.durableCh)
	l.mu.durableCh = make(chan struct{})
	l.mu.Unlock()
}

// WaitDurable returns once every record published when it was called (up
// to Head then, AppendUnsynced's records included) is durable. Under
// FlushSync that is the fdatasync already under way for them, if it has
// not ended yet: no sync of its own, unlike Sync. Under FlushAsync, which
// acknowledges before any fdatasync and so promises nothing across a power
// loss, it waits for nothing and reports only a failure (a sync of each
// caller's would defeat the policy). It returns the log's failure if it
// fails first, ErrClosed if it closes first.
func (l *Log) WaitDurable() error {
	if l.opts.Flush != FlushSync {
		return l.failure()
	}
	l.mu.Lock()
	target := l.mu.head
	for l.mu.durable < target {
		ch := l.mu.durableCh
		l.mu.Unlock()
		select {
		case <-ch:
		case <-l.done:
			return ErrClosed
		}
		if err := l.failure(); err != nil {
			return err
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	return l.failure()
}
