package engine

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/timerstore"
)

// Browsing: an operator's listing of messages by state (issue 30), with
// paging and filters. Three listings, each in an order that an index
// already keeps, so that a page costs reads proportional to the page and
// never to the number of messages:
//
//   - pending, by the time each fires (its due time; for a message with a
//     tolerance window, the time in the window the broker chose), from the
//     timer index (timerstore.ScanPlan): a page reads a few 4 KiB blocks of
//     each run holding timers past the cursor, then the message records
//     the page shows;
//   - in flight, per group, by queue and offset, from the group's slots in
//     memory (at most MaxUnackedSpan offsets a queue);
//   - dead letters, per group, by queue and offset of the group's
//     dead-letter topic, those its redrive reader has not finished with.
//
// Filters the index cannot answer (key prefix, tag) are applied to the
// records read. So that a filter that matches little cannot make a page
// read without end, a page examines at most listScanBudget index entries
// and reads at most listReadBudget records: a page may then come back
// short, or empty, with a cursor to go on from. The cursor is opaque to
// clients (base64 of the listing's kind and its place in the order); a
// cursor of another listing, or one that does not decode, is refused.

// Limits of a listing page.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
	// listScanBudget bounds the index entries a page examines, and
	// listReadBudget the message records it reads.
	listScanBudget = 20_000
	listReadBudget = 2_000
	// MaxListFilter is the most characters of a key prefix or a tag to
	// filter on: a filter rides in a URL, and a longer prefix of a key
	// narrows nothing a shorter one does not.
	MaxListFilter = 4096
)

// ListKind is which listing a cursor belongs to.
type ListKind uint8

// The listings.
const (
	ListPending ListKind = 1 + iota
	ListInFlight
	ListDead
)

// String returns the listing's name as the API spells it.
func (k ListKind) String() string {
	switch k {
	case ListPending:
		return "pending"
	case ListInFlight:
		return "inflight"
	case ListDead:
		return "dead"
	}
	return "unknown"
}

// ListRequest asks for one page of a listing.
type ListRequest struct {
	// Topic filters pending messages (empty: every topic); in flight and
	// dead letters need it, with Group.
	Topic, Group string
	// KeyPrefix and Tag filter on the message's key (by prefix) and tag
	// (exactly); empty means any.
	KeyPrefix, Tag string
	// DueFrom and DueTo (Unix ms) bound the due time to [DueFrom, DueTo):
	// for pending messages the time the message fires, for in flight the
	// message's due time, for dead letters the time it was dead-lettered.
	// DueTo 0 means no bound.
	DueFrom, DueTo int64
	// Limit is the most items a page holds: default DefaultListLimit, at
	// most MaxListLimit.
	Limit int
	// Cursor continues a listing where its last page ended ("" for the
	// first page).
	Cursor string
}

// Listed is one message of a listing.
type Listed struct {
	ID         message.ID
	State      State
	Topic      string
	Queue      int
	Key, Tag   string
	Due        int64 // Unix ms, after any reschedule
	FireAt     int64 // pending: when its timer fires (Due, or later in its window)
	Sent       int64 // Unix ms
	BodyBytes  int
	Properties map[string]string
	// In flight: the group, the delivery's attempt and when its lease
	// ends (Unix ms).
	Group    string
	Attempt  int
	LeaseEnd int64
	// Dead letters: why the message was dead-lettered, after how many
	// attempts, and the message it copies.
	Reason      string
	Attempts    int
	OriginTopic string
	OriginID    string
}

// ListPage is a page of a listing and what it cost.
type ListPage struct {
	Items []Listed
	// Next continues the listing; "" when it is at its end.
	Next string
	// Scanned is the index entries the page examined, Read the message
	// records it read, Blocks the timer index blocks (4 KiB) it read.
	Scanned, Read, Blocks int
}

// Browser answers an operator's listings of messages. Get one with
// NewBrowser; it holds no state of its own and is safe for concurrent use.
type Browser struct{ eng *Engine }

// NewBrowser returns the listings of e.
func NewBrowser(e *Engine) *Browser { return &Browser{eng: e} }

