package remoting

// Request codes (RocketMQ's RequestCode) that hourglass serves or sends.
const (
	codeSendMessage            = 10
	codePullMessage            = 11
	codeQueryMessage           = 12
	codeQueryConsumerOffset    = 14
	codeUpdateConsumerOffset   = 15
	codeSearchOffsetByTime     = 29
	codeGetMaxOffset           = 30
	codeGetMinOffset           = 31
	codeGetEarliestMsgTime     = 32
	codeViewMessageByID        = 33
	codeHeartBeat              = 34
	codeUnregisterClient       = 35
	codeConsumerSendMsgBack    = 36
	codeEndTransaction         = 37
	codeGetConsumerListByGroup = 38
	codeCheckTransactionState  = 39
	codeNotifyConsumerIDs      = 40
	codeLockBatchMQ            = 41
	codeUnlockBatchMQ          = 42
	codeCheckClientConfig      = 46
	codeGetRouteInfoByTopic    = 105
	codeGetBrokerClusterInfo   = 106
	codeSendMessageV2          = 310
	codeSendBatchMessage       = 320
	codeLitePullMessage        = 361
)

// Response codes (RocketMQ's ResponseCode and RemotingSysResponseCode).
const (
	respSuccess              = 0
	respSystemError          = 1
	respSystemBusy           = 2
	respRequestCodeNotSupp   = 3
	respMessageIllegal       = 13
	respServiceNotAvailable  = 14
	respNoPermission         = 16
	respTopicNotExist        = 17
	respPullNotFound         = 19
	respPullRetryImmediately = 20
	respPullOffsetMoved      = 21
	respQueryNotFound        = 22
	respSubscriptionParse    = 23
	respInvalidParameter     = 29
)

// Message properties (RocketMQ's MessageConst) that hourglass reads or adds.
const (
	propKeys           = "KEYS"
	propTags           = "TAGS"
	propDelay          = "DELAY"
	propRetryTopic     = "RETRY_TOPIC"
	propRealTopic      = "REAL_TOPIC"
	propRealQueueID    = "REAL_QID"
	propTranPrepared   = "TRAN_MSG"
	propProducerGroup  = "PGROUP"
	propOriginMsgID    = "ORIGIN_MESSAGE_ID"
	propReconsumeTime  = "RECONSUME_TIME"
	propUniqKey        = "UNIQ_KEY"
	propMaxReconsume   = "MAX_RECONSUME_TIMES"
	propTimerDelaySec  = "TIMER_DELAY_SEC"
	propTimerDelayMs   = "TIMER_DELAY_MS"
	propTimerDeliverMs = "TIMER_DELIVER_MS"
	propTimerOutMs     = "TIMER_OUT_MS"
	propTimerEnqueueMs = "TIMER_ENQUEUE_MS"
	propTimerDequeueMs = "TIMER_DEQUEUE_MS"
	propDLQOriginTopic = "DLQ_ORIGIN_TOPIC"
	propDLQOriginMsgID = "DLQ_ORIGIN_MESSAGE_ID"
)

// Topic prefixes of RocketMQ's retry and dead-letter topics.
const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
)

// Permissions of a queue (RocketMQ's PermName).
const (
	permWrite = 1 << 1
	permRead  = 1 << 2
)

// Message sysFlag bits (RocketMQ's MessageSysFlag).
const (
	sysCompressed      = 0x1
	sysMultiTags       = 0x2
	sysTranPrepared    = 0x1 << 2
	sysTranCommit      = 0x2 << 2
	sysTranRollback    = 0x3 << 2
	sysTranMask        = 0x3 << 2
	sysBornHostV6      = 0x1 << 4
	sysStoreHostV6     = 0x1 << 5
	maxTopicLen        = 127 // the one-byte topic length of a stored message
	messageMagicV1     = -626843481
	nameValueSeparator = 1
	propertySeparator  = 2
)

// brokerName and clusterName are what every route names: hourglass is one
// broker, answering as name server too.
const (
	brokerName  = "hourglass"
	clusterName = "hourglass"
)

// brokerVersion is the version a response carries: RocketMQ 4.9.4's
// (MQVersion's ordinal), a broker every 4.x and 5.x remoting client speaks to.
const brokerVersion = 985
