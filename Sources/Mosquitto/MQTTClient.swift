import CMosquitto
import Logging
import Reactor
import Synchronization

/// Counters of one client.
public struct MQTTClientStatistics: Sendable, Hashable {
    /// Messages handed to subscriptions.
    public var deliveredMessages: Int
    /// Messages dropped because a subscription's buffer was full.
    public var droppedMessages: Int
    /// Messages that matched no local subscription (e.g. after a local unsubscribe while
    /// a persistent session still held the subscription).
    public var unroutedMessages: Int
    /// QoS 1/2 publishes not yet acknowledged (including those queued while offline).
    public var unacknowledgedPublishes: Int
    public var isConnected: Bool
}

/// An MQTT 3.1.1 / 5 client over libmosquitto, running on a `Reactor.EventLoop` with no thread
/// of its own.
///
/// Life cycle: `init(options:logger:loop:)` validates and configures; `connect()` starts the
/// first connection attempt on the loop and returns on the first CONNACK; lost connections are
/// re-established with jittered exponential backoff (`MQTTReconnectPolicy`) and subscriptions
/// are renewed; `disconnect()` sends DISCONNECT and waits until the client is off the loop. A
/// client is used once: after `disconnect()` every call fails with `.closed`. See docs/mqtt.md.
public final class MQTTClient: MQTTTransport {
    let core: MQTTClientCore

    /// Validates `options` and prepares the libmosquitto instance (no network yet). The password
    /// is read here (file or environment), never logged.
    ///
    /// The client runs on `loop` and has no thread of its own (docs/mqtt.md "The event loop").
    /// The socket is read by a loop watch, queued packets are written by a loop hook just
    /// before the loop sleeps, keep-alive and reconnect backoff are loop timers; only each
    /// connection attempt (DNS, TCP connect) runs on a short-lived helper thread. Callbacks —
    /// subscription handlers, `publishDetached` completions — run on the loop thread. Called on
    /// the loop, `publishDetached` only queues (no system call, no wake-up); called elsewhere it
    /// also asks the loop to flush. `disconnect()` the client before shutting the loop down.
    public init(
        options: MQTTConnectOptions, logger: Logger = Logger(label: "gatt2mqtt.mqtt"), loop: EventLoop
    ) throws(MQTTError) {
        core = try MQTTClientCore(options: options, logger: logger, loop: loop)
    }

    deinit { core.stopDetached() }