// check validates a request for kind and returns its limit.
func (r *ListRequest) check(kind ListKind) error {
	if r.Limit == 0 {
		r.Limit = DefaultListLimit
	}
	switch {
	case r.Limit < 1 || r.Limit > MaxListLimit:
		return errs.New(errs.InvalidArgument, "limit %d is not in [1, %d]", r.Limit, MaxListLimit)
	case r.DueFrom < 0 || r.DueTo < 0:
		return errs.New(errs.InvalidArgument, "due_from and due_to are Unix milliseconds, not negative")
	case r.DueTo != 0 && r.DueTo <= r.DueFrom:
		return errs.New(errs.InvalidArgument, "due_to %d is not after due_from %d", r.DueTo, r.DueFrom)
	case !utf8.ValidString(r.KeyPrefix) || utf8.RuneCountInString(r.KeyPrefix) > MaxListFilter:
		return errs.New(errs.InvalidArgument, "key prefix is not UTF-8 of at most %d characters", MaxListFilter)
	case !utf8.ValidString(r.Tag) || utf8.RuneCountInString(r.Tag) > MaxListFilter:
		return errs.New(errs.InvalidArgument, "tag is not UTF-8 of at most %d characters", MaxListFilter)
	}
	if r.Topic != "" {
		if err := message.ValidateTopic(r.Topic); err != nil {
			return err
		}
	}
	if kind != ListPending {
		if r.Topic == "" || r.Group == "" {
			return errs.New(errs.InvalidArgument, "listing %s messages needs a topic and a group", kind)
		}
		if err := message.ValidateName("group", r.Group); err != nil {
			return err
		}
	}
	return nil
}

// match reports whether a record passes the request's record filters.
func (r *ListRequest) match(s *message.Stored) bool {
	return strings.HasPrefix(s.Key, r.KeyPrefix) && (r.Tag == "" || s.Tag == r.Tag)
}

// inDue reports whether t is in the request's due range.
func (r *ListRequest) inDue(t int64) bool {
	return t >= r.DueFrom && (r.DueTo == 0 || t < r.DueTo)
}

// cursorLen is the bytes of a cursor: version, kind, and two u64.
const cursorLen = 2 + 8 + 8

const cursorVersion = 1

// encodeCursor spells a place in a listing: for pending messages (due,
// pos), for the others (queue, offset).
func encodeCursor(kind ListKind, a, b uint64) string {
	var buf [cursorLen]byte
	buf[0], buf[1] = cursorVersion, byte(kind)
	binary.BigEndian.PutUint64(buf[2:], a)
	binary.BigEndian.PutUint64(buf[10:], b)
	return base64.RawURLEncoding.EncodeToString(buf[:])
}

// decodeCursor reads a cursor of kind; "" is the listing's start.
func decodeCursor(kind ListKind, s string) (a, b uint64, start bool, err error) {
	if s == "" {
		return 0, 0, true, nil
	}
	buf, derr := base64.RawURLEncoding.DecodeString(s)
	if derr != nil || len(buf) != cursorLen || buf[0] != cursorVersion {
		return 0, 0, false, errs.New(errs.InvalidArgument, "cursor %q is malformed: pass the next cursor of an earlier page as it was given", s)
	}
	if ListKind(buf[1]) != kind {
		return 0, 0, false, errs.New(errs.InvalidArgument, "cursor %q belongs to the %s listing, not to %s", s, ListKind(buf[1]), kind)
	}
	return binary.BigEndian.Uint64(buf[2:]), binary.BigEndian.Uint64(buf[10:]), false, nil
}

