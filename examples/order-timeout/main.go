// Command order-timeout is the "close the unpaid order after 30 minutes"
// flow, written against the official RocketMQ 5 Go client and PostgreSQL,
// pointed at hourglass. Nothing in it knows about hourglass: the broker's
// endpoint is the only thing that changes.
//
//	order-timeout place  creates orders (UNPAID) and sends each a delayed
//	                     timeout message with SetDelayTimestamp
//	order-timeout pay    marks some orders PAID and recalls their timeouts
//	order-timeout close  consumes timeouts and closes orders still UNPAID
//	order-timeout demo   all three in one process
//
// The close is a conditional UPDATE ... WHERE status = 'UNPAID', so a
// duplicate delivery, or a timeout whose recall lost a race with its
// delivery, changes nothing: a paid order is never closed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/jackc/pgx/v5"
)

// config holds the command-line settings shared by every step.
type config struct {
	endpoint  string
	plaintext bool
	pg        string
	topic     string
	group     string
	orders    int
	timeout   time.Duration
	payEvery  int
	untilDone bool
	maxWait   time.Duration
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("order-timeout: ")
	var c config
	fs := flag.NewFlagSet("order-timeout", flag.ExitOnError)
	fs.StringVar(&c.endpoint, "endpoint", "127.0.0.1:8081", "the broker's RocketMQ 5 gRPC endpoint (hourglass serve --grpc-listen)")
	fs.BoolVar(&c.plaintext, "plaintext", false, "connect without TLS (hourglass serve --grpc-plaintext)")
	fs.StringVar(&c.pg, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL connection URL")
	fs.StringVar(&c.topic, "topic", "order-timeouts", "topic of the timeout messages")
	fs.StringVar(&c.group, "group", "order-closer", "consumer group of the closer")
	fs.IntVar(&c.orders, "orders", 10, "place: how many orders to create")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "place: how long an order may stay unpaid")
	fs.IntVar(&c.payEvery, "pay-every", 3, "pay: pay every n-th unpaid order (by id)")
	fs.BoolVar(&c.untilDone, "until-done", false, "close: stop when no order is UNPAID any more")
	fs.DurationVar(&c.maxWait, "max-wait", time.Hour, "close: give up after this long")
	if len(os.Args) < 2 {
		log.Fatal("usage: order-timeout place|pay|close|demo [flags]")
	}
	step := os.Args[1]
	fs.Parse(os.Args[2:])
	if c.plaintext {
		rmq.EnableSsl = false
	}
	// The official client logs to a file under the home folder by default.
	os.Setenv("mq.consoleAppender.enabled", "true")
	os.Setenv("rocketmq.client.logLevel", "error")
	rmq.ResetLogger()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, err := pgx.Connect(ctx, c.pg)
	if err != nil {
		log.Fatalf("PostgreSQL: %v", err)
	}
	defer db.Close(context.Background())
	if err := createSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	switch step {
	case "place":
		err = place(ctx, c, db)
	case "pay":
		err = pay(ctx, c, db)
	case "close":
		err = closeUnpaid(ctx, c, db)
	case "demo":
		c.untilDone = true
		if err = place(ctx, c, db); err == nil {
			if err = pay(ctx, c, db); err == nil {
				err = closeUnpaid(ctx, c, db)
			}
		}
	default:
		err = fmt.Errorf("unknown step %q: want place, pay, close or demo", step)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// createSchema makes the orders table. timeout_at is when the order's
// timeout is due; recall_handle is what the broker returned for it.
func createSchema(ctx context.Context, db *pgx.Conn) error {
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id            bigserial PRIMARY KEY,
		status        text NOT NULL CHECK (status IN ('UNPAID', 'PAID', 'CLOSED')),
		created_at    timestamptz NOT NULL DEFAULT now(),
		timeout_at    timestamptz NOT NULL,
		closed_at     timestamptz,
		message_id    text,
		recall_handle text)`)
	if err != nil {
		return fmt.Errorf("create table orders: %w", err)
	}
	return nil
}

func credentialsNone() *credentials.SessionCredentials { return &credentials.SessionCredentials{} }

// startProducer starts a producer of c.topic; its Start waits for the
// broker's settings.
func startProducer(c config) (rmq.Producer, error) {
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: c.endpoint, Credentials: credentialsNone()}, rmq.WithTopics(c.topic))
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("producer start: %w", err)
	}
	return p, nil
}

// place creates c.orders orders and sends each its timeout. The order row
// is written first: a timeout for an order that does not exist would be
// meaningless, while an order whose send failed is reported and stays
// UNPAID for an operator (a real shop would retry the send).
func place(ctx context.Context, c config, db *pgx.Conn) error {
	p, err := startProducer(c)
	if err != nil {
		return err
	}
	defer p.GracefulStop()
	for i := 0; i < c.orders; i++ {
		due := time.Now().Add(c.timeout).Truncate(time.Millisecond)
		var id int64
		if err := db.QueryRow(ctx, `INSERT INTO orders (status, timeout_at) VALUES ('UNPAID', $1) RETURNING id`, due).Scan(&id); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		msg := &rmq.Message{Topic: c.topic, Body: []byte(strconv.FormatInt(id, 10))}
		msg.SetKeys(fmt.Sprintf("order-%d", id))
		msg.SetDelayTimestamp(due)
		rs, err := p.Send(ctx, msg)
		if err != nil {
			return fmt.Errorf("send the timeout of order %d: %w", id, err)
		}
		if _, err := db.Exec(ctx, `UPDATE orders SET message_id = $2, recall_handle = $3 WHERE id = $1`,
			id, rs[0].MessageID, rs[0].RecallHandle); err != nil {
			return fmt.Errorf("record the timeout of order %d: %w", id, err)
		}
	}
	log.Printf("placed %d orders, timeouts due in %v", c.orders, c.timeout)
	return nil
}

// pay marks every c.payEvery-th unpaid order PAID and recalls its timeout.
// The UPDATE comes first: once the order is PAID, the closer's conditional
// UPDATE cannot close it, whatever happens to the recall.
func pay(ctx context.Context, c config, db *pgx.Conn) error {
	p, err := startProducer(c)
	if err != nil {
		return err
	}
	defer p.GracefulStop()
	rows, err := db.Query(ctx, `UPDATE orders SET status = 'PAID'
		WHERE status = 'UNPAID' AND id % $1 = 0 RETURNING id, coalesce(recall_handle, '')`, c.payEvery)
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	type paid struct {
		id     int64
		handle string
	}
	var all []paid
	for rows.Next() {
		var o paid
		if err := rows.Scan(&o.id, &o.handle); err != nil {
			return err
		}
		all = append(all, o)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	recalled := 0
	for _, o := range all {
		if o.handle == "" {
			continue
		}
		if _, err := p.Recall(ctx, c.topic, o.handle); err != nil {
			// Already delivered, or the broker lost the race: harmless,
			// since the order is PAID and the close is conditional.
			log.Printf("recall of order %d's timeout: %v", o.id, err)
			continue
		}
		recalled++
	}
	log.Printf("paid %d orders, recalled %d timeouts", len(all), recalled)
	return nil
}

// closeUnpaid receives timeouts and closes orders that are still UNPAID.
// A message is acked only after its UPDATE committed, so a crash of the
// closer or the broker redelivers it, and the UPDATE is idempotent.
func closeUnpaid(ctx context.Context, c config, db *pgx.Conn) error {
	sc, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: c.endpoint, ConsumerGroup: c.group, Credentials: credentialsNone()},
		rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{c.topic: rmq.SUB_ALL}))
	if err != nil {
		return err
	}
	if err := sc.Start(); err != nil {
		return fmt.Errorf("consumer start: %w", err)
	}
	defer sc.GracefulStop()
	deadline := time.Now().Add(c.maxWait)
	closed, ignored := 0, 0
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if c.untilDone {
			var unpaid int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'UNPAID'`).Scan(&unpaid); err != nil {
				return err
			}
			if unpaid == 0 {
				log.Printf("closed %d orders (%d timeouts found nothing to close); none is unpaid", closed, ignored)
				return nil
			}
		}
		mvs, err := sc.Receive(ctx, 16, 30*time.Second)
		if err != nil {
			var st *rmq.ErrRpcStatus
			if errors.As(err, &st) && st.Code == int32(pb.Code_MESSAGE_NOT_FOUND) { // an empty long poll
				continue
			}
			log.Printf("receive: %v", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, mv := range mvs {
			id, err := strconv.ParseInt(string(mv.GetBody()), 10, 64)
			if err != nil {
				log.Printf("message %s: not an order id: %q", mv.GetMessageId(), mv.GetBody())
			} else {
				tag, err := db.Exec(ctx, `UPDATE orders SET status = 'CLOSED', closed_at = now()
					WHERE id = $1 AND status = 'UNPAID'`, id)
				if err != nil {
					return fmt.Errorf("close order %d: %w", id, err)
				}
				if tag.RowsAffected() == 1 {
					closed++
				} else {
					ignored++
				}
			}
			if err := sc.Ack(ctx, mv); err != nil {
				log.Printf("ack %s: %v (it will be delivered again; the close is idempotent)", mv.GetMessageId(), err)
			}
		}
	}
	if c.untilDone {
		return fmt.Errorf("orders still unpaid after %v", c.maxWait)
	}
	log.Printf("closed %d orders (%d timeouts found nothing to close)", closed, ignored)
	return nil
}
