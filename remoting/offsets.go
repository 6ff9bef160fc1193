package remoting

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// The consumer offsets file, replaced whole at each flush (temporary file,
// fsync, rename, fsync of the directory), so a crash leaves the old file
// or the new one:
//
//	hourglass remoting offsets 1
//	<group> TAB <topic> TAB <queue> TAB <offset>     one line per queue
//	crc32c <8 hex digits>                           over every line above
//
// Group and topic names have no tab or newline (message.ValidateName).
const (
	offsetsFile   = "consumer-offsets"
	offsetsHeader = "hourglass remoting offsets 1"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type offsetKey struct {
	group, topic string
	queue        int
}

// offsetStore keeps consumer offsets per (group, topic, queue). An update
// is in memory at once; flush makes every update before it durable. A
// caller that must answer only once its update is durable waits on
// commit, which group-commits: one file write for all who wait.
type offsetStore struct {
	dir string

	mu      sync.Mutex
	offsets map[offsetKey]int64
	// groups counts the offsets of each group; at most maxGroups groups
	// and maxOffsets offsets in all are kept (maxOffsetGroups and
	// maxOffsets but in tests).
	groups                map[string]int
	maxGroups, maxOffsets int
	// setAt is the gen at which each offset took its value: a commit of
	// the same value again waits for that gen, not less.
	setAt map[offsetKey]uint64
	// gen counts updates; durable is the gen the file holds.
	gen, durable uint64
	err          error // the last flush's error, sticky until one succeeds

	flushMu sync.Mutex // one flush at a time
	// syncLog, when set, makes the engine's log durable. A flush calls it
	// after it took the offsets and before it writes them: an offset
	// counts queue entries a pull handed out, and a queue entry can be
	// visible before its fire record is durable (engine invariant E21), so
	// without it a crash could leave the file past a fire that recovery
	// then makes again at the same queue offset, and the consumer would
	// skip that message.
	syncLog func() error
}

func openOffsets(dir string) (*offsetStore, error) {
	st := &offsetStore{dir: dir, offsets: map[offsetKey]int64{}, setAt: map[offsetKey]uint64{}, groups: map[string]int{},
		maxGroups: maxOffsetGroups, maxOffsets: maxOffsets}
	if dir == "" {
		return st, nil // in memory only, for tests that say so
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the consumer offsets directory: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, offsetsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the consumer offsets: %w", err)
	}
	if st.offsets, err = parseOffsets(b); err != nil {
		return nil, fmt.Errorf("consumer offsets file %s: %w", filepath.Join(dir, offsetsFile), err)
	}
	for k := range st.offsets {
		st.groups[k.group]++
	}
	return st, nil
}

func parseOffsets(b []byte) (map[offsetKey]int64, error) {
	i := bytes.LastIndex(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if i < 0 {
		return nil, errors.New("no checksum line")
	}
	content, sum := b[:i+1], strings.TrimSpace(string(b[i+1:]))
	if want := fmt.Sprintf("crc32c %08x", crc32.Checksum(content, castagnoli)); sum != want {
		return nil, fmt.Errorf("checksum line %q does not match the content (%q): the file is damaged", sum, want)
	}
	out := map[offsetKey]int64{}
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for n := 0; sc.Scan(); n++ {
		line := sc.Text()
		if n == 0 {
			if line != offsetsHeader {
				return nil, fmt.Errorf("first line %q is not %q", line, offsetsHeader)
			}
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d has %d fields, not 4", n+1, len(f))
		}
		q, err1 := strconv.Atoi(f[2])
		off, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: queue %q or offset %q is not a number", n+1, f[2], f[3])
		}
		out[offsetKey{f[0], f[1], q}] = off
	}
	return out, sc.Err()
}

// get returns the committed offset, and whether there is one.
func (st *offsetStore) get(k offsetKey) (int64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	off, ok := st.offsets[k]
	return off, ok
}

// set records an offset in memory and returns the generation a commit
// must reach for it to be durable.
func (st *offsetStore) set(k offsetKey, off int64) (uint64, error) {
	if err := message.ValidateName("group", k.group); err != nil {
		return 0, err
	}
	if err := message.ValidateTopic(k.topic); err != nil {
		return 0, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := st.offsets[k]; ok && cur == off {
		// Unchanged: durable once the gen that set it is, which may not
		// be yet (a pull set it, and no flush has run since).
		return st.setAt[k], nil
	}
	if _, ok := st.offsets[k]; !ok {
		if err := st.roomLocked(k.group); err != nil {
			return 0, err
		}
		st.groups[k.group]++
	}
	st.offsets[k] = off
	st.gen++
	st.setAt[k] = st.gen
	return st.gen, nil
}

// The offsets kept are bounded, so that clients naming made-up groups
// cannot grow the file (rewritten whole at each commit) without end: as
// many groups as hourglass's own -max-groups allows by default, and at
// most maxOffsets offsets in all. An offset past either is refused.
const (
	maxOffsetGroups = engine.DefaultMaxGroups
	maxOffsets      = 1 << 20
)

// roomLocked says whether a new offset of group fits the bounds; st.mu
// held.
func (st *offsetStore) roomLocked(group string) error {
	if group == txGroup {
		return nil // the broker's own, one offset: never crowded out by clients
	}
	if st.groups[group] == 0 && len(st.groups) >= st.maxGroups {
		return fmt.Errorf("consumer offsets are kept for %d groups, the most there may be: group %q is not kept", len(st.groups), group)
	}
	if len(st.offsets) >= st.maxOffsets {
		return fmt.Errorf("%d consumer offsets are kept, the most there may be", len(st.offsets))
	}
	return nil
}

// commit returns once the file holds generation gen (or a later one).
func (st *offsetStore) commit(gen uint64) error {
	st.flushMu.Lock()
	defer st.flushMu.Unlock()
	st.mu.Lock()
	if st.durable >= gen && st.err == nil {
		st.mu.Unlock()
		return nil
	}
	st.mu.Unlock()
	return st.flushLocked()
}

// flushLocked writes the file with everything set so far; flushMu held.
func (st *offsetStore) flushLocked() error {
	st.mu.Lock()
	gen := st.gen
	keys := make([]offsetKey, 0, len(st.offsets))
	for k := range st.offsets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.queue < b.queue
	})
	var buf bytes.Buffer
	buf.WriteString(offsetsHeader + "\n")
	for _, k := range keys {
		fmt.Fprintf(&buf, "%s\t%s\t%d\t%d\n", k.group, k.topic, k.queue, st.offsets[k])
	}
	st.mu.Unlock()
	fmt.Fprintf(&buf, "crc32c %08x\n", crc32.Checksum(buf.Bytes(), castagnoli))
	var err error
	if st.syncLog != nil {
		err = st.syncLog()
	}
	if err == nil {
		err = st.write(buf.Bytes())
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.err = err
	if err == nil && gen > st.durable {
		st.durable = gen
	}
	return err
}

// write replaces the file atomically and durably.
func (st *offsetStore) write(b []byte) error {
	if st.dir == "" {
		return nil
	}
	tmp := filepath.Join(st.dir, offsetsFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the consumer offsets: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(st.dir, offsetsFile))
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(st.dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("write the consumer offsets: %w", err)
	}
	return nil
}

// close makes every update durable.
func (st *offsetStore) close() error {
	st.mu.Lock()
	gen := st.gen
	st.mu.Unlock()
	return st.commit(gen)
}
