package remoting

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/errs"
)

// heartbeatData is a HEART_BEAT body (RocketMQ's HeartbeatData).
type heartbeatData struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []struct {
		GroupName           string             `json:"groupName"`
		MessageModel        string             `json:"messageModel"`
		SubscriptionDataSet []subscriptionData `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

type subscriptionData struct {
	Topic          string `json:"topic"`
	SubString      string `json:"subString"`
	ExpressionType string `json:"expressionType"`
}

// producerEntry is a producer group's client: the connection it
// heartbeats on, and who the heartbeat was signed as (nil without ACL):
// a transaction is checked back only with a producer its principal
// could have sent it as.
type producerEntry struct {
	c *conn
	p *access.Principal
}

// member is one client of a group, on the connection it heartbeats on.
type member struct {
	c    *conn
	subs map[string]subscriptionData // by topic
	size int                         // counted against c's maxConnRegistry
}

// registry holds the clients of each consumer and producer group, as
// their heartbeats said, until they unregister or their connection ends.
// A change of a consumer group's members is told to each of them
// (NOTIFY_CONSUMER_IDS_CHANGED), so they rebalance at once.
type registry struct {
	notify func(group string, to []*conn)

	mu        sync.Mutex
	consumers map[string]map[string]*member       // group -> client ID -> member
	producers map[string]map[string]producerEntry // group -> client ID -> its connection
	// used is what each connection's entries count against
	// maxConnRegistry, and keys the entries themselves, so that a
	// connection's end costs what it registered (registry_budget.go).
	used map[*conn]int
	keys map[*conn]map[regKey]struct{}
}

func newRegistry(notify func(string, []*conn)) *registry {
	return &registry{notify: notify, consumers: map[string]map[string]*member{}, producers: map[string]map[string]producerEntry{},
		used: map[*conn]int{}, keys: map[*conn]map[regKey]struct{}{}}
}

// heartbeat answers HEART_BEAT: it records the client's groups, and
// creates each consumer group's retry topic, as RocketMQ does. A consumer
// group that subscribes with an expression other than TAG (SQL92), or whose
// retry topic's name would be invalid, is refused, and the answer says so; the heartbeat's other groups and its
// producers are recorded all the same: one client instance (the clients'
// default) heartbeats for every producer and consumer of a process, and one
// SQL92 subscription must not cut the others off their rebalancing and
// transaction checks.
func (s *Server) heartbeat(c *conn, req *Command) *Command {
	var hb heartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return badRequest(errs.New(errs.InvalidArgument, "heartbeat body is not RocketMQ's heartbeat JSON: %v", err))
	}
	if hb.ClientID == "" {
		return badRequest(errs.New(errs.InvalidArgument, "heartbeat has no clientID"))
	}
	var refused, invalid []string
	kept := hb.ConsumerDataSet[:0]
	for _, cd := range hb.ConsumerDataSet {
		if err := checkTopic(retryPrefix + cd.GroupName); err != nil {
			// Its retry topic cannot be: that group only is refused.
			invalid = append(invalid, fmt.Sprintf("group %q: %v", cd.GroupName, err))
			continue
		}
		if sd, ok := unsupportedSub(cd.SubscriptionDataSet); ok {
			refused = append(refused, fmt.Sprintf("group %q subscribes to %q with %s", cd.GroupName, sd.Topic, sd.ExpressionType))
			continue
		}
		kept = append(kept, cd)
	}
	hb.ConsumerDataSet = kept
	for _, cd := range hb.ConsumerDataSet {
		if strings.EqualFold(cd.MessageModel, "CLUSTERING") || cd.MessageModel == "" {
			if err := s.ensureTopic(retryPrefix + cd.GroupName); err != nil && errs.CodeOf(err) != errs.AlreadyExists {
				return engineErr(err, respTopicNotExist)
			}
		}
	}
	changed, err := s.clients.heartbeat(c, &hb, req.principal)
	if err != nil {
		return badRequest(err)
	}
	for _, g := range changed {
		s.clients.notifyMembers(g)
	}
	if len(invalid) > 0 {
		return badRequest(errs.New(errs.InvalidArgument, "%s (not registered; the heartbeat's other groups are)",
			strings.Join(append(invalid, refused...), "; ")))
	}
	if len(refused) > 0 {
		return errResp(respSubscriptionParse, "only TAG filtering is supported by hourglass: "+strings.Join(refused, "; ")+
			" (not registered; the heartbeat's other groups are)")
	}
	return okResp(nil)
}

// checkClientConfig answers CHECK_CLIENT_CONFIG, which the Java client
// sends as a consumer starts, for each subscription not by TAG: a SQL92
// one is refused, saying so, and the consumer's start fails with that
// reason (as against a RocketMQ broker without property filtering), not
// with "request code not supported".
func (s *Server) checkClientConfig(req *Command) *Command {
	var body struct {
		Group            string           `json:"group"`
		SubscriptionData subscriptionData `json:"subscriptionData"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return badRequest(errs.New(errs.InvalidArgument, "CHECK_CLIENT_CONFIG body is not RocketMQ's CheckClientRequestBody JSON: %v", err))
	}
	if sd, ok := unsupportedSub([]subscriptionData{body.SubscriptionData}); ok {
		return errResp(respSubscriptionParse, fmt.Sprintf("only TAG filtering is supported by hourglass: group %q subscribes to %q with %s",
			body.Group, sd.Topic, sd.ExpressionType))
	}
	return okResp(nil)
}

