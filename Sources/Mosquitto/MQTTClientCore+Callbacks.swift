import CMosquitto
import Logging

/// Recovers the box from libmosquitto's user-data pointer (set by `mosquitto_user_data_set`).
/// Callbacks only run on the loop, inside a library call made by the driver (whose watch,
/// timers and hook hold strong references to the box) or by a method of the box.
@inline(__always)
private func core(_ raw: UnsafeMutableRawPointer?) -> MQTTClientCore {
    Unmanaged<MQTTClientCore>.fromOpaque(raw!).takeUnretainedValue()
}

extension MQTTClientCore {
    func installCallbacks() {
        mosquitto_connect_v5_callback_set(mosq) { _, raw, rc, flags, properties in
            core(raw).handleConnect(rc: rc, flags: flags, properties: properties)
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, raw, rc, _ in
            core(raw).handleDisconnect(rc: rc)
        }
        mosquitto_publish_v5_callback_set(mosq) { _, raw, mid, reason, _ in
            core(raw).handlePublishAck(mid: mid, reason: reason)
        }
        mosquitto_subscribe_v5_callback_set(mosq) { _, raw, mid, count, granted, _ in
            let codes = (0..<Int(max(count, 0))).map { granted![$0] }
            core(raw).handleSubscribeAck(mid: mid, granted: codes)
        }
        mosquitto_unsubscribe_v5_callback_set(mosq) { _, raw, mid, _ in
            core(raw).handleUnsubscribeAck(mid: mid)
        }
        mosquitto_message_v5_callback_set(mosq) { _, raw, message, properties in
            guard let message else { return }
            core(raw).handleMessage(message, properties: properties)
        }
        syncLogCallback()
    }

    /// libmosquitto's log callback, set only while the logger takes debug lines (checked at start
    /// and at every turn of the loop, since the level can change at run time): with one set,
    /// libmosquitto formats every line it has (vsnprintf into a fresh 500-byte buffer, under a
    /// mutex) before the callback can drop it, and all but its TLS errors (which the calls'
    /// return codes report too) are debug lines about each packet: four per command, for
    /// nothing at the usual levels (docs/benchmarks.md, "Against the floor").
    func syncLogCallback() {
        let wanted = logger.logLevel <= .debug
        guard logCallbackSet.exchange(wanted, ordering: .relaxed) != wanted else { return }
        if wanted {
            mosquitto_log_callback_set(mosq) { _, raw, level, text in
                guard let text else { return }
                core(raw).handleLog(level: level, text: text)
            }
        } else {
            mosquitto_log_callback_set(mosq, nil)
        }
    }

    func uninstallCallbacks() {
        mosquitto_connect_v5_callback_set(mosq, nil)
        mosquitto_disconnect_v5_callback_set(mosq, nil)
        mosquitto_publish_v5_callback_set(mosq, nil)
        mosquitto_subscribe_v5_callback_set(mosq, nil)
        mosquitto_unsubscribe_v5_callback_set(mosq, nil)
        mosquitto_message_v5_callback_set(mosq, nil)
        mosquitto_log_callback_set(mosq, nil)
        mosquitto_user_data_set(mosq, nil)
    }

