package kafkamode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errSetup marks an error no retry can cure: the worker's own settings
// are refused (by franz-go, or by the brokers' limits). Run returns it
// rather than leave the group and join again for ever.
var errSetup = errors.New("kafka mode: bad setting")

// permanent reports whether err, from a session, ends the worker. A
// fenced transactional ID is decided later (checkFenced).
func permanent(err error) bool {
	return errors.Is(err, errSetup) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.InvalidSessionTimeout) || errors.Is(err, kerr.InvalidTransactionTimeout)
}

// checkBrokerLimits compares the session and transaction timeouts with
// the brokers' allowed ranges (group.min.session.timeout.ms,
// group.max.session.timeout.ms, transaction.max.timeout.ms): outside them
// the group join or every transaction is refused, and the worker would
// retry for ever without forwarding anything. Brokers that do not let
// their configuration be described are not checked.
func (w *Worker) checkBrokerLimits(ctx context.Context) error {
	adm := w.ses.admin()
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		w.cfg.Logger.Debug("cannot list the brokers; timeouts not checked", "err", err)
		return nil
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...) // none named: the dynamic defaults only
	if err != nil {
		w.cfg.Logger.Debug("cannot describe the brokers' configuration; timeouts not checked", "err", err)
		return nil
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			v, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil {
				continue
			}
			switch {
			case c.Key == "group.min.session.timeout.ms" && ms(w.cfg.SessionTimeout) < v,
				c.Key == "group.max.session.timeout.ms" && ms(w.cfg.SessionTimeout) > v:
				return fmt.Errorf("%w: session timeout %v is outside the brokers' range (%s=%d ms)", errSetup, w.cfg.SessionTimeout, c.Key, v)
			case c.Key == "transaction.max.timeout.ms" && ms(w.cfg.TxnTimeout) > v:
				return fmt.Errorf("%w: transaction timeout %v is above the brokers' %s=%d ms", errSetup, w.cfg.TxnTimeout, c.Key, v)
			}
		}
	}
	return nil
}

// checkStateTopic refuses a state topic that deletes old records: with
// cleanup.policy delete (the broker's default for a topic someone created
// beforehand) or compact,delete, a marker of a message forwarded out of
// order, or the latest snapshot, is deleted after retention.ms while it
// is still needed, and a worker that takes the partition over forwards
// the message again. A topic that keeps everything (retention.ms and
// retention.bytes -1) is accepted too.
//
// It also refuses a delay topic that is compacted: compaction keeps only
// the latest record of each key, so of two pending messages with one key
// (order-123 sent twice) the first would be deleted before it is due.
func (w *Worker) checkStateTopic(ctx context.Context) error {
	delay, err := w.topicConfig(ctx, w.cfg.DelayTopic)
	if err != nil {
		return err
	}
	if strings.Contains(delay["cleanup.policy"], "compact") {
		return fmt.Errorf("%w: delay topic %s has cleanup.policy=%s: compaction would delete pending messages that share a key; "+
			"use cleanup.policy=delete", errSetup, w.cfg.DelayTopic, delay["cleanup.policy"])
	}
	conf, err := w.topicConfig(ctx, w.cfg.StateTopic)
	if err != nil {
		return err
	}
	if conf["cleanup.policy"] == "compact" || conf["retention.ms"] == "-1" && conf["retention.bytes"] == "-1" {
		return nil
	}
	return fmt.Errorf("%w: state topic %s has cleanup.policy=%s (retention.ms=%s): it would delete progress markers still needed; "+
		"set cleanup.policy=compact on it (the worker creates it so)", errSetup, w.cfg.StateTopic, conf["cleanup.policy"], conf["retention.ms"])
}

// topicConfig returns the configuration of topic, name to value.
func (w *Worker) topicConfig(ctx context.Context, topic string) (map[string]string, error) {
	rcs, err := w.ses.admin().DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe the config of topic %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil, fmt.Errorf("describe the config of topic %s: %w", topic, errors.Join(err, rc.Err))
	}
	conf := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			conf[c.Key] = *c.Value
		}
	}
	return conf, nil
}