// unsupportedSub returns a subscription whose expression type is not TAG.
func unsupportedSub(subs []subscriptionData) (subscriptionData, bool) {
	for _, sd := range subs {
		if sd.ExpressionType != "" && !strings.EqualFold(sd.ExpressionType, "TAG") {
			return sd, true
		}
	}
	return subscriptionData{}, false
}

// heartbeat records hb and returns the consumer groups whose members
// changed; it records nothing when hb would take c past maxConnRegistry.
func (r *registry) heartbeat(c *conn, hb *heartbeatData, p *access.Principal) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fitsLocked(c, hb); err != nil {
		return nil, err
	}
	var changed []string
	for _, cd := range hb.ConsumerDataSet {
		ms := r.consumers[cd.GroupName]
		if ms == nil {
			ms = map[string]*member{}
			r.consumers[cd.GroupName] = ms
		}
		subs := map[string]subscriptionData{}
		for _, sd := range cd.SubscriptionDataSet {
			subs[sd.Topic] = sd
		}
		old, ok := ms[hb.ClientID]
		if !ok || old.c != c {
			changed = append(changed, cd.GroupName)
		}
		key := regKey{group: cd.GroupName, id: hb.ClientID}
		if ok {
			r.used[old.c] -= old.size
			r.unindexLocked(old.c, key)
		}
		size := memberSize(cd.GroupName, hb.ClientID, cd.SubscriptionDataSet)
		ms[hb.ClientID] = &member{c: c, subs: subs, size: size}
		r.used[c] += size
		r.indexLocked(c, key)
	}
	for _, pd := range hb.ProducerDataSet {
		ps := r.producers[pd.GroupName]
		if ps == nil {
			ps = map[string]producerEntry{}
			r.producers[pd.GroupName] = ps
		}
		key := regKey{producer: true, group: pd.GroupName, id: hb.ClientID}
		if old, ok := ps[hb.ClientID]; ok {
			r.used[old.c] -= producerSize(pd.GroupName, hb.ClientID)
			r.unindexLocked(old.c, key)
		}
		ps[hb.ClientID] = producerEntry{c: c, p: p}
		r.used[c] += producerSize(pd.GroupName, hb.ClientID)
		r.indexLocked(c, key)
	}
	return changed, nil
}

// unregister answers UNREGISTER_CLIENT.
func (s *Server) unregister(c *conn, req *Command) *Command {
	id := req.ExtFields["clientID"]
	var changed []string
	s.clients.mu.Lock()
	if g := req.ExtFields["consumerGroup"]; g != "" {
		if m, ok := s.clients.consumers[g][id]; ok && m.c == c {
			s.clients.dropConsumerLocked(g, id)
			changed = append(changed, g)
		}
	}
	if g := req.ExtFields["producerGroup"]; g != "" {
		if pe, ok := s.clients.producers[g][id]; ok && pe.c == c {
			s.clients.dropProducerLocked(g, id)
		}
	}
	s.clients.mu.Unlock()
	for _, g := range changed {
		s.clients.notifyMembers(g)
	}
	return okResp(nil)
}

// dropConn forgets every client that heartbeated on c.
func (r *registry) dropConn(c *conn) {
	var changed []string
	r.mu.Lock()
	for k := range r.keys[c] {
		if k.producer {
			if pe, ok := r.producers[k.group][k.id]; ok && pe.c == c {
				r.dropProducerLocked(k.group, k.id)
			}
		} else if m, ok := r.consumers[k.group][k.id]; ok && m.c == c {
			r.dropConsumerLocked(k.group, k.id)
			changed = append(changed, k.group)
		}
	}
	delete(r.keys, c)
	delete(r.used, c)
	r.mu.Unlock()
	for _, g := range changed {
		r.notifyMembers(g)
	}
}

// notifyMembers tells each member of group that its members changed.
func (r *registry) notifyMembers(group string) {
	r.mu.Lock()
	var to []*conn
	seen := map[*conn]bool{}
	for _, m := range r.consumers[group] {
		if !seen[m.c] {
			seen[m.c] = true
			to = append(to, m.c)
		}
	}
	r.mu.Unlock()
	r.notify(group, to)
}

func (s *Server) notifyGroup(group string, to []*conn) {
	for _, c := range to {
		c.noticeChanged(group)
	}
}

// members returns a group's client IDs, sorted.
func (r *registry) members(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.consumers[group]))
	for id := range r.consumers[group] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// subscription returns what a group subscribed to on a topic, as some
// member's heartbeat said.
func (r *registry) subscription(group, topic string) (subscriptionData, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.consumers[group] {
		if sd, ok := m.subs[topic]; ok {
			return sd, true
		}
	}
	return subscriptionData{}, false
}

// producer returns a connection of a client of the producer group; nil
// if none.
func (r *registry) producer(group string) *conn {
	return r.producerThat(group, func(*access.Principal) bool { return true })
}

// producerThat returns a connection of a client of the producer group
// whose heartbeat's principal may(do what is asked); nil if none. Without
// ACL (no principal) any client of the group may.
func (r *registry) producerThat(group string, may func(*access.Principal) bool) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pe := range r.producers[group] {
		if pe.p == nil || may(pe.p) {
			return pe.c
		}
	}
	return nil
}

// consumerList answers GET_CONSUMER_LIST_BY_GROUP.
func (s *Server) consumerList(req *Command) *Command {
	body, _ := json.Marshal(map[string][]string{"consumerIdList": s.clients.members(req.ExtFields["consumerGroup"])})
	return &Command{Code: respSuccess, Body: body}
}

// dlqTopicOf is the dead-letter topic of a consumer group.
func dlqTopicOf(group string) string { return dlqPrefix + group }
