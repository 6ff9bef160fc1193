package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sort"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// ErrInUse is returned by Check for a data directory whose lock a running
// broker holds: its files change under the reader, so nothing it found
// would mean anything.
var ErrInUse = errors.New("engine: the data directory is in use by a running broker")

// CheckOptions configures Check.
type CheckOptions struct {
	// BucketWidth is the timer-bucket width the broker runs with. The
	// timer index's run files hold absolute due times and do not depend on
	// it (checkpoint version 3 on), so Check does not use it; the field is
	// kept so that callers and the CLI's --bucket-width flag keep working.
	BucketWidth time.Duration
}

// Problem is one finding of Check: the file (relative to the data
// directory), the byte offset in it, and what is wrong.
type Problem struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	What   string `json:"what"`
}

// CheckReport is what Check found.
type CheckReport struct {
	Dir    string `json:"dir"`
	Format int    `json:"format"`
	// LogStart and LogHead delimit the valid records of the log.
	LogStart uint64 `json:"log_start"`
	LogHead  uint64 `json:"log_head"`
	Segments int    `json:"segments"`
	Records  int    `json:"records"`
	Messages int    `json:"messages"`
	// Checkpoint is false when the directory has none (recovery then
	// replays the whole log); CheckpointPos is where its replay starts.
	Checkpoint    bool   `json:"checkpoint"`
	CheckpointPos uint64 `json:"checkpoint_pos"`
	// Entries checked per cache.
	QueueEntries   int64 `json:"queue_entries"`
	TimerEntries   int64 `json:"timer_entries"`
	KeyEntries     int64 `json:"key_entries"`
	OverlayEntries int64 `json:"overlay_entries"`
	// Problems is damage: what makes recovery refuse, or rebuild a cache
	// from the log, or a cache that disagrees with the log. Empty means
	// the directory is sound.
	Problems []Problem `json:"problems"`
	// Notes is what recovery cuts or removes as a matter of course: the
	// torn tails a crash leaves in the log and the caches, files written
	// after the last checkpoint. They are not damage.
	Notes []Problem `json:"notes"`
	// SetAside lists the damaged messages consumer groups passed over
	// (the set-aside records the log holds), each at the message's own
	// file and offset ("" and 0 once retention removed it). They are the
	// aftermath of damage, not damage: the damage itself is a problem
	// until repair quarantines it.
	SetAside []Problem `json:"set_aside"`
}

// OK reports whether Check found no problem.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 }

// Summary is one line saying what was checked and found.
func (r *CheckReport) Summary() string {
	verdict := "clean"
	if !r.OK() {
		verdict = fmt.Sprintf("%d problem(s)", len(r.Problems))
	}
	if len(r.SetAside) > 0 {
		verdict += fmt.Sprintf(", %d damaged message(s) set aside", len(r.SetAside))
	}
	ck := "no checkpoint"
	if r.Checkpoint {
		ck = fmt.Sprintf("checkpoint at %d", r.CheckpointPos)
	}
	return fmt.Sprintf("%s: %s, %d note(s); %d segment(s), %d records (%d messages) in [%d, %d), %s; "+
		"checked %d queue-index, %d timer, %d key-index and %d overlay entries",
		r.Dir, verdict, len(r.Notes), r.Segments, r.Records, r.Messages, r.LogStart, r.LogHead, ck,
		r.QueueEntries, r.TimerEntries, r.KeyEntries, r.OverlayEntries)
}

// Check verifies the data directory dir offline, like `bbolt check`: every
// commit-log record's frame and checksum and every payload's encoding; the
// identity and the checkpoint (it decodes, belongs to the directory, and
// its position is a record boundary of the log); and every cache against
// the log: queue-index entries must point at message records of their
// topic and queue, timer-bucket entries at message records with a matching
// due time, key-index entries at records carrying a key of that hash,
// overlay entries at messages. Entries the log's retention removed the
// records of are not judged. Cache entries past what the checkpoint
// recorded may be absent (recovery rebuilds them from the log), but must
// not point at garbage.
//
// Check never writes: it reads through vfs.ReadOnly, so any write it
// attempted would fail. It refuses (ErrInUse) a directory whose lock a
// broker holds. The error is for what stopped the check (I/O, a missing
// directory); damage is reported in the CheckReport.
func Check(fsys vfs.FS, dir string, opts CheckOptions) (*CheckReport, error) {
	ro := vfs.ReadOnly(fsys)
	if _, err := ro.List(dir); err != nil {
		return nil, fmt.Errorf("engine: check %s: %w", dir, err)
	}
	lock, err := vfs.Lock(ro, path.Join(dir, LockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s (%v); stop it, or check a backup instead", ErrInUse, dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: check %s: %w", dir, err)
	}
	defer lock.Close()
	return checkLocked(ro, dir)
}

