package main

import (
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// pairTitle names each pair's network side and its baseline in the report.
func pairTitle(c config, name string) (network, baseline string) {
	switch name {
	case "send":
		return fmt.Sprintf("HTTP, 1 message a request, %d producers", c.producers), fmt.Sprintf("`Send`, %d callers", c.producers)
	case "sendstream":
		return fmt.Sprintf("HTTP send stream, 1 message a `Send`, %d producers on one stream", c.producers), fmt.Sprintf("`Send`, %d callers", c.producers)
	case "batch":
		return fmt.Sprintf("HTTP, batches of %d, %d producers", c.batch, c.batchProducers), fmt.Sprintf("`SendBatch` of %d, %d callers", c.batch, c.batchProducers)
	case "rmqsend":
		return fmt.Sprintf("RocketMQ 5 gRPC send, %d senders on %d producers", c.rmqSenders, c.rmqProducers), fmt.Sprintf("`Send`, %d callers", c.rmqSenders)
	case "recv":
		return fmt.Sprintf("HTTP receive+ack requests (acks carried), %d consumers, max %d", c.consumers, c.max), fmt.Sprintf("`Receive` carrying acks, %d callers, max %d", c.consumers, c.max)
	case "stream":
		return fmt.Sprintf("HTTP streams, %d consumers, batches of up to %d", c.consumers, c.max), fmt.Sprintf("`Receive` carrying acks, %d callers, max %d", c.consumers, c.max)
	case "httpfloor":
		return fmt.Sprintf("HTTP, 1 message a request, %d producers", c.producers), fmt.Sprintf("bare net/http, canned answer, %d callers", c.producers)
	case "grpcfloor":
		return fmt.Sprintf("RocketMQ 5 gRPC send, %d senders on %d producers", c.rmqSenders, c.rmqProducers),
			fmt.Sprintf("bare gRPC `SendMessage`, canned answer, %d callers on %d connections", c.rmqSenders, c.rmqProducers)
	case "ackfloor":
		return fmt.Sprintf("RocketMQ 5 gRPC SimpleConsumer, %d receivers of %d, %d ackers", c.consumers, c.max, c.consumers),
			fmt.Sprintf("bare gRPC `AckMessage` of one entry, canned answer, %d callers on 1 connection", c.consumers)
	case "h2cfloor":
		return fmt.Sprintf("bare net/http, canned answer, %d callers", c.producers), fmt.Sprintf("the same over HTTP/2 cleartext, %d callers", c.producers)
	case "rmqrecv":
		acks := "acks after fdatasync"
		if c.earlyAcks {
			acks = "early acks"
		}
		return fmt.Sprintf("RocketMQ 5 gRPC SimpleConsumer, %d receivers of %d, %d ackers, %s", c.consumers, c.max, c.consumers, acks), fmt.Sprintf("`Receive` carrying acks, %d callers, max %d", c.consumers, c.max)
	}
	return name, ""
}

// medRange formats the median and range of xs.
func medRange(xs []float64, format string) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf(format+" ["+format+" – "+format+"]", med, s[0], s[len(s)-1])
}

// printReport writes the Markdown table of every pair.
func printReport(w io.Writer, c config, results map[string][]sample, took time.Duration) {
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	fmt.Fprintf(w, "netbench: %d runs, %v in all, commit %s, %s UTC; %d B bodies, send pairs %v each side, receive pairs %d messages each side\n\n",
		c.runs, took.Round(time.Second), strings.TrimSpace(string(commit)), time.Now().UTC().Format("2006-01-02 15:04"), c.body, c.duration, c.n)
	fmt.Fprintln(w, "| network side | msgs/s, median [range] | cores | baseline | msgs/s, median [range] | cores | ratio, median [range] | load average at each run |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, name := range c.only {
		ss := results[name]
		if len(ss) == 0 {
			continue
		}
		var base, netw, ratio, baseCores, netCores []float64
		var loads []string
		for _, s := range ss {
			base, netw, ratio = append(base, s.base), append(netw, s.net), append(ratio, s.net/s.base)
			baseCores, netCores = append(baseCores, s.baseCores), append(netCores, s.netCores)
			loads = append(loads, s.load)
		}
		nt, bt := pairTitle(c, name)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", nt, medRange(netw, "%.0f"), medRange(netCores, "%.2f"),
			bt, medRange(base, "%.0f"), medRange(baseCores, "%.2f"), medRange(ratio, "%.2f"), strings.Join(loads, ", "))
	}
}