// Pending lists messages not yet visible, by the time they fire (see
// ListRequest). A message that is due but waits for the dispatch rate (a
// herd) is listed with StateDue.
func (b *Browser) Pending(req ListRequest) (ListPage, error) {
	e := b.eng
	if err := req.check(ListPending); err != nil {
		return ListPage{}, err
	}
	due, pos, start, err := decodeCursor(ListPending, req.Cursor)
	if err != nil {
		return ListPage{}, err
	}
	var topicID uint32
	if req.Topic != "" {
		t := e.cat.topic(req.Topic) // no lock: see catalog.byName
		if t == nil {
			return ListPage{}, errs.New(errs.NotFound, "topic %q does not exist", req.Topic)
		}
		topicID = t.id
	}
	e.mu.Lock()
	if err := e.life.unavailableLocked(); err != nil {
		e.mu.Unlock()
		return ListPage{}, err
	}
	// Every timer at or before the frontier is visible.
	from := timerstore.Entry{Due: max(req.DueFrom, e.disp.frontierLocked()+1)}
	e.mu.Unlock()
	if !start {
		from = timerstore.Entry{Due: int64(due), Pos: pos}
	}
	hi := int64(math.MaxInt64)
	if req.DueTo != 0 {
		hi = req.DueTo
	}
	var page ListPage
	for page.Scanned < listScanBudget && page.Read < listReadBudget && len(page.Items) < req.Limit {
		chunk := min(listScanBudget-page.Scanned, max(4*req.Limit, 256))
		e.mu.Lock()
		plan := e.disp.scanPlanLocked(from, hi, chunk)
		e.mu.Unlock()
		res, err := plan.Read()
		page.Blocks += res.Blocks
		if err != nil {
			return ListPage{}, errs.Wrap(errs.Unavailable, err, "read the timer index")
		}
		done, err := b.pendingChunk(&req, &page, res.Entries, topicID, &from)
		if err != nil {
			return ListPage{}, err
		}
		if !done && !res.More {
			return page, nil // the end of the index
		}
	}
	page.Next = encodeCursor(ListPending, uint64(from.Due), from.Pos)
	return page, nil
}

// pendingChunk examines scanned timer entries in order, adds the pending
// messages that pass the filters to page, and moves from past each entry
// examined. It reports whether it stopped before the chunk's end (the page
// is full or a budget spent).
func (b *Browser) pendingChunk(req *ListRequest, page *ListPage, ents []timerstore.Entry, topicID uint32, from *timerstore.Entry) (bool, error) {
	e := b.eng
	for _, en := range ents {
		if len(page.Items) >= req.Limit || page.Read >= listReadBudget {
			return true, nil
		}
		page.Scanned++
		*from = timerstore.Entry{Due: en.Due, Pos: en.Pos + 1}
		if (en.Kind != kindMessage && en.Kind != kindWindowed) || (topicID != 0 && en.Topic != topicID) {
			continue
		}
		s, _, err := e.readStored(en.Pos)
		page.Read++
		switch {
		case errors.Is(err, errGone), isNotARecord(err):
			continue // retention took it, or a stale entry
		case err != nil:
			return false, errs.Wrap(errs.Unavailable, err, "read the message at log position %d", en.Pos)
		}
		if !req.match(s) {
			continue
		}
		e.mu.Lock()
		st, msgDue, _ := messageStateLocked(e.ovl, e.disp, en.Pos, s)
		timer := fireAt(s)
		if ov := e.ovl.get(en.Pos); ov != nil {
			timer = ov.Due
		}
		e.mu.Unlock()
		// An entry of an earlier due time of a moved message is stale.
		if timer != en.Due || (st != StatePending && st != StateDue) {
			continue
		}
		page.Items = append(page.Items, Listed{ID: e.ids.seal.ID(en.Pos, s.Nonce), State: st, Topic: s.Topic, Queue: s.Queue,
			Key: s.Key, Tag: s.Tag, Due: msgDue, FireAt: en.Due, Sent: s.Sent, BodyBytes: len(s.Body), Properties: s.Properties})
	}
	return false, nil
}

// deadItem fills in what a dead letter's properties say of it.
func deadItem(it *Listed, props map[string]string) {
	it.Reason = props[DeadReasonProperty]
	if it.Reason == "" {
		it.Reason = ReasonMaxAttempts
	}
	it.Attempts, _ = strconv.Atoi(props["hourglass-attempts"])
	it.OriginTopic = props["hourglass-origin-topic"]
	it.OriginID = props["hourglass-origin-id"]
}

// ReasonMaxAttempts is the reason a listing gives a dead letter whose
// record names none: its group's deliveries ran out (MaxAttempts).
const ReasonMaxAttempts = "max-attempts"
