package kafkamode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errSetup marks an error no retry can cure: the worker's own settings
// are refused (by franz-go, or by the brokers' limits). Run returns it
// rather than leave the group and join again for ever.
var errSetup = errors.New("kafka mode: bad setting")

// permanent reports whether err, from a session, ends the worker.
func permanent(err error) bool {
	return errors.Is(err, errSetup) || errors.Is(err, kerr.ProducerFenced) ||
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
	adm := kadm.NewClient(w.aux)
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
