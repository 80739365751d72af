import CMosquitto
import Logging
import Synchronization

/// Counters of one client.
public struct MQTTClientStatistics: Sendable, Hashable {
    /// Messages handed to subscriptions.
    public var deliveredMessages: Int
    /// Messages dropped because a subscription's buffer was full.
    public var droppedMessages: Int
    /// QoS 1/2 publishes not yet acknowledged (including those queued while offline).
    public var unacknowledgedPublishes: Int
    public var isConnected: Bool
}

/// An MQTT 3.1.1 / 5 client over libmosquitto, with its own network thread.
///
/// Life cycle: `init(options:)` validates and configures; `connect()` starts the network
/// thread and returns on the first CONNACK; lost connections are re-established with jittered
/// exponential backoff (`MQTTReconnectPolicy`) and subscriptions are renewed; `disconnect()`
/// sends DISCONNECT, stops and joins the thread. A client is used once: after `disconnect()`
/// every call fails with `.closed`. See docs/mqtt.md.
public final class MQTTClient: MQTTTransport {
    let core: MQTTClientCore

    /// Validates `options` and prepares the libmosquitto instance (no network yet).
    /// The password is read here (file or environment), never logged.
    public init(options: MQTTConnectOptions, logger: Logger = Logger(label: "gatt2mqtt.mqtt")) throws(MQTTError) {
        core = try MQTTClientCore(options: options, logger: logger)
    }

    deinit { core.stopDetached() }

    public var options: MQTTConnectOptions { core.options }

