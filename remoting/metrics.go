package remoting

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestNames names the request codes hourglass serves, as RocketMQ's
// RequestCode does. Every other code is counted as "unsupported", so a
// client cycling through codes adds no series: the labels' values come
// from these two tables only.
var requestNames = map[int32]string{
	codeSendMessage: "SEND_MESSAGE", codePullMessage: "PULL_MESSAGE", codeQueryMessage: "QUERY_MESSAGE",
	codeQueryConsumerOffset: "QUERY_CONSUMER_OFFSET", codeUpdateConsumerOffset: "UPDATE_CONSUMER_OFFSET",
	codeSearchOffsetByTime: "SEARCH_OFFSET_BY_TIMESTAMP", codeGetMaxOffset: "GET_MAX_OFFSET",
	codeGetMinOffset: "GET_MIN_OFFSET", codeGetEarliestMsgTime: "GET_EARLIEST_MSG_STORETIME",
	codeViewMessageByID: "VIEW_MESSAGE_BY_ID", codeHeartBeat: "HEART_BEAT", codeUnregisterClient: "UNREGISTER_CLIENT",
	codeConsumerSendMsgBack: "CONSUMER_SEND_MSG_BACK", codeEndTransaction: "END_TRANSACTION",
	codeGetConsumerListByGroup: "GET_CONSUMER_LIST_BY_GROUP", codeLockBatchMQ: "LOCK_BATCH_MQ",
	codeUnlockBatchMQ: "UNLOCK_BATCH_MQ", codeCheckClientConfig: "CHECK_CLIENT_CONFIG",
	codeGetRouteInfoByTopic: "GET_ROUTEINFO_BY_TOPIC", codeGetBrokerClusterInfo: "GET_BROKER_CLUSTER_INFO",
	codeSendMessageV2: "SEND_MESSAGE_V2", codeSendBatchMessage: "SEND_BATCH_MESSAGE",
	codeLitePullMessage: "LITE_PULL_MESSAGE",
}

// responseNames names the response codes hourglass answers with, as
// RocketMQ's ResponseCode does; any other is counted by its number, of
// which the handlers make none.
var responseNames = map[int32]string{
	respSuccess: "SUCCESS", respSystemError: "SYSTEM_ERROR", respSystemBusy: "SYSTEM_BUSY",
	respRequestCodeNotSupp: "REQUEST_CODE_NOT_SUPPORTED", respMessageIllegal: "MESSAGE_ILLEGAL",
	respServiceNotAvailable: "SERVICE_NOT_AVAILABLE", respNoPermission: "NO_PERMISSION",
	respTopicNotExist: "TOPIC_NOT_EXIST", respPullNotFound: "PULL_NOT_FOUND",
	respPullRetryImmediately: "PULL_RETRY_IMMEDIATELY", respPullOffsetMoved: "PULL_OFFSET_MOVED",
	respQueryNotFound: "QUERY_NOT_FOUND", respSubscriptionParse: "SUBSCRIPTION_PARSE_FAILED",
	respInvalidParameter: "INVALID_PARAMETER",
}

// Reasons a connection was closed by the broker, the values of the
// "reason" label of hourglass_remoting_connections_closed_total. A client
// that closes its own connection is not counted.
const (
	closeMalformed = "malformed_frame"    // a frame the decoder refused
	closeTimeout   = "timeout"            // idle, or too slow to send a frame it began
	closeTruncated = "ended_inside_frame" // the stream ended in the middle of a frame
	closeTLS       = "tls_handshake"      // a TLS handshake failed or took too long
	closeLimit     = "connection_limit"   // refused at accept: -remoting-max-conns were open
)

// metrics is what the adapter exports on /metrics. Its series are created
// as they are first met, with label values from the tables above only.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	closed   *prometheus.CounterVec
	open     prometheus.GaugeFunc
}

func newMetrics(open func() float64) *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hourglass_remoting_requests_total",
			Help: "RocketMQ remoting requests, by request code and the response code answered (\"ONEWAY\" when none is)."},
			[]string{"request", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hourglass_remoting_request_seconds",
			Help:    "Time from reading a remoting request to its answer, ready to be written (pulls include their long poll), by request code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5, 30}}, []string{"request"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hourglass_remoting_connections_closed_total",
			Help: "Remoting connections the broker closed or refused, by reason (clients' own closes are not counted)."},
			[]string{"reason"}),
		open: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hourglass_remoting_connections",
			Help: "Remoting connections open now."}, open),
	}
}

// observe counts one handled request: resp is its answer, nil for a
// one-way request or one that has none.
func (m *metrics) observe(req, resp *Command, start time.Time) {
	name, ok := requestNames[req.Code]
	if !ok {
		name = "unsupported"
	}
	code := "ONEWAY"
	if resp != nil && !req.isOneway() {
		if code, ok = responseNames[resp.Code]; !ok {
			code = strconv.Itoa(int(resp.Code))
		}
	}
	m.requests.WithLabelValues(name, code).Inc()
	m.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
}

// Collector returns the adapter's metrics, to register with a Prometheus
// registry: requests by code and answer, their durations, the open
// connections and those the broker closed, by reason.
func (s *Server) Collector() prometheus.Collector { return s.metrics }

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.duration.Describe(ch)
	m.closed.Describe(ch)
	m.open.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.duration.Collect(ch)
	m.closed.Collect(ch)
	m.open.Collect(ch)
}