    /// The loop the client runs on.
    public var eventLoop: EventLoop { core.loop }

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
                core.start()
            }
        } onCancel: {
            Task { await core.stop() }
        }
        try result.get()
    }

    /// Sends DISCONNECT (reason 0) and waits until the client has stopped. Pending publishes
    /// fail with `.closed`; subscriptions and event streams finish. Idempotent. Afterwards the
    /// client has no watch, timer or hook left on the loop; a connection attempt still blocked
    /// in DNS or TCP connect is abandoned (its helper thread closes what it opened and exits).
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
        let propertyList = try checkPublish(topic: topic, payload: payload, properties: properties)

        enum Admission { case send(generation: Int), enqueue }
        let admission = try core.state.withLock { s throws(MQTTError) -> Admission in
            switch s.phase {
            case .idle: throw .notConnected
            case .stopping, .stopped: throw .closed
            case .connected:
                if qos != .atMostOnce { s.outstandingQoS12 += 1 }
                return .send(generation: s.generation)
            case .connecting, .reconnecting:
                switch core.options.offlinePolicy {
                case .failFast: throw .notConnected
                case .queue(let queueLimit):
                    if qos == .atMostOnce { throw .notConnected }
                    if s.outstandingQoS12 >= queueLimit { throw .offlineQueueFull(limit: queueLimit) }
                    s.outstandingQoS12 += 1
                    return .enqueue
                }
            }
        }
        defer {
            if qos != .atMostOnce { core.state.withLock { $0.outstandingQoS12 -= 1 } }
        }
        let queueing: Bool
        if case .queue = core.options.offlinePolicy, qos != .atMostOnce { queueing = true } else { queueing = false }

        let result: Result<Void, MQTTError>
        switch admission {
        case .enqueue:
            result = await core.enqueuePublish(
                topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
        case .send(let generation):
            var mid: Int32 = 0
            let rc = payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    core.mosq, &mid, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain,
                    propertyList?.pointer)
            }
            if rc == 0 {
                core.packetsQueued()
                result = await core.waitForPublish(mid: mid, qos: qos, generation: generation)
            } else {
                switch MosquittoCode(code: rc) {
                case .noConnection where queueing:
                    // The connection dropped between the check and the call: queue it.
                    result = await core.enqueuePublish(
                        topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
                case .noConnection: throw .notConnected
                case .payloadSize: throw .payloadTooLarge(size: payload.count, limit: 268_435_455)
                case .notSupported where propertyList != nil: throw .propertiesRequireMQTT5
                case let code: throw .library(code, operation: "mosquitto_publish_v5")
                }
            }
        }
        switch result {
        case .success: return
        case .failure(.publishRejected(_, let code)): throw .publishRejected(topic: topic, code)
        case .failure(let error): throw error
        }
    }

    /// The checks every publish makes before it reaches the library; the property list to send.
    private func checkPublish(topic: String, payload: [UInt8], properties: MQTTPublishProperties) throws(MQTTError)
        -> MosquittoPropertyList?
    {
        try MQTTTopic.validateTopic(topic)
        let limit = core.options.maximumPayloadSize
        guard payload.count <= limit else { throw .payloadTooLarge(size: payload.count, limit: limit) }
        if !properties.isEmpty && core.options.protocolVersion == .v311 { throw .propertiesRequireMQTT5 }
        if !properties.subscriptionIdentifiers.isEmpty {
            throw .invalidOptions("subscription identifiers are set by the broker, not by a publisher")
        }
        return properties.isEmpty ? nil : try properties.makePropertyList()
    }

    /// Publishes without waiting: the message is handed to libmosquitto (or, while the broker
    /// is away, to the offline queue under the same rules as `publish`) before this returns, so
    /// messages go out in the order of the calls; `completion` runs once with the outcome (the
    /// PUBACK/PUBCOMP for QoS ≥ 1, the write for QoS 0), on the loop thread or at once.
    /// A QoS 0 message lost with its connection gets no completion. For high-rate publishers
    /// (the bridge's responses and state), where awaiting each acknowledgement in turn would
    /// serialise them behind broker round trips.
    public func publishDetached(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
        properties: MQTTPublishProperties = MQTTPublishProperties(),
        completion: @escaping @Sendable (Result<Void, MQTTError>) -> Void
    ) {
        let core = self.core
        do throws(MQTTError) {
            let propertyList = try checkPublish(topic: topic, payload: payload, properties: properties)
            let counted = qos != .atMostOnce
            let done: @Sendable (Result<Void, MQTTError>) -> Void = { [weak core] result in
                if counted { core?.state.withLock { $0.outstandingQoS12 -= 1 } }
                completion(result)
            }
            // Admission and the library call (or the queue append) happen under one order: a
            // message queued while away stays ahead of any sent after the reconnect, because
            // a non-empty offline queue takes new messages too.
            enum Admission { case send, queued }
            let admission = try core.state.withLock { s throws(MQTTError) -> Admission in
                switch s.phase {
                case .idle: throw .notConnected
                case .stopping, .stopped: throw .closed
                case .connected where s.offlineQueue.isEmpty:
                    if counted { s.outstandingQoS12 += 1 }
                    return .send
                case .connected, .connecting, .reconnecting:
                    switch core.options.offlinePolicy {
                    case .failFast where s.phase != .connected: throw .notConnected
                    case .queue(let queueLimit) where s.phase != .connected:
                        if qos == .atMostOnce { throw .notConnected }
                        if s.outstandingQoS12 >= queueLimit { throw .offlineQueueFull(limit: queueLimit) }
                    default:
                        if qos == .atMostOnce && s.phase != .connected { throw .notConnected }
                    }
                    if counted { s.outstandingQoS12 += 1 }
                    s.nextID += 1
                    s.offlineQueue.append(MQTTClientCore.QueuedPublish(id: s.nextID, topic: topic, payload: payload, qos: qos, retain: retain,
                                                        properties: properties, completion: .handler(done)))
                    return .queued
                }
            }
            if case .queued = admission {
                core.flushOfflineQueue()  // in case the connection came back meanwhile
                return
            }
            var mid: Int32 = 0
            // The topic's own NUL-terminated storage (an implicit conversion inside the closure copied it).
            let rc = topic.withCString { t in
                payload.withUnsafeBytes { bytes in
                    mosquitto_publish_v5(core.mosq, &mid, t, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain,
                                         propertyList?.pointer)
                }
            }
            guard rc == 0 else {
                done(.failure(MosquittoCode(code: rc) == .noConnection ? .notConnected : .library(MosquittoCode(code: rc), operation: "mosquitto_publish_v5")))
                return
            }
            core.packetsQueued()
            if let early = core.state.withLock({ $0.publishes.register(mid, .handler(done)) }) { done(early) }
        } catch {
            completion(.failure(error))
        }
    }

    /// Subscribes (MQTT 5 §3.8). When connected it returns once the broker granted the
    /// subscription (SUBACK). Before `connect()` or while reconnecting it registers the
    /// subscription locally and returns at once (`grantedQoS` is then the requested QoS); the
    /// SUBSCRIBE goes out with the next CONNACK — so a persistent session's queued messages,
    /// delivered right after CONNACK, find their subscription. A later rejection by the broker
    /// finishes the stream. The stream buffers from the start, so retained messages are kept.
    /// Throws `.invalidTopicFilter`, `.subscribeRejected`, `.cancelled`, `.closed`.
    public func subscribe(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions()
    ) async throws(MQTTError) -> MQTTSubscription {
        try await subscribe(filter, qos: qos, options: options, handler: nil)
    }

    /// Subscribes like `subscribe(_:qos:options:)`, but each message is handed to `handler` on
    /// the client's loop thread as it arrives, in order, instead
    /// of through the stream (which then only ends when the subscription does). For a consumer
    /// that does little per message and must not pay a thread hand-off for each: the handler
    /// must not block.
    public func subscribe(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions(),
        handler: (@Sendable (MQTTMessage) -> Void)?
    ) async throws(MQTTError) -> MQTTSubscription {
        let core = self.core
        try MQTTTopic.validateFilter(filter)
        let policy: AsyncStream<MQTTMessage>.Continuation.BufferingPolicy =
            core.options.inboundOverflow == .dropNewest
            ? .bufferingOldest(core.options.inboundBufferLimit) : .bufferingNewest(core.options.inboundBufferLimit)
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: policy)
        let (id, connected, generation) = try core.state.withLock { s throws(MQTTError) -> (UInt64, Bool, Int) in
            if s.phase == .stopping || s.phase == .stopped { throw .closed }
            s.nextID += 1
            s.routes.append(MQTTClientCore.Route(id: s.nextID, filter: filter, qos: qos, options: options, continuation: continuation,
                                                 handler: handler))
            return (s.nextID, s.phase == .connected, s.generation)
        }
        func removeRoute() {
            core.state.withLock { $0.routes.removeAll { $0.id == id } }
            continuation.finish()
        }
        func made(_ grantedQoS: MQTTQoS) -> MQTTSubscription {
            continuation.onTermination = { [weak core] _ in
                guard let core else { return }
                Task { try? await core.removeSubscription(id: id) }
            }
            return MQTTSubscription(filter: filter, grantedQoS: grantedQoS, stream: stream) { [weak core] () throws(MQTTError) in
                guard let core else { return }
                try await core.removeSubscription(id: id)
            }
        }
        guard connected else { return made(qos) }

        var mid: Int32 = 0
        let rc = mosquitto_subscribe_v5(core.mosq, &mid, filter, Int32(qos.rawValue), options.mosquittoValue, nil)
        if rc == Int32(MOSQ_ERR_NO_CONN.rawValue) {
            return made(qos)  // sent with the next CONNACK
        }
        if rc != 0 {
            removeRoute()
            throw .library(MosquittoCode(code: rc), operation: "mosquitto_subscribe_v5")
        }
        core.packetsQueued()
        let granted: [Int32]
        switch await core.waitForAck(mid, generation: generation, table: \.subacks) {
        case .failure(.connectionLost):
            return made(qos)  // the route stays; SUBSCRIBE is sent again with the next CONNACK
        case .failure(let error):
            removeRoute()
            throw error
        case .success(let codes):
            granted = codes
        }
        do throws(MQTTError) {
            return made(try Self.grantedQoS(granted, filter: filter))
        } catch {
            removeRoute()
            throw error
        }
    }

    /// Reads a SUBACK for one filter (MQTT 5 §3.9.3, MQTT 3.1.1 §3.9.3): 0…2 is the granted
    /// QoS, anything else (0x80 in 3.1.1, a reason code ≥ 0x80 in 5) a refusal.
    static func grantedQoS(_ codes: [Int32], filter: String) throws(MQTTError) -> MQTTQoS {
        guard codes.count == 1, let qos = MQTTQoS(rawValue: Int(codes[0])) else {
            throw .subscribeRejected(filter: filter, MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: codes.first ?? 0x80)))
        }
        return qos
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
                deliveredMessages: core.deliveredInbound.load(ordering: .relaxed),
                droppedMessages: core.droppedInbound.load(ordering: .relaxed),
                unroutedMessages: core.unroutedInbound.load(ordering: .relaxed),
                unacknowledgedPublishes: s.outstandingQoS12, isConnected: s.phase == .connected)
        }
    }
}

