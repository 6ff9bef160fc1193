package remoting

import "fmt"

// maxConnRegistry bounds what one connection's heartbeats keep in the
// registry, in bytes of names, client IDs and subscriptions (each entry
// counted with entryOverhead more): a client instance heartbeats for
// every producer and consumer of its process, a few KiB, and a client
// that names made-up groups without end is refused past it rather than
// grow the broker's memory.
const maxConnRegistry = 1 << 20

// entryOverhead is what an entry of the registry costs besides its
// strings (map slots, headers), roughly.
const entryOverhead = 64

func memberSize(group, id string, subs []subscriptionData) int {
	n := entryOverhead + len(group) + len(id)
	for _, sd := range subs {
		n += entryOverhead + len(sd.Topic) + len(sd.SubString) + len(sd.ExpressionType)
	}
	return n
}

func producerSize(group, id string) int { return entryOverhead + len(group) + len(id) }

// fitsLocked checks that recording hb keeps c within maxConnRegistry:
// what c holds, less the entries hb replaces, plus hb's (the last of a
// group named twice). r.mu held.
func (r *registry) fitsLocked(c *conn, hb *heartbeatData) error {
	n := r.used[c]
	seen := map[string]bool{}
	for i := len(hb.ConsumerDataSet) - 1; i >= 0; i-- {
		cd := hb.ConsumerDataSet[i]
		if seen[cd.GroupName] {
			continue
		}
		seen[cd.GroupName] = true
		n += memberSize(cd.GroupName, hb.ClientID, cd.SubscriptionDataSet)
		if old, ok := r.consumers[cd.GroupName][hb.ClientID]; ok && old.c == c {
			n -= old.size
		}
	}
	clear(seen)
	for _, pd := range hb.ProducerDataSet {
		if seen[pd.GroupName] {
			continue
		}
		seen[pd.GroupName] = true
		if old, ok := r.producers[pd.GroupName][hb.ClientID]; !ok || old.c != c {
			n += producerSize(pd.GroupName, hb.ClientID)
		}
	}
	if n > maxConnRegistry {
		return fmt.Errorf("a connection's heartbeats keep at most %d bytes of groups and subscriptions; this one would keep %d", maxConnRegistry, n)
	}
	return nil
}

// dropConsumerLocked forgets a consumer group's member, and the group
// once it has none. r.mu held.
func (r *registry) dropConsumerLocked(group, id string) {
	ms := r.consumers[group]
	if m, ok := ms[id]; ok {
		r.used[m.c] -= m.size
		r.unindexLocked(m.c, regKey{group: group, id: id})
		delete(ms, id)
	}
	if len(ms) == 0 {
		delete(r.consumers, group)
	}
}

// dropProducerLocked forgets a producer group's client, and the group
// once it has none. r.mu held.
func (r *registry) dropProducerLocked(group, id string) {
	ps := r.producers[group]
	if pe, ok := ps[id]; ok {
		r.used[pe.c] -= producerSize(group, id)
		r.unindexLocked(pe.c, regKey{producer: true, group: group, id: id})
		delete(ps, id)
	}
	if len(ps) == 0 {
		delete(r.producers, group)
	}
}

// regKey names an entry of the registry: a consumer or producer group's
// client.
type regKey struct {
	producer  bool
	group, id string
}

// indexLocked records that c registered k. r.mu held.
func (r *registry) indexLocked(c *conn, k regKey) {
	keys := r.keys[c]
	if keys == nil {
		keys = map[regKey]struct{}{}
		r.keys[c] = keys
	}
	keys[k] = struct{}{}
}

// unindexLocked forgets that c registered k. r.mu held.
func (r *registry) unindexLocked(c *conn, k regKey) {
	if keys := r.keys[c]; keys != nil {
		delete(keys, k)
		if len(keys) == 0 {
			delete(r.keys, c)
		}
	}
}