    /// Connects (MQTT 5 §3.1) and returns once the broker accepted. If the first attempt fails
    /// this throws its error (`.connectionRefused`, `.library(.tls…)`, …) and the client is
    /// closed, unless `reconnect.retryInitialConnect` is set. Cancelling the task closes it.
    public func connect() async throws(MQTTError) {
        let core = self.core
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Void, MQTTError>, Never>) in
                let problem = core.state.withLock { s -> MQTTError? in
                    switch s.phase {
                    case .idle:
                        s.phase = .connecting
                        s.connectWaiter = c
                        return nil
                    case .stopping, .stopped: return .closed
                    default: return .invalidOptions("connect() was already called")
                    }
                }
                if let problem {
                    c.resume(returning: .failure(problem))
                    return
                }
                do throws(MQTTError) {
                    try core.startThread()
                } catch {
                    let waiter = core.state.withLock { s in
                        s.phase = .stopped
                        defer { s.connectWaiter = nil }
                        return s.connectWaiter
                    }
                    waiter?.resume(returning: .failure(error))
                }
            }
        } onCancel: {
            Task { await core.stop() }
        }
        try result.get()
    }

    /// Sends DISCONNECT (reason 0), stops the network thread and waits for it. Pending
    /// publishes fail with `.closed`; subscriptions and event streams finish. Idempotent.
    public func disconnect() async {
        await core.stop()
    }

    /// Publishes (MQTT 5 §3.3). Returns when the message is written (QoS 0), acknowledged by
    /// PUBACK (QoS 1) or PUBCOMP (QoS 2). While disconnected the `offlinePolicy` applies.
    /// Throws `.invalidTopic`, `.payloadTooLarge`, `.propertiesRequireMQTT5`, `.notConnected`,
    /// `.offlineQueueFull`, `.publishRejected` (MQTT 5 reason ≥ 0x80), `.connectionLost`
    /// (QoS 0 not written before the connection dropped), `.cancelled`, `.closed`.
    public func publish(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
        properties: MQTTPublishProperties = MQTTPublishProperties()
    ) async throws(MQTTError) {
        let core = self.core
        try MQTTTopic.validateTopic(topic)
        let limit = core.options.maximumPayloadSize
        guard payload.count <= limit else { throw .payloadTooLarge(size: payload.count, limit: limit) }
        if !properties.isEmpty && core.options.protocolVersion == .v311 { throw .propertiesRequireMQTT5 }
        if !properties.subscriptionIdentifiers.isEmpty {
            throw .invalidOptions("subscription identifiers are set by the broker, not by a publisher")
        }
        let propertyList = properties.isEmpty ? nil : try properties.makePropertyList()

        let generation = try core.state.withLock { s throws(MQTTError) -> Int in
            switch s.phase {
            case .idle: throw .notConnected
            case .stopping, .stopped: throw .closed
            case .connected: break
            case .connecting, .reconnecting:
                switch core.options.offlinePolicy {
                case .failFast: throw .notConnected
                case .queue(let queueLimit):
                    if qos == .atMostOnce { throw .notConnected }
                    if s.outstandingQoS12 >= queueLimit { throw .offlineQueueFull(limit: queueLimit) }
                }
            }
            if qos != .atMostOnce { s.outstandingQoS12 += 1 }
            return s.generation
        }
        defer {
            if qos != .atMostOnce { core.state.withLock { $0.outstandingQoS12 -= 1 } }
        }

        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { bytes in
            mosquitto_publish_v5(
                core.mosq, &mid, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain,
                propertyList?.pointer)
        }
        if rc != 0 {
            switch MosquittoCode(code: rc) {
            case .noConnection: throw .notConnected
            case .payloadSize: throw .payloadTooLarge(size: payload.count, limit: 268_435_455)
            case .notSupported where propertyList != nil: throw .propertiesRequireMQTT5
            case let code: throw .library(code, operation: "mosquitto_publish_v5")
            }
        }
        let messageID = mid

        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Void, MQTTError>, Never>) in
                let immediate = core.state.withLock { s -> Result<Void, MQTTError>? in
                    if Task.isCancelled {
                        return s.publishes.register(messageID, .ignore) ?? .failure(.cancelled)
                    }
                    if qos == .atMostOnce && s.generation != generation {
                        return s.publishes.register(messageID, .ignore) ?? .failure(.connectionLost)
                    }
                    if let early = s.publishes.register(messageID, .waiting(c)) { return early }
                    if qos == .atMostOnce { s.qos0Waiting.insert(messageID) }
                    return nil
                }
                if let immediate { c.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = core.state.withLock { s in
                s.qos0Waiting.remove(messageID)
                return s.publishes.abandon(messageID)
            }
            waiter?.resume(returning: .failure(.cancelled))
        }
        switch result {
        case .success: return
        case .failure(.publishRejected(_, let code)): throw .publishRejected(topic: topic, code)
        case .failure(let error): throw error
        }
    }

    /// Subscribes (MQTT 5 §3.8) and returns once the broker granted it (SUBACK). The stream
    /// starts buffering before SUBACK, so retained messages are not missed. Needs a connection.
    /// Throws `.invalidTopicFilter`, `.notConnected`, `.subscribeRejected`, `.cancelled`, `.closed`.
    public func subscribe(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions()
    ) async throws(MQTTError) -> MQTTSubscription {
        let core = self.core
        try MQTTTopic.validateFilter(filter)
        let policy: AsyncStream<MQTTMessage>.Continuation.BufferingPolicy =
            core.options.inboundOverflow == .dropNewest
            ? .bufferingOldest(core.options.inboundBufferLimit) : .bufferingNewest(core.options.inboundBufferLimit)
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: policy)
        let id = try core.state.withLock { s throws(MQTTError) -> UInt64 in
            switch s.phase {
            case .connected: break
            case .stopping, .stopped: throw .closed
            default: throw .notConnected
            }
            s.nextID += 1
            s.routes.append(MQTTClientCore.Route(id: s.nextID, filter: filter, qos: qos, options: options, continuation: continuation))
            return s.nextID
        }
        func removeRoute() {
            core.state.withLock { $0.routes.removeAll { $0.id == id } }
            continuation.finish()
        }

        var mid: Int32 = 0
        let rc = mosquitto_subscribe_v5(core.mosq, &mid, filter, Int32(qos.rawValue), options.mosquittoValue, nil)
        if rc != 0 {
            removeRoute()
            throw MosquittoCode(code: rc) == .noConnection ? .notConnected : .library(MosquittoCode(code: rc), operation: "mosquitto_subscribe_v5")
        }
        let result = await core.waitForAck(mid, table: \.subacks)
        let granted: [Int32]
        switch result {
        case .failure(let error):
            removeRoute()
            throw error
        case .success(let codes):
            granted = codes
        }
        guard let first = granted.first, (0...2).contains(first), let grantedQoS = MQTTQoS(rawValue: Int(first)) else {
            removeRoute()
            let code = UInt8(truncatingIfNeeded: granted.first ?? 0x80)
            throw .subscribeRejected(filter: filter, MQTTReasonCode(rawValue: code))
        }
        continuation.onTermination = { [weak core] _ in
            guard let core else { return }
            Task { try? await core.removeSubscription(id: id) }
        }
        return MQTTSubscription(filter: filter, grantedQoS: grantedQoS, stream: stream) { [weak core] () throws(MQTTError) in
            guard let core else { return }
            try await core.removeSubscription(id: id)
        }
    }

    /// Ends every subscription to exactly `filter` and unsubscribes at the broker (UNSUBACK).
    public func unsubscribe(_ filter: String) async throws(MQTTError) {
        try MQTTTopic.validateFilter(filter)
        let routes = core.state.withLock { s in
            defer { s.routes.removeAll { $0.filter == filter } }
            return s.routes.filter { $0.filter == filter }
        }
        for route in routes { route.continuation.finish() }
        try await core.sendUnsubscribe(filter)
    }

    /// A new stream of connection events (one consumer each; newest 256 kept if not read).
    public func connectionEvents() -> AsyncStream<MQTTConnectionEvent> { core.connectionEvents() }

    /// Current counters.
    public var statistics: MQTTClientStatistics {
        core.state.withLock { s in
            MQTTClientStatistics(
                deliveredMessages: s.deliveredInbound, droppedMessages: s.droppedInbound,
                unacknowledgedPublishes: s.outstandingQoS12, isConnected: s.phase == .connected)
        }
    }
}

