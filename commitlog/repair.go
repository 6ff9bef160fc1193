package commitlog

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"

	"github.com/hourglass-mq/hourglass/vfs"
)

// RepairMode says what Repair does with damage followed by valid records.
type RepairMode int

const (
	// RepairSalvage (the default) keeps every valid record at its position:
	// each damaged range is copied to a quarantine file and then
	// overwritten in place by a skip frame of exactly its length. A torn
	// tail of the last segment (nothing valid after it) is quarantined and
	// cut, as Open would cut it.
	RepairSalvage RepairMode = iota
	// RepairTruncate cuts the last segment at its first damaged byte, as
	// Open did before it told torn tails from media damage, after copying
	// everything cut to a quarantine file. The valid records after the
	// damage are lost to the log (they stay in the quarantine file).
	// Damage in sealed segments is salvaged even in this mode: cutting a
	// sealed segment would break the chain of positions.
	RepairTruncate
)

// String returns "salvage" or "truncate".
func (m RepairMode) String() string {
	switch m {
	case RepairSalvage:
		return "salvage"
	case RepairTruncate:
		return "truncate"
	}
	return "RepairMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseRepairMode is the inverse of RepairMode.String.
func ParseRepairMode(s string) (RepairMode, error) {
	for _, m := range []RepairMode{RepairSalvage, RepairTruncate} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("commitlog: unknown repair mode %q (want salvage or truncate)", s)
}

// Repair actions recorded in RepairedRange.Action.
const (
	// ActionSkip: the range was overwritten by a skip frame; every position
	// after it is unchanged.
	ActionSkip = "skip"
	// ActionCut: the segment was truncated at the range's start.
	ActionCut = "cut"
)

// RepairedRange is one damaged range and what Repair did with it.
type RepairedRange struct {
	DamagedRange
	// Action is ActionSkip or ActionCut.
	Action string `json:"action"`
	// Quarantine is the name, in the log's directory, of the file that
	// holds the range's original bytes.
	Quarantine string `json:"quarantine"`
	// RecordsLost counts the valid records inside the range that are no
	// longer in the log: only a cut in truncate mode has any (the damaged
	// bytes themselves hold an unknown number of records).
	RecordsLost int `json:"records_lost"`
}

// RepairReport says what Repair found and did.
type RepairReport struct {
	// Mode is the mode Repair ran in; Dir the log's directory.
	Mode string `json:"mode"`
	Dir  string `json:"dir"`
	// Segments is the number of segments checked; RemovedSegments the
	// interrupted creations removed (as Open removes them).
	Segments        int      `json:"segments"`
	RemovedSegments []string `json:"removed_segments,omitempty"`
	// Ranges lists every damaged range handled, oldest first. Empty means
	// the log had no damage and nothing was changed.
	Ranges []RepairedRange `json:"ranges"`
	// BytesQuarantined is the total copied to quarantine files; BytesLost
	// the bytes no longer readable as records (skip frames and cuts).
	BytesQuarantined int64 `json:"bytes_quarantined"`
	BytesLost        int64 `json:"bytes_lost"`
	// RecordsLost counts valid records cut away (truncate mode only);
	// RecordsKept the valid records after damage that kept their
	// positions.
	RecordsLost int `json:"records_lost"`
	RecordsKept int `json:"records_kept"`
	// Resummed lists sealed segments whose bytes did not match their sum
	// file although every record validated: Repair rewrote the sum file
	// to the bytes as they are (it cannot tell what changed).
	Resummed []string `json:"resummed,omitempty"`
}

// Repair checks every segment of the log in opts.Dir (only FS and Dir are
// used) and repairs the damage it finds in mode, so that Open succeeds
// afterwards. The log must not be open: Repair writes the segment files
// directly, and nothing in this package stops a concurrent Open.
//
// Every byte Repair removes from the log is first copied to a quarantine
// file named <segment>.damaged-<position> in the log's directory, which is
// synced, and its directory entry too, before the segment is touched; so a
// crash at any point loses nothing, and running Repair again finishes the
// work. Damage Repair cannot delimit (a bad segment header, segments that
// do not chain) fails with ErrCorrupt as Open does, with nothing changed.
func Repair(opts Options, mode RepairMode) (RepairReport, error) {
	rep := RepairReport{Mode: mode.String(), Dir: opts.Dir, Ranges: []RepairedRange{}}
	if opts.FS == nil || opts.Dir == "" {
		return rep, errors.New("commitlog: Options.FS and Options.Dir are required")
	}
	if mode != RepairSalvage && mode != RepairTruncate {
		return rep, fmt.Errorf("commitlog: unknown repair mode %d", mode)
	}
	fsys, dir := opts.FS, opts.Dir
	names, err := fsys.List(dir)
	if err != nil {
		return rep, fmt.Errorf("commitlog: list dir: %w", err)
	}
	var info RecoveryInfo
	segs, _, err := openSegments(fsys, dir, names, &info)
	defer func() {
		for _, s := range segs {
			_ = s.f.Close()
		}
	}()
	rep.RemovedSegments = info.RemovedSegments
	if err != nil {
		return rep, err
	}
	rep.Segments = len(segs)
	q := quarantiner{fsys: fsys, dir: dir, taken: names}
	for i, s := range segs {
		sc, err := scanSegment(s, i == len(segs)-1)
		if err != nil {
			return rep, err
		}
		if len(sc.ranges) == 0 {
			if i < len(segs)-1 {
				err = rep.checkSum(fsys, dir, s, sc.sum)
			}
			if err != nil {
				return rep, err
			}
			continue
		}
		last := i == len(segs)-1
		if last && mode == RepairTruncate {
			err = rep.cut(&q, s, sc.ranges)
		} else {
			err = rep.salvage(&q, s, sc.ranges, last)
		}
		if err == nil && !last {
			err = resum(fsys, dir, s)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// checkSum rewrites the sum file of sealed segment s, whose frames all
// validate and sum to sum, if it does not match: Repair cannot tell which
// bytes changed when every frame validates (a Repair interrupted between
// a skip frame and its sum file leaves exactly that), so it takes the
// segment as it is and says so in Resummed.
func (rep *RepairReport) checkSum(fsys vfs.FS, dir string, s *segment, sum uint32) error {
	want, ok, _, err := readSum(fsys, dir, s.name, s.base)
	if err != nil {
		return fmt.Errorf("commitlog: read the sum file of %s: %w", s.name, err)
	}
	if !ok || (want.length == s.size && want.crc == sum) {
		return nil
	}
	rep.Resummed = append(rep.Resummed, s.name)
	return resum(fsys, dir, s)
}

// resum rewrites the sum file of sealed segment s after its damage was
// overwritten by skip frames: its old sum vouched for bytes that are gone
// (sum.go). The file is synced, then its directory.
func resum(fsys vfs.FS, dir string, s *segment) error {
	crc, err := fileSum(s)
	if err == nil {
		err = writeSum(fsys, dir, s.name, s.base, s.size, crc)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("commitlog: rewrite the sum file of %s: %w", s.name, err)
	}
	return nil
}

// salvage overwrites each damaged range of s with a skip frame, except a
// torn tail of the last segment, which is cut.
func (rep *RepairReport) salvage(q *quarantiner, s *segment, ranges []DamagedRange, last bool) error {
	for _, r := range ranges {
		if r.Tail && last {
			return rep.cut(q, s, []DamagedRange{r})
		}
		if r.Length < FrameHeaderSize {
			// resync never delimits such a range (see there); refuse
			// rather than write a frame that does not fit.
			return fmt.Errorf("%w: segment %s: damaged range at %d is %d bytes, shorter than a frame header",
				ErrCorrupt, s.name, r.Pos, r.Length)
		}
		qname, err := q.save(s, r.Pos, r.Length)
		if err != nil {
			return err
		}
		if _, err := s.f.WriteAt(appendSkipFrame(nil, int(r.Length)), r.Offset); err != nil {
			return fmt.Errorf("commitlog: write skip frame in %s at %d: %w", s.name, r.Pos, err)
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("commitlog: sync %s after skip frame: %w", s.name, err)
		}
		rep.Ranges = append(rep.Ranges, RepairedRange{DamagedRange: r, Action: ActionSkip, Quarantine: qname})
		rep.BytesQuarantined += r.Length
		rep.BytesLost += r.Length
		rep.RecordsKept += r.RecordsAfter
	}
	return nil
}

// cut quarantines and truncates s from the start of ranges[0] to its end.
// The ranges are those of s from that one on, so the valid records between
// them are counted as lost.
func (rep *RepairReport) cut(q *quarantiner, s *segment, ranges []DamagedRange) error {
	r := RepairedRange{DamagedRange: ranges[0], Action: ActionCut}
	r.Length = int64(s.end() - r.Pos)
	r.RecordsAfter, r.BytesAfter = 0, 0
	for _, d := range ranges {
		r.RecordsLost += d.RecordsAfter
	}
	r.Tail = true
	var err error
	if r.Quarantine, err = q.save(s, r.Pos, r.Length); err != nil {
		return err
	}
	if err := cutSegment(s, r.Pos); err != nil {
		return err
	}
	rep.Ranges = append(rep.Ranges, r)
	rep.BytesQuarantined += r.Length
	rep.BytesLost += r.Length
	rep.RecordsLost += r.RecordsLost
	return nil
}

// quarantiner writes quarantine files, never replacing one: if Repair is
// interrupted while overwriting a range and run again, the second copy
// (of partly overwritten bytes) must not destroy the first.
type quarantiner struct {
	fsys  vfs.FS
	dir   string
	taken []string // names present in dir
}

// save copies n bytes of s from position at into a new quarantine file and
// makes it and its directory entry durable. It returns the file's name.
func (q *quarantiner) save(s *segment, at Pos, n int64) (string, error) {
	name := fmt.Sprintf("%s.damaged-%d", s.name, uint64(at))
	for i := 1; slices.Contains(q.taken, name); i++ {
		name = fmt.Sprintf("%s.damaged-%d.%d", s.name, uint64(at), i)
	}
	q.taken = append(q.taken, name)
	buf := make([]byte, n)
	if got, err := s.f.ReadAt(buf, HeaderSize+int64(at-s.base)); int64(got) < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", fmt.Errorf("commitlog: read %d damaged bytes of %s at %d: %w", n, s.name, at, err)
	}
	f, err := q.fsys.Create(path.Join(q.dir, name))
	if err != nil {
		return "", fmt.Errorf("commitlog: create quarantine file %s: %w", name, err)
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = q.fsys.SyncDir(q.dir)
	}
	if err != nil {
		return "", fmt.Errorf("commitlog: write quarantine file %s: %w", name, err)
	}
	return name, nil
}
