"""The Java 4.9.8 broker's whole configuration, for GET_BROKER_CONFIG (mqadmin getBrokerConfig / exportConfigs).

The Java broker answers with every property of BrokerConfig, NettyServerConfig, NettyClientConfig and
MessageStoreConfig (178 on 4.9.8); tools read some of them and fail without them (``mqadmin exportConfigs``
reads ``filterServerNums``, ``msgTraceTopicName``, ``slaveReadEnable``, ``useTLS``; its ``runtimeEnv.cpuNum``
is ``clientCallbackExecutorThreads``). rmqd answers with the same set: its own effective value where it has
the knob, else the value the Java broker would report on this machine. The defaults below were read from the
4.9.8 reference broker (``compat_tests`` reference cluster, ``GET_BROKER_CONFIG``); those that Java derives
from the processor count or from the broker's identity are computed in :func:`java_broker_properties`.
"""
from __future__ import annotations

import os
from typing import Mapping

# Java's property names where rmqd keeps the older spelling (both are accepted in broker.conf).
JAVA_SPELLING = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
}

# Machine- and instance-independent defaults of the 4.9.8 broker, as it reports them.
JAVA_BROKER_DEFAULTS: dict[str, str] = {
    "accessMessageInMemoryMaxRatio": "40",
    "aclEnable": "false",
    "autoCreateSubscriptionGroup": "true",
    "autoCreateTopicEnable": "true",
    "autoDeleteUnusedStats": "false",
    "bitMapLengthConsumeQueueExt": "112",
    "brokerFastFailureEnable": "true",
    "brokerPermission": "6",
    "brokerRole": "ASYNC_MASTER",
    "brokerTopicEnable": "true",
    "channelNotActiveInterval": "60000",
    "checkCRCOnRecover": "true",
    "cleanFileForciblyEnable": "true",
    "cleanResourceInterval": "10000",
    "clientAsyncSemaphoreValue": "65535",
    "clientChannelMaxIdleTimeSeconds": "120",
    "clientCloseSocketIfTimeout": "true",
    "clientManageThreadPoolNums": "32",
    "clientManagerThreadPoolQueueCapacity": "1000000",
    "clientOnewaySemaphoreValue": "65535",
    "clientPooledByteBufAllocatorEnable": "false",
    "clientSocketRcvBufSize": "0",
    "clientSocketSndBufSize": "0",
    "clientWorkerThreads": "4",
    "clusterTopicEnable": "true",
    "commercialBaseCount": "1",
    "commercialBigCount": "1",
    "commercialEnable": "true",
    "commercialTimerCount": "1",
    "commercialTransCount": "1",
    "commitCommitLogLeastPages": "4",
    "commitCommitLogThoroughInterval": "200",
    "commitIntervalCommitLog": "200",
    "compressedRegister": "false",
    "configBlackList": "configBlackList;brokerConfigPath",
    "connectTimeoutMillis": "3000",
    "consumerFallbehindThreshold": "17179869184",
    "consumerManageThreadPoolNums": "32",
    "consumerManagerThreadPoolQueueCapacity": "1000000",
    "debugLockEnable": "false",
    "defaultQueryMaxNum": "32",
    "defaultTopicQueueNums": "8",
    "deleteCommitLogFilesInterval": "100",
    "deleteConsumeQueueFilesInterval": "100",
    "deleteWhen": "04",
    "destroyMapedFileIntervalForcibly": "120000",
    "disableConsumeIfConsumerReadSlowly": "false",
    "diskFallRecorded": "true",
    "diskMaxUsedSpaceRatio": "75",
    "duplicationEnable": "false",
    "enableCalcFilterBitMap": "false",
    "enableConsumeQueueExt": "false",
    "enableDLegerCommitLog": "false",
    "enableDetailStat": "true",
    "enableLmq": "false",
    "enableMultiDispatch": "false",
    "enablePropertyFilter": "false",
    "enableScheduleAsyncDeliver": "false",
    "enableScheduleMessageStats": "true",
    "endTransactionPoolQueueCapacity": "100000",
    "expectConsumerNumUseFilter": "32",
    "fastFailIfNoBufferInStorePool": "false",
    "fetchNamesrvAddrByAddressServer": "false",
    "fileReservedTime": "72",
    "filterDataCleanTimeSpan": "86400000",
    "filterServerNums": "0",
    "filterSupportRetry": "false",
    "flushCommitLogLeastPages": "4",
    "flushCommitLogThoroughInterval": "10000",
    "flushCommitLogTimed": "true",
    "flushConsumeQueueLeastPages": "2",
    "flushConsumeQueueThoroughInterval": "60000",
    "flushConsumerOffsetHistoryInterval": "60000",
    "flushConsumerOffsetInterval": "5000",
    "flushDelayOffsetInterval": "10000",
    "flushDiskType": "ASYNC_FLUSH",
    "flushIntervalCommitLog": "500",
    "flushIntervalConsumeQueue": "1000",
    "flushLeastPagesWhenWarmMapedFile": "4096",
    "forceRegister": "true",
    "haHousekeepingInterval": "20000",
    "haSendHeartbeatInterval": "5000",
    "haSlaveFallbehindMax": "268435456",
    "haTransferBatchSize": "32768",
    "heartbeatThreadPoolQueueCapacity": "50000",
    "highSpeedMode": "false",
    "isEnableBatchPush": "false",
    "isolateLogEnable": "false",
    "longPollingEnable": "true",
    "mappedFileSizeCommitLog": "1073741824",
    "mappedFileSizeConsumeQueue": "6000000",
    "mappedFileSizeConsumeQueueExt": "50331648",
    "maxDelayTime": "40",
    "maxErrorRateOfBloomFilter": "20",
    "maxHashSlotNum": "5000000",
    "maxIndexNum": "20000000",
    "maxLmqConsumeQueueNum": "20000",
    "maxMessageSize": "4194304",
    "maxMsgsNumBatch": "64",
    "maxTransferBytesOnMessageInDisk": "65536",
    "maxTransferBytesOnMessageInMemory": "262144",
    "maxTransferCountOnMessageInDisk": "8",
    "maxTransferCountOnMessageInMemory": "32",
    "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    "messageIndexEnable": "true",
    "messageIndexSafe": "false",
    "messageStorePlugIn": "",
    "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC",
    "notifyConsumerIdsChangedEnable": "true",
    "offsetCheckInSlave": "false",
    "osPageCacheBusyTimeOutMills": "1000",
    "pullThreadPoolQueueCapacity": "100000",
    "putMsgIndexHightWater": "600000",
    "putThreadPoolQueueCapacity": "10000",
    "queryThreadPoolQueueCapacity": "20000",
    "redeleteHangedFileInterval": "120000",
    "regionId": "DefaultRegion",
    "registerBrokerTimeoutMills": "6000",
    "registerNameServerPeriod": "30000",
    "rejectTransactionMessage": "false",
    "replyThreadPoolQueueCapacity": "10000",
    "scheduleAsyncDeliverMaxPendingLimit": "2000",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "sendThreadPoolQueueCapacity": "10000",
    "serverAsyncSemaphoreValue": "64",
    "serverCallbackExecutorThreads": "0",
    "serverChannelMaxIdleTimeSeconds": "120",
    "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true",
    "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0",
    "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8",
    "shortPollingTimeMills": "1000",
    "slaveReadEnable": "false",
    "slaveTimeout": "3000",
    "startAcceptSendRequestTimeStamp": "0",
    "storeReplyMessageEnable": "true",
    "syncFlushTimeout": "5000",
    "traceOn": "true",
    "traceTopicEnable": "false",
    "transactionCheckInterval": "60000",
    "transactionCheckMax": "15",
    "transactionTimeOut": "6000",
    "transferMsgByHeap": "true",
    "transientStorePoolEnable": "false",
    "transientStorePoolSize": "5",
    "useEpollNativeSelector": "false",
    "useReentrantLockWhenPutMessage": "true",
    "useTLS": "false",
    "waitTimeMillsInHeartbeatQueue": "31000",
    "waitTimeMillsInPullQueue": "5000",
    "waitTimeMillsInSendQueue": "200",
    "waitTimeMillsInTransactionQueue": "3000",
    "warmMapedFileEnable": "false",
    "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}


def _cpu_derived(cpus: int) -> dict[str, str]:
    """Defaults Java computes from ``Runtime.availableProcessors()`` (4.9.8 BrokerConfig, NettyClientConfig)."""
    send = min(cpus, 4)
    return {
        "sendMessageThreadPoolNums": str(send),
        "putMessageFutureThreadPoolNums": str(min(cpus, 4)),
        "pullMessageThreadPoolNums": str(16 + cpus * 2),
        "processReplyMessageThreadPoolNums": str(16 + cpus * 2),
        "queryMessageThreadPoolNums": str(8 + cpus),
        "adminBrokerThreadPoolNums": "16",
        "heartbeatThreadPoolNums": str(min(32, cpus)),
        "endTransactionThreadPoolNums": str(max(8 + cpus * 2, send * 4)),
        "clientCallbackExecutorThreads": str(cpus),
    }


def java_broker_properties(effective: Mapping[str, str], cpus: int | None = None) -> dict[str, str]:
    """Every property the Java broker reports, with rmqd's ``effective`` values (BrokerConfig.to_properties())
    where it has them; rmqd-only properties are kept as well."""
    out = dict(JAVA_BROKER_DEFAULTS)
    out.update(_cpu_derived(cpus or os.cpu_count() or 1))
    for key, value in effective.items():
        out[JAVA_SPELLING.get(key, key)] = value
    out["haListenPort"] = str(int(out.get("listenPort", "10911")) + 1)   # as BrokerStartup sets it
    root = out.get("storePathRootDir", "")
    out.setdefault("storePathCommitLog", os.path.join(root, "commitlog"))
    out.setdefault("brokerIP2", out.get("brokerIP1", ""))
    out.setdefault("rocketmqHome", os.environ.get("ROCKETMQ_HOME", ""))
    out.setdefault("namesrvAddr", "")
    return out
