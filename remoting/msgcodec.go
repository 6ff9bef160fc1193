package remoting

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"sort"
	"strings"
)

// parseProperties decodes RocketMQ's properties string: name \x01 value
// \x02, repeated. An item without a separator is an error, not dropped.
func parseProperties(s string) (map[string]string, error) {
	props := map[string]string{}
	for _, item := range strings.Split(s, string(rune(propertySeparator))) {
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, string(rune(nameValueSeparator)))
		if !ok || k == "" {
			return nil, fmt.Errorf("property %q has no name-value separator", item)
		}
		props[k] = v
	}
	return props, nil
}

// formatProperties encodes props in RocketMQ's form, names sorted.
func formatProperties(props map[string]string) string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(nameValueSeparator)
		b.WriteString(props[k])
		b.WriteByte(propertySeparator)
	}
	return b.String()
}

// propertiesLen is len(formatProperties(props)), without building it.
func propertiesLen(props map[string]string) int {
	n := 0
	for k, v := range props {
		n += len(k) + len(v) + 2
	}
	return n
}

// batchItem is one message of a batch body.
type batchItem struct {
	flag  int32
	body  []byte
	props string
}

// decodeBatch decodes a SEND_BATCH_MESSAGE body: per message, int32 total
// size, int32 magic, int32 body CRC, int32 flag, int32 body length, body,
// int16 properties length, properties. Every length is checked against
// what is left.
func decodeBatch(b []byte, maxItems int) ([]batchItem, error) {
	var out []batchItem
	for len(b) > 0 {
		if len(out) >= maxItems {
			return nil, fmt.Errorf("more than %d messages in one batch", maxItems)
		}
		if len(b) < 20 {
			return nil, fmt.Errorf("message %d of the batch: %d bytes left, a message has at least 22", len(out), len(b))
		}
		total := int(int32(binary.BigEndian.Uint32(b)))
		if total < 22 || total > len(b) {
			return nil, fmt.Errorf("message %d of the batch: total size %d with %d bytes left", len(out), total, len(b))
		}
		m := b[:total]
		b = b[total:]
		it := batchItem{flag: int32(binary.BigEndian.Uint32(m[12:]))}
		blen := int(int32(binary.BigEndian.Uint32(m[16:])))
		if blen < 0 || 20+blen+2 > total {
			return nil, fmt.Errorf("message %d of the batch: body length %d does not fit its size %d", len(out), blen, total)
		}
		it.body = m[20 : 20+blen]
		plen := int(binary.BigEndian.Uint16(m[20+blen:]))
		if 22+blen+plen != total {
			return nil, fmt.Errorf("message %d of the batch: properties length %d does not fit its size %d", len(out), plen, total)
		}
		it.props = string(m[22+blen:])
		out = append(out, it)
	}
	return out, nil
}

// wireMessage is a message as a pull response carries it (RocketMQ's
// stored-message layout, version 1).
type wireMessage struct {
	queueID        int32
	flag           int32
	queueOffset    int64
	commitOffset   int64
	sysFlag        int32
	bornTimestamp  int64
	bornHost       net.IP
	bornPort       int32
	storeTimestamp int64
	storeHost      net.IP
	storePort      int32
	reconsumeTimes int32
	body           []byte
	topic          string
	props          string
}

// appendWire appends m in the stored-message layout to b.
func appendWire(b []byte, m *wireMessage) []byte {
	sys := m.sysFlag &^ (sysBornHostV6 | sysStoreHostV6)
	born, store := m.bornHost.To4(), m.storeHost.To4()
	if born == nil {
		born, sys = m.bornHost.To16(), sys|sysBornHostV6
	}
	if store == nil {
		store, sys = m.storeHost.To16(), sys|sysStoreHostV6
	}
	if born == nil {
		born, sys = net.IPv4zero.To4(), sys&^sysBornHostV6
	}
	if store == nil {
		store, sys = net.IPv4zero.To4(), sys&^sysStoreHostV6
	}
	size := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + len(born) + 4 + 8 + len(store) + 4 + 4 + 8 +
		4 + len(m.body) + 1 + len(m.topic) + 2 + len(m.props)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	magic := int32(messageMagicV1)
	b = binary.BigEndian.AppendUint32(b, uint32(magic))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(m.body)&0x7FFFFFFF)
	b = binary.BigEndian.AppendUint32(b, uint32(m.queueID))
	b = binary.BigEndian.AppendUint32(b, uint32(m.flag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.queueOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(m.commitOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(sys))
	b = binary.BigEndian.AppendUint64(b, uint64(m.bornTimestamp))
	b = append(b, born...)
	b = binary.BigEndian.AppendUint32(b, uint32(m.bornPort))
	b = binary.BigEndian.AppendUint64(b, uint64(m.storeTimestamp))
	b = append(b, store...)
	b = binary.BigEndian.AppendUint32(b, uint32(m.storePort))
	b = binary.BigEndian.AppendUint32(b, uint32(m.reconsumeTimes))
	b = binary.BigEndian.AppendUint64(b, 0) // prepared transaction offset
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.body)))
	b = append(b, m.body...)
	b = append(b, byte(len(m.topic)))
	b = append(b, m.topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.props)))
	return append(b, m.props...)
}

// splitHost parses "ip:port" into its parts; a bad address is 0.0.0.0:0.
func splitHost(addr string) (net.IP, int32) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return net.IPv4zero, 0
	}
	ip := net.ParseIP(h)
	if ip == nil {
		ip = net.IPv4zero
	}
	var port int32
	fmt.Sscanf(p, "%d", &port)
	return ip, port
}