extension MQTTClientCore {
    /// Waits for the SUBACK/UNSUBACK of `mid`; cancellation abandons the wait.
    func waitForAck<Value: Sendable>(
        _ mid: Int32, table: WritableKeyPath<State, AckTable<Result<Value, MQTTError>>> & Sendable
    ) async -> Result<Value, MQTTError> {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Value, MQTTError>, Never>) in
                let immediate = state.withLock { s -> Result<Value, MQTTError>? in
                    if s.phase == .stopped { return .failure(.closed) }
                    if Task.isCancelled { return s[keyPath: table].register(mid, .ignore) ?? .failure(.cancelled) }
                    return s[keyPath: table].register(mid, .waiting(c))
                }
                if let immediate { c.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { $0[keyPath: table].abandon(mid) }
            waiter?.resume(returning: .failure(.cancelled))
        }
    }

    /// Removes one local subscription; unsubscribes at the broker when it was the last one on
    /// its filter.
    func removeSubscription(id: UInt64) async throws(MQTTError) {
        let (removed, stillUsed) = state.withLock { s -> (Route?, Bool) in
            guard let index = s.routes.firstIndex(where: { $0.id == id }) else { return (nil, true) }
            let route = s.routes.remove(at: index)
            return (route, s.routes.contains { $0.filter == route.filter })
        }
        guard let removed else { return }
        removed.continuation.finish()
        if !stillUsed { try await sendUnsubscribe(removed.filter) }
    }

    func sendUnsubscribe(_ filter: String) async throws(MQTTError) {
        let phase = state.withLock { $0.phase }
        switch phase {
        case .connected: break
        case .stopping, .stopped: return  // nothing left to tell the broker
        default: throw .notConnected
        }
        var mid: Int32 = 0
        let rc = mosquitto_unsubscribe_v5(mosq, &mid, filter, nil)
        if rc != 0 {
            throw MosquittoCode(code: rc) == .noConnection
                ? .notConnected : .library(MosquittoCode(code: rc), operation: "mosquitto_unsubscribe_v5")
        }
        try await waitForAck(mid, table: \.unsubacks).get()
    }
}
