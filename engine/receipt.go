package engine

import (
	"encoding/base64"
	"encoding/binary"
	"unsafe"

	"github.com/hourglass-mq/hourglass/errs"
)

// A receipt names one lease: queue u16, offset u64, lease sequence u32 and
// a tag u64 that seals them with the group's id under the process's receipt
// key, so a receipt cannot be made up or carried over from an earlier
// process, and sequence numbers never meet an old receipt.
const receiptLen = 2 + 8 + 4 + 8

// ReceiptChars is the length of every receipt as a client sees it (base64
// URL encoding of receiptLen bytes, no padding): a string of another
// length is no receipt, which a caller may refuse before asking.
const ReceiptChars = (receiptLen*8 + 5) / 6

func (ids *idents) receiptTag(gid uint32, queue uint16, offset uint64, seq uint32) uint64 {
	return ids.receipts.Tag(offset, uint64(gid)<<32|uint64(seq)^uint64(queue)<<16)
}

func (ids *idents) encodeReceipt(gid uint32, queue uint16, offset uint64, seq uint32) string {
	var b [receiptLen]byte
	binary.BigEndian.PutUint16(b[:], queue)
	binary.BigEndian.PutUint64(b[2:], offset)
	binary.BigEndian.PutUint32(b[10:], seq)
	binary.BigEndian.PutUint64(b[14:], ids.receiptTag(gid, queue, offset, seq))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decodeReceipt parses a receipt of group gid and checks its tag.
func (ids *idents) decodeReceipt(gid uint32, s string) (queue uint16, offset uint64, seq uint32, err error) {
	// Decoded into an array: a consumer's acks are up to 1000 receipts a
	// request, and DecodeString allocated for each.
	var arr [receiptLen]byte
	b, derr := base64.RawURLEncoding.AppendDecode(arr[:0], unsafe.Slice(unsafe.StringData(s), len(s)))
	if derr != nil || len(b) != receiptLen {
		return 0, 0, 0, errs.New(errs.InvalidArgument, "receipt %q is malformed", s)
	}
	queue, offset, seq = binary.BigEndian.Uint16(b), binary.BigEndian.Uint64(b[2:]), binary.BigEndian.Uint32(b[10:])
	if binary.BigEndian.Uint64(b[14:]) != ids.receiptTag(gid, queue, offset, seq) {
		return 0, 0, 0, errs.New(errs.NotFound, "receipt %q is unknown or its lease has ended", s)
	}
	return queue, offset, seq, nil
}