// checkLocked is Check for a caller holding the directory's lock; ro is
// a read-only view.
func checkLocked(ro vfs.FS, dir string) (*CheckReport, error) {
	c := &checker{
		fs: ro, dir: dir,
		rep:      &CheckReport{Dir: dir, Problems: []Problem{}, Notes: []Problem{}, SetAside: []Problem{}},
		ck:       &checkpointState{},
		msgs:     map[uint64]ckMsg{},
		dues:     map[uint64][]int64{},
		topics:   map[uint32]ckTopic{},
		topicIDs: map[string]uint32{},
		groups:   map[uint32]string{},
	}
	for _, step := range []func() error{c.identity, c.checkpoint, c.log, c.queues, c.overlay, c.timers, c.keys} {
		if err := step(); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

// checker holds what Check learned from the log, by message identity.
type checker struct {
	fs  vfs.FS
	dir string
	rep *CheckReport
	id  *identity
	ck  *checkpointState
	// msgs holds every retained message by identity (original position),
	// moved copies included; dues the other due times a reschedule or the
	// overlay gave it.
	msgs     map[uint64]ckMsg
	dues     map[uint64][]int64
	topics   map[uint32]ckTopic
	topicIDs map[string]uint32
	// recProblems are problems found at log positions, given a file and
	// offset once the segments are known.
	recProblems []posProblem
	// groups names the groups by id; setAsides are the set-aside records'
	// messages, placed like recProblems.
	groups     map[uint32]string
	setAsides  []posProblem
	sawCkptPos bool
	// quarantined are the log's skip frames: a cache entry pointing into
	// one names a message repair quarantined, delivered as data_loss.
	quarantined []commitlog.SkipFrame
}

type ckMsg struct {
	topic   uint32 // 0: a topic the log and the checkpoint do not know
	queue   uint16
	due     int64
	fire    int64 // the timer's time: due, or later within a tolerance window (window.go)
	hasKey  bool
	keyHash uint64
	// dedupHash is the key-index hash of the message's dedup ID (0: none).
	dedupHash uint64
}

type ckTopic struct {
	name   string
	queues int
}

type posProblem struct {
	pos  uint64
	what string
}

func (c *checker) problem(file string, off int64, format string, args ...any) {
	c.rep.Problems = append(c.rep.Problems, Problem{File: file, Offset: off, What: fmt.Sprintf(format, args...)})
}

func (c *checker) note(file string, off int64, format string, args ...any) {
	c.rep.Notes = append(c.rep.Notes, Problem{File: file, Offset: off, What: fmt.Sprintf(format, args...)})
}

func (c *checker) path(parts ...string) string {
	return path.Join(append([]string{c.dir}, parts...)...)
}

// identity checks the IDENTITY file.
func (c *checker) identity() error {
	b, err := readAll(c.fs, c.path(identityFile))
	switch {
	case vfs.IsNotExist(err):
		if names, _ := c.fs.List(c.path("log")); len(names) > 0 {
			c.problem(identityFile, 0, "missing, but the directory has a commit log: the broker refuses to guess its format")
		}
		return nil
	case err != nil:
		return err
	}
	id, err := decodeIdentity(b)
	if err != nil {
		c.problem(identityFile, 0, "%v", err)
		return nil
	}
	c.rep.Format = int(id.format)
	if id.format != DataFormat {
		c.problem(identityFile, 4, "format %d; this hourglass reads format %d only", id.format, DataFormat)
	}
	c.id = id
	return nil
}

// checkpoint decodes the checkpoint; its position is judged once the log
// is read.
func (c *checker) checkpoint() error {
	b, err := readAll(c.fs, c.path(checkpointFile))
	switch {
	case vfs.IsNotExist(err):
		return nil
	case err != nil:
		return err
	}
	st, err := decodeCheckpoint(b)
	if err != nil {
		c.problem(checkpointFile, 0, "%v: recovery refuses to start", err)
		return nil
	}
	c.rep.Checkpoint, c.rep.CheckpointPos = true, st.LogPos
	if c.id != nil && st.Incarnation != c.id.dirTag() {
		c.problem(checkpointFile, 5, "belongs to directory %08x, this directory is %08x (copied from elsewhere?)", st.Incarnation, c.id.dirTag())
	}
	for _, t := range st.Topics {
		c.addTopic(t.ID, t.Name, len(t.Entries))
	}
	for _, g := range st.Groups {
		c.groups[g.ID] = g.Name
	}
	c.ck = st
	return nil
}

func (c *checker) addTopic(id uint32, name string, queues int) {
	c.topics[id] = ckTopic{name: name, queues: queues}
	c.topicIDs[name] = id
}

// log verifies every segment and indexes the messages.
func (c *checker) log() error {
	vr, err := commitlog.Verify(c.fs, c.path("log"), c.record)
	if vfs.IsNotExist(err) {
		c.note("log", 0, "no commit log: an empty directory")
		return nil
	}
	if err != nil {
		return err
	}
	r := c.rep
	r.LogStart, r.LogHead, r.Segments, r.Records = uint64(vr.Start), uint64(vr.Head), len(vr.Segments), vr.Records
	c.quarantined = vr.Quarantined
	logFile := func(pos uint64) (string, int64) {
		i := sort.Search(len(vr.Segments), func(i int) bool { return uint64(vr.Segments[i].End) > pos })
		if i == len(vr.Segments) {
			i--
		}
		s := vr.Segments[i]
		return path.Join("log", s.Name), commitlog.HeaderSize + int64(pos-uint64(s.Base))
	}
	for _, p := range c.recProblems {
		f, off := logFile(p.pos)
		c.problem(f, off, "record at position %d: %s", p.pos, p.what)
	}
	for _, p := range c.setAsides {
		f, off := "", int64(0)
		if p.pos >= r.LogStart && len(vr.Segments) > 0 {
			f, off = logFile(p.pos)
		}
		r.SetAside = append(r.SetAside, Problem{File: f, Offset: off, What: p.what})
	}
	last := ""
	if n := len(vr.Segments); n > 0 {
		last = vr.Segments[n-1].Name
	}
	for _, d := range vr.Damage {
		f := path.Join("log", d.Segment)
		if d.Tail && d.Segment == last {
			c.note(f, d.Offset, "torn tail: %d bytes at position %d (%s) and no valid record after them; recovery cuts them", d.Length, d.Pos, d.Reason)
			continue
		}
		c.problem(f, d.Offset, "%d damaged bytes at position %d (%s), followed by %d valid records; `hourglass repair` quarantines them",
			d.Length, d.Pos, d.Reason, d.RecordsAfter)
	}
	for _, b := range vr.Broken {
		c.problem(path.Join("log", b.Segment), 0, "%s: recovery refuses to start", b.Reason)
	}
	for _, b := range vr.SumMismatch {
		c.problem(path.Join("log", b.Segment), 0, "%s: bytes changed that no record's checksum caught; compare with a backup ("+
			"`hourglass repair` takes the segment as it is and rewrites its sum file)", b.Reason)
	}
	for _, name := range vr.Incomplete {
		c.note(path.Join("log", name), 0, "a segment whose creation never completed (no valid header, no records); recovery removes it")
	}
	switch {
	case !r.Checkpoint:
		if r.Records > 0 {
			c.note(checkpointFile, 0, "no checkpoint yet: recovery replays the whole log")
		}
	case c.ck.LogPos < r.LogStart || c.ck.LogPos > r.LogHead:
		c.problem(checkpointFile, 9, "log position %d is outside the log [%d, %d]: recovery refuses to start", c.ck.LogPos, r.LogStart, r.LogHead)
	case c.ck.LogPos != r.LogHead && !c.sawCkptPos:
		c.problem(checkpointFile, 9, "log position %d is not a record boundary", c.ck.LogPos)
	}
	return nil
}

// record indexes one valid log record and checks its payload.
func (c *checker) record(p commitlog.Pos, rec commitlog.Record) error {
	pos := uint64(p)
	if c.rep.Checkpoint && pos == c.ck.LogPos {
		c.sawCkptPos = true
	}
	bad := func(err error) {
		c.recProblems = append(c.recProblems, posProblem{pos, fmt.Sprintf("type %d payload does not decode: %v", rec.Type, err)})
	}
	var err error
	switch rec.Type {
	case recMessage, recMoved:
		orig, payload := pos, rec.Payload
		if rec.Type == recMoved {
			if len(payload) < 8 {
				bad(errBadPayload)
				return nil
			}
			orig, payload = binary.LittleEndian.Uint64(payload), payload[8:]
		}
		s, err := message.Decode(payload)
		if err != nil {
			bad(err)
			return nil
		}
		m := ckMsg{queue: uint16(s.Queue), due: s.Due, fire: fireAt(s), hasKey: s.Key != ""}
		if m.hasKey {
			m.keyHash = keyHash(s.Topic, s.Key)
		}
		if s.DedupID != "" {
			m.dedupHash = dedupHash(s.Topic, s.DedupID)
		}
		m.topic = c.topicIDs[s.Topic]
		if m.topic == 0 {
			c.recProblems = append(c.recProblems, posProblem{pos, fmt.Sprintf("message of topic %q, which no topic record or checkpoint defines", s.Topic)})
		} else if int(m.queue) >= c.topics[m.topic].queues {
			c.recProblems = append(c.recProblems, posProblem{pos, fmt.Sprintf("message of queue %d, topic %q has %d", m.queue, s.Topic, c.topics[m.topic].queues)})
		}
		if prev, ok := c.msgs[orig]; ok && prev.due != m.due {
			c.dues[orig] = append(c.dues[orig], prev.due)
		}
		c.msgs[orig] = m
		c.rep.Messages++
	case recCancel:
		_, _, err = decodePos(rec.Payload)
	case recReschedule:
		var target uint64
		var due int64
		if target, due, err = decodePos(rec.Payload); err == nil {
			c.dues[target] = append(c.dues[target], due)
		}
	case recFire:
		_, _, err = decodeFire(rec.Payload)
	case recTopic:
		var id uint32
		var queues int
		var name string
		if id, queues, _, name, err = decodeTopic(rec.Payload); err == nil {
			c.addTopic(id, name, queues)
		}
	case recGroup:
		var id uint32
		var name string
		if id, _, _, name, err = decodeGroup(rec.Payload); err == nil {
			c.groups[id] = name
		}
	case recAck, recAttempt:
		_, _, err = decodeProgress(rec.Type, rec.Payload)
	case recSetAside:
		err = c.setAside(pos, rec.Payload)
	case recTrail, recGroupChange:
		err = checkForm(rec)
	default:
		c.recProblems = append(c.recProblems, posProblem{pos, fmt.Sprintf("unknown record type %d: recovery refuses it (written by a newer hourglass?)", rec.Type)})
	}
	if err != nil {
		bad(err)
	}
	return nil
}

// checkForm checks the form of a record that holds no state Check
// compares: a trail (history) or a group change (its effect is in the
// checkpoint's progress and policy).
func checkForm(rec commitlog.Record) error {
	if rec.Type == recTrail {
		_, err := decodeTrail(rec.Payload)
		return err
	}
	_, err := decodeGroupChange(rec.Payload)
	return err
}

// setAside lists the messages of the set-aside record at pos.
func (c *checker) setAside(pos uint64, payload []byte) error {
	gid, items, err := decodeSetAside(payload)
	if err != nil {
		return err
	}
	for _, it := range items {
		c.setAsides = append(c.setAsides, posProblem{it.pos, fmt.Sprintf(
			"group %q (id %d) passed over the damaged message at position %d (queue %d, offset %d): set aside by the record at %d",
			c.groups[gid], gid, it.pos, it.queue, it.offset, pos)})
	}
	return nil
}

// target judges a cache entry's log position: "" when it names a retained
// message (m set) or one retention removed (m nil), else what is wrong.
func (c *checker) target(pos uint64) (m *ckMsg, wrong string) {
	if v, ok := c.msgs[pos]; ok {
		return &v, ""
	}
	switch {
	case pos < c.rep.LogStart:
		return nil, ""
	case pos >= c.rep.LogHead:
		return nil, fmt.Sprintf("points at position %d, past the log's head %d", pos, c.rep.LogHead)
	}
	i := sort.Search(len(c.quarantined), func(i int) bool { return uint64(c.quarantined[i].End) > pos })
	if i < len(c.quarantined) && uint64(c.quarantined[i].Pos) <= pos {
		return nil, "" // quarantined by repair: a receive answers data_loss
	}
	return nil, fmt.Sprintf("points at position %d, which is not a message record", pos)
}
