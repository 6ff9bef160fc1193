package remoting

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// TestOffsetRequests: max, min, search by time and earliest time answer
// from the queue; a committed offset is read back, and a group with none
// starts at 0.
func TestOffsetRequests(t *testing.T) {
	b := startTest(t, nil)
	if err := b.eng.CreateTopic("log", engine.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	var visible []int64
	for i := 0; i < 5; i++ {
		if _, err := b.eng.Send(context.Background(), message.Message{Topic: "log", Body: []byte{byte(i)}}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		signal := b.eng.VisibleSignal() // before the look: a later change wakes us
		if b.srv.queueLen("log", 0) == 5 {
			break
		}
		<-signal
	}
	vs, err := b.eng.ReadQueue("log", 0, 0, 5)
	if err != nil || len(vs) != 5 {
		t.Fatal(vs, err)
	}
	for _, v := range vs {
		visible = append(visible, v.Visible)
	}
	q := map[string]string{"topic": "log", "queueId": "0"}
	ext := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range q {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	check := func(code int32, fields map[string]string, key, want string) {
		t.Helper()
		resp := b.request(t, &Command{Code: code, ExtFields: fields})
		if resp.Code != respSuccess || resp.ExtFields[key] != want {
			t.Fatalf("code %d %v: %d %q %v, want %s=%s", code, fields, resp.Code, resp.Remark, resp.ExtFields, key, want)
		}
	}
	check(codeGetMaxOffset, q, "offset", "5")
	check(codeGetMinOffset, q, "offset", "0")
	check(codeGetEarliestMsgTime, q, "timestamp", strconv.FormatInt(visible[0], 10))
	first := 0 // the first offset visible at or after visible[2]
	for visible[first] < visible[2] {
		first++
	}
	check(codeSearchOffsetByTime, ext(map[string]string{"timestamp": strconv.FormatInt(visible[2], 10)}), "offset", strconv.Itoa(first))
	check(codeSearchOffsetByTime, ext(map[string]string{"timestamp": strconv.FormatInt(visible[4]+1, 10)}), "offset", "5")
	check(codeSearchOffsetByTime, ext(map[string]string{"timestamp": "0"}), "offset", "0")
	check(codeQueryConsumerOffset, ext(map[string]string{"consumerGroup": "fresh"}), "offset", "0")
	if resp := b.request(t, &Command{Code: codeQueryConsumerOffset, ExtFields: ext(map[string]string{"consumerGroup": "fresh", "setZeroIfNotFound": "false"})}); resp.Code != respQueryNotFound {
		t.Fatalf("setZeroIfNotFound=false: %d", resp.Code)
	}
	check(codeUpdateConsumerOffset, ext(map[string]string{"consumerGroup": "g", "commitOffset": "3"}), "", "")
	check(codeQueryConsumerOffset, ext(map[string]string{"consumerGroup": "g"}), "offset", "3")
}

// TestOffsetsFileDamaged: a damaged offsets file is refused with an error
// that says so, not read as empty (which would send every group back to 0).
func TestOffsetsFileDamaged(t *testing.T) {
	dir := t.TempDir()
	st, err := openOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	gen, _ := st.set(offsetKey{"g", "t", 1}, 42)
	if err := st.commit(gen); err != nil {
		t.Fatal(err)
	}
	st2, err := openOffsets(dir)
	if off, ok := st2.get(offsetKey{"g", "t", 1}); err != nil || !ok || off != 42 {
		t.Fatalf("reopened: %d %v %v", off, ok, err)
	}
	p := filepath.Join(dir, offsetsFile)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o600)
	if _, err := openOffsets(dir); err == nil {
		t.Fatal("a damaged offsets file was accepted")
	}
}

// TestOffsetsSyncTheLogFirst: a flush of the consumer offsets makes the
// engine's log durable after it took the offsets and before it writes
// them (engine invariant E21: a queue entry can be visible before its fire
// record is durable); when that sync fails the file keeps what it held,
// and the commit reports the failure.
func TestOffsetsSyncTheLogFirst(t *testing.T) {
	dir := t.TempDir()
	st, err := openOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := offsetKey{group: "g", topic: "t", queue: 0}
	var synced []int64 // the file's offset at each sync of the log
	fileOffset := func() int64 {
		again, err := openOffsets(dir)
		if err != nil {
			t.Fatal(err)
		}
		off, ok := again.get(k)
		if !ok {
			return -1
		}
		return off
	}
	st.syncLog = func() error {
		synced = append(synced, fileOffset())
		return nil
	}
	gen, err := st.set(k, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.commit(gen); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != -1 {
		t.Fatalf("log syncs saw the file at %v, want one sync before offset 7 was written", synced)
	}
	if got := fileOffset(); got != 7 {
		t.Fatalf("file holds %d, want 7", got)
	}
	st.syncLog = func() error { return errors.New("fdatasync: input/output error") }
	if gen, err = st.set(k, 9); err != nil {
		t.Fatal(err)
	}
	if err := st.commit(gen); err == nil || !strings.Contains(err.Error(), "fdatasync") {
		t.Fatalf("commit with a failing log sync: %v", err)
	}
	if got := fileOffset(); got != 7 {
		t.Fatalf("after a failed log sync the file holds %d, want 7 still", got)
	}
}

// TestOffsetSetTwiceIsDurableBeforeItsCommit: an offset a pull carried
// (set in memory, made durable by the next flush) and then committed
// with UPDATE_CONSUMER_OFFSET at the same value is in the file when that
// commit returns: the commit is answered only once it is durable, even
// though the value did not change.
func TestOffsetSetTwiceIsDurableBeforeItsCommit(t *testing.T) {
	dir := t.TempDir()
	st, err := openOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := offsetKey{group: "g", topic: "t", queue: 0}
	if _, err := st.set(k, 7); err != nil { // a pull's commit offset: no wait
		t.Fatal(err)
	}
	gen, err := st.set(k, 7) // UPDATE_CONSUMER_OFFSET, the same value
	if err != nil {
		t.Fatal(err)
	}
	if err := st.commit(gen); err != nil {
		t.Fatal(err)
	}
	again, err := openOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := again.get(k); !ok || off != 7 {
		t.Fatalf("after the commit returned the file holds %d (%v), want 7", off, ok)
	}
	// Once durable, setting the same value again needs no write.
	if gen2, _ := st.set(k, 7); gen2 > gen {
		t.Fatalf("an unchanged durable offset asks for generation %d, past %d", gen2, gen)
	}
}