    /// CONNACK (MQTT 5 §3.2). `rc` is the CONNACK reason code (3.1.1 return code).
    func handleConnect(rc: Int32, flags: Int32, properties: OpaquePointer?) {
        if rc != 0 {
            let code = options.protocolVersion == .v5
                ? MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: rc))
                : MQTTReasonCode(mqtt311Connack: UInt8(truncatingIfNeeded: rc))
            logger.warning("MQTT broker refused the connection: \(code)")
            state.withLock { $0.lastConnectFailure = .connectionRefused(code) }
            return
        }
        let sessionPresent = flags & 1 == 1
        if state.withLock({ $0.phase == .stopping || $0.phase == .stopped }) {
            // disconnect() came while connecting: say goodbye properly, then the loop ends.
            state.withLock { $0.linkUp = true }
            _ = mosquitto_disconnect_v5(mosq, 0, nil)
            return
        }
        let (waiter, routes) = state.withLock { s -> (CheckedContinuation<Result<Void, MQTTError>, Never>?, [Route]) in
            s.everConnected = true
            s.linkUp = true
            s.reconnectAttempt = 0
            s.lastConnectFailure = nil
            if s.phase != .stopping && s.phase != .stopped { s.phase = .connected }
            defer { s.connectWaiter = nil }
            return (s.connectWaiter, s.routes)
        }
        logger.info("MQTT connected to \(options.host):\(options.port) (session present: \(sessionPresent))")
        // (Re-)subscribe every local subscription before anyone hears about the connection;
        // a rejection ends the subscriptions on that filter.
        var seen = Set<String>()
        for route in routes where seen.insert(route.filter).inserted {
            var mid: Int32 = 0
            let rc = mosquitto_subscribe_v5(
                mosq, &mid, route.filter, Int32(route.qos.rawValue), route.options.mosquittoValue, nil)
            if rc != 0 {
                logger.error("MQTT subscribe to \(route.filter) failed: \(MosquittoCode(code: rc))")
                continue
            }
            let filter = route.filter
            let handler: @Sendable (Result<[Int32], MQTTError>) -> Void = { [weak self] result in
                guard case .success(let granted) = result, let first = granted.first, first >= 0x80 else { return }
                self?.rejectRoutes(filter: filter, code: MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: first)))
            }
            if let early = state.withLock({ $0.subacks.register(mid, .handler(handler)) }) { handler(early) }
        }
        flushOfflineQueue()
        // Listeners hear about the connection before connect() returns.
        emit(.connected(sessionPresent: sessionPresent))
        waiter?.resume(returning: .success(()))
    }

    /// The broker refused a subscription made while offline or renewed on reconnect.
    func rejectRoutes(filter: String, code: MQTTReasonCode) {
        logger.error("MQTT broker rejected the subscription to \(filter): \(code)")
        let removed = state.withLock { s in
            defer { s.routes.removeAll { $0.filter == filter } }
            return s.routes.filter { $0.filter == filter }
        }
        for route in removed { route.continuation.finish() }
    }

    /// Sends the publishes queued while disconnected, in order. Runs after CONNACK and after
    /// a publish was queued (in case the connection came back meanwhile).
    func flushOfflineQueue() {
        let items = state.withLock { s -> [QueuedPublish] in
            guard s.phase == .connected else { return [] }
            defer { s.offlineQueue = [] }
            return s.offlineQueue
        }
        defer { if !items.isEmpty { packetsQueued() } }
        for (index, item) in items.enumerated() {
            let propertyList: MosquittoPropertyList?
            do throws(MQTTError) {
                propertyList = item.properties.isEmpty ? nil : try item.properties.makePropertyList()
            } catch {
                item.completion.deliver(.failure(error))
                continue
            }
            var mid: Int32 = 0
            let rc = item.payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    mosq, &mid, item.topic, Int32(bytes.count), bytes.baseAddress, Int32(item.qos.rawValue), item.retain,
                    propertyList?.pointer)
            }
            if rc == Int32(MOSQ_ERR_NO_CONN.rawValue) {
                // Lost again: keep the rest queued, in order, for the next CONNACK.
                let rest = Array(items[index...])
                state.withLock { $0.offlineQueue.insert(contentsOf: rest, at: 0) }
                return
            }
            if rc != 0 {
                item.completion.deliver(.failure(.library(MosquittoCode(code: rc), operation: "mosquitto_publish_v5")))
                continue
            }
            if let early = state.withLock({ $0.publishes.register(mid, item.completion) }) {
                item.completion.deliver(early)
            }
        }
    }

    /// The connection ended; `rc` 0 means after our DISCONNECT.
    func handleDisconnect(rc: Int32) {
        // libmosquitto drops unsent packets on reconnect and retransmits only QoS 1/2
        // PUBLISHes: QoS 0 publishes and pending SUBSCRIBE/UNSUBSCRIBE acks will not come.
        let (lost, subacks, unsubacks) = state.withLock { s in
            s.generation += 1
            s.linkUp = false
            if s.phase == .connected { s.phase = .reconnecting }
            let mids = s.qos0Waiting
            s.qos0Waiting = []
            return (mids.compactMap { s.publishes.abandon($0) }, s.subacks.drain(), s.unsubacks.drain())
        }
        for waiter in lost { waiter.resume(returning: .failure(.connectionLost)) }
        for waiter in subacks { waiter.resume(returning: .failure(.connectionLost)) }
        for waiter in unsubacks { waiter.resume(returning: .failure(.connectionLost)) }
        if rc == 0 {
            logger.info("MQTT disconnected")
            emit(.disconnected(reason: nil))
        } else {
            let reason: MQTTError = .library(MosquittoCode(code: rc), operation: "connection")
            logger.warning("MQTT connection lost: \(reason)")
            emit(.disconnected(reason: reason))
        }
    }

    /// PUBACK/PUBCOMP (or QoS 0 written). MQTT 5 §3.4.2.1: reason ≥ 0x80 is a failure.
    func handlePublishAck(mid: Int32, reason: Int32) {
        let result: Result<Void, MQTTError> =
            reason >= 0x80
            ? .failure(.publishRejected(topic: "", MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: reason))))
            : .success(())
        let waiter = state.withLock { s in
            s.qos0Waiting.remove(mid)
            return s.publishes.complete(mid, result)
        }
        waiter?.deliver(result)
    }

    func handleSubscribeAck(mid: Int32, granted: [Int32]) {
        let waiter = state.withLock { $0.subacks.complete(mid, .success(granted)) }
        waiter?.deliver(.success(granted))
    }

    func handleUnsubscribeAck(mid: Int32) {
        let waiter = state.withLock { $0.unsubacks.complete(mid, .success(())) }
        waiter?.deliver(.success(()))
    }

    /// Copies the message out of libmosquitto and hands it to every matching subscription.
    func handleMessage(_ raw: UnsafePointer<mosquitto_message>, properties: OpaquePointer?) {
        let m = raw.pointee
        let topic = m.topic.map { String(cString: $0) } ?? ""
        let payload: [UInt8] =
            m.payloadlen > 0 && m.payload != nil
            ? Array(UnsafeRawBufferPointer(start: m.payload, count: Int(m.payloadlen))) : []
        let message = MQTTMessage(
            topic: topic, payload: payload, qos: MQTTQoS(rawValue: Int(m.qos)) ?? .atMostOnce, retain: m.retain,
            properties: properties == nil ? MQTTPublishProperties() : MQTTPublishProperties(copying: properties),
            packetID: m.qos > 0 ? Int(m.mid) : nil)
        let routes = state.withLock { $0.routes }
        var dropped = 0
        var matched = false
        for route in routes
        where route.exactMatch ? route.filter == topic : MQTTTopic.matches(filter: route.filter, topic: topic) {
            matched = true
            if let handler = route.handler {
                handler(message)
                deliveredInbound.add(1, ordering: .relaxed)
                continue
            }
            switch route.continuation.yield(message) {
            case .enqueued: deliveredInbound.add(1, ordering: .relaxed)
            case .dropped: dropped += 1
            case .terminated: break
            @unknown default: break
            }
        }
        if dropped > 0 { droppedInbound.add(dropped, ordering: .relaxed) }
        if !matched {
            unroutedInbound.add(1, ordering: .relaxed)
            logger.debug("MQTT message on \(topic) matches no subscription")
        }
        if dropped > 0 { logger.warning("MQTT inbound buffer full: dropped a message on \(topic)") }
    }

    /// libmosquitto log lines → swift-log (it never logs the password). libmosquitto formats a
    /// debug line for every packet; the Swift string is made only when the level is logged.
    func handleLog(level: Int32, text: UnsafePointer<CChar>) {
        let mapped: Logger.Level
        switch level {
        case MOSQ_LOG_ERR: mapped = .error
        case MOSQ_LOG_WARNING: mapped = .warning
        case MOSQ_LOG_NOTICE: mapped = .notice
        case MOSQ_LOG_INFO: mapped = .info
        default: mapped = .debug
        }
        guard logger.logLevel <= mapped else { return }
        logger.log(level: mapped, "\(String(cString: text))", metadata: ["source": "libmosquitto"])
    }
}