extension MQTTClientCore {
    /// Waits for the PUBACK/PUBCOMP (or the write, QoS 0) of `mid`, registered after
    /// libmosquitto returned it; an ack that came first is taken from the early table.
    func waitForPublish(mid: Int32, qos: MQTTQoS, generation: Int) async -> Result<Void, MQTTError> {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Void, MQTTError>, Never>) in
                let immediate = state.withLock { s -> Result<Void, MQTTError>? in
                    if Task.isCancelled {
                        return s.publishes.register(mid, .ignore) ?? .failure(.cancelled)
                    }
                    if qos == .atMostOnce && s.generation != generation {
                        return s.publishes.register(mid, .ignore) ?? .failure(.connectionLost)
                    }
                    if let early = s.publishes.register(mid, .waiting(c)) { return early }
                    if qos == .atMostOnce { s.qos0Waiting.insert(mid) }
                    return nil
                }
                if let immediate { c.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { s in
                s.qos0Waiting.remove(mid)
                return s.publishes.abandon(mid)
            }
            waiter?.resume(returning: .failure(.cancelled))
        }
    }

    /// Queues a QoS ≥ 1 publish while disconnected; it is sent after the next CONNACK and
    /// this returns on its PUBACK/PUBCOMP. Cancelling removes it if it was not sent yet.
    func enqueuePublish(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) async -> Result<Void, MQTTError> {
        let ticket = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Void, MQTTError>, Never>) in
                let immediate = state.withLock { s -> Result<Void, MQTTError>? in
                    if Task.isCancelled { return .failure(.cancelled) }
                    if s.phase == .stopping || s.phase == .stopped { return .failure(.closed) }
                    s.offlineQueue.append(
                        QueuedPublish(
                            id: ticket, topic: topic, payload: payload, qos: qos, retain: retain, properties: properties,
                            completion: .waiting(c)))
                    return nil
                }
                if let immediate {
                    c.resume(returning: immediate)
                } else {
                    flushOfflineQueue()  // in case the connection came back meanwhile
                }
            }
        } onCancel: {
            let waiter = state.withLock { s -> AckWaiter<Result<Void, MQTTError>>? in
                guard let index = s.offlineQueue.firstIndex(where: { $0.id == ticket }) else { return nil }
                return s.offlineQueue.remove(at: index).completion
            }
            waiter?.deliver(.failure(.cancelled))
        }
    }

    /// Waits for the SUBACK/UNSUBACK of `mid`; cancellation abandons the wait.
    /// `generation` is the connection the packet was sent on: if it ended before the waiter
    /// was registered, the ack will never come.
    func waitForAck<Value: Sendable>(
        _ mid: Int32, generation: Int, table: WritableKeyPath<State, AckTable<Result<Value, MQTTError>>> & Sendable
    ) async -> Result<Value, MQTTError> {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Value, MQTTError>, Never>) in
                let immediate = state.withLock { s -> Result<Value, MQTTError>? in
                    if s.phase == .stopped { return .failure(.closed) }
                    if Task.isCancelled { return s[keyPath: table].register(mid, .ignore) ?? .failure(.cancelled) }
                    if s.generation != generation { return s[keyPath: table].register(mid, .ignore) ?? .failure(.connectionLost) }
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
        let (phase, generation) = state.withLock { ($0.phase, $0.generation) }
        switch phase {
        case .connected: break
        case .idle, .stopping, .stopped: return  // nothing to tell the broker
        case .connecting, .reconnecting:
            // A clean session forgets the subscription anyway; a persistent one keeps it.
            if options.cleanSession { return }
            throw .notConnected
        }
        var mid: Int32 = 0
        let rc = mosquitto_unsubscribe_v5(mosq, &mid, filter, nil)
        if rc != 0 {
            throw MosquittoCode(code: rc) == .noConnection
                ? .notConnected : .library(MosquittoCode(code: rc), operation: "mosquitto_unsubscribe_v5")
        }
        packetsQueued()
        switch await waitForAck(mid, generation: generation, table: \.unsubacks) {
        case .success: return
        case .failure(.connectionLost) where options.cleanSession: return  // the broker forgets it anyway
        case .failure(.connectionLost): throw .notConnected
        case .failure(let error): throw error
        }
    }
}
