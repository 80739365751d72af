import CMosquitto
import Logging
import Reactor
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `mosquitto_lib_init` runs exactly once per process (Swift initialises globals lazily and
/// thread-safely).
let mosquittoLibraryInit: Int32 = mosquitto_lib_init()

/// A waiter for an acknowledgement keyed by libmosquitto message id.
enum AckWaiter<Value: Sendable> {
    case waiting(CheckedContinuation<Value, Never>)
    /// The caller gave up (cancelled); drop the ack when it comes.
    case ignore
    /// Run this on the loop when the ack comes (re-subscribe on reconnect).
    case handler(@Sendable (Value) -> Void)

    /// Delivers `value` to whoever waits; call outside the state lock.
    func deliver(_ value: Value) {
        switch self {
        case .waiting(let continuation): continuation.resume(returning: value)
        case .handler(let handler): handler(value)
        case .ignore: break
        }
    }
}

/// Message ids registered by the caller *after* libmosquitto returned them. An ack that
/// arrives before registration is kept in `early` and handed to the caller at registration,
/// so no ack is lost without holding a lock across the library call.
struct AckTable<Value: Sendable> {
    private var waiters: [Int32: AckWaiter<Value>] = [:]
    private var early: [Int32: Value] = [:]

    /// Registers `waiter` for `mid`, or returns the ack that already arrived.
    mutating func register(_ mid: Int32, _ waiter: AckWaiter<Value>) -> Value? {
        if let value = early.removeValue(forKey: mid) { return value }
        waiters[mid] = waiter
        return nil
    }

    /// Records an ack; returns the waiter to deliver it to (outside the lock).
    mutating func complete(_ mid: Int32, _ value: Value) -> AckWaiter<Value>? {
        guard let waiter = waiters.removeValue(forKey: mid) else {
            early[mid] = value
            return nil
        }
        return waiter
    }

    /// Takes the waiter of `mid` (cancellation or a dropped connection); a late ack is ignored.
    mutating func abandon(_ mid: Int32) -> CheckedContinuation<Value, Never>? {
        guard case .waiting(let continuation) = waiters[mid] else { return nil }
        waiters[mid] = .ignore
        return continuation
    }

    /// Removes everything; returns the waiting continuations.
    mutating func drain() -> [CheckedContinuation<Value, Never>] {
        defer {
            waiters = [:]
            early = [:]
        }
        return waiters.values.compactMap { if case .waiting(let c) = $0 { c } else { nil } }
    }

    /// Removes everything; returns every waiter (continuations and handlers).
    mutating func drainAll() -> [AckWaiter<Value>] {
        defer {
            waiters = [:]
            early = [:]
        }
        return Array(waiters.values)
    }

}

/// The box passed to libmosquitto as user data. All mutable state sits behind `state`; the
/// library is never called while that lock is held (it re-enters the callbacks).
///
/// The instance runs on a `Reactor.EventLoop`, with no thread of its own
/// (`MQTTClientCore+EventLoop.swift`, docs/mqtt.md "The event loop").
final class MQTTClientCore: @unchecked Sendable {
    enum Phase: Equatable {
        case idle, connecting, connected, reconnecting, stopping, stopped
    }

    /// A class, not a struct: every inbound message walks the routes, and copying a struct out of
    /// the array retained its filter, continuation and handler each time.
    final class Route: Sendable {
        let id: UInt64
        let filter: String
        /// No wildcard and not shared: matches by string equality.
        let exactMatch: Bool
        let qos: MQTTQoS
        let options: MQTTSubscribeOptions
        let continuation: AsyncStream<MQTTMessage>.Continuation
        /// When set, messages go to this handler on the loop thread instead of the stream.
        let handler: (@Sendable (MQTTMessage) -> Void)?

        init(id: UInt64, filter: String, qos: MQTTQoS, options: MQTTSubscribeOptions,
             continuation: AsyncStream<MQTTMessage>.Continuation, handler: (@Sendable (MQTTMessage) -> Void)? = nil) {
            self.id = id
            self.filter = filter
            self.exactMatch = MQTTTopic.isExact(filter)
            self.qos = qos
            self.options = options
            self.continuation = continuation
            self.handler = handler
        }
    }

    struct QueuedPublish {
        var id: UInt64
        var topic: String
        var payload: [UInt8]
        var qos: MQTTQoS
        var retain: Bool
        var properties: MQTTPublishProperties
        /// Whoever waits for the PUBACK/PUBCOMP: an awaiting `publish`, or a detached publish's handler.
        var completion: AckWaiter<Result<Void, MQTTError>>
    }

    struct State {
        var phase: Phase = .idle
        var everConnected = false
        /// Between a successful CONNACK and the end of that connection.
        var linkUp = false
        /// Bumped whenever a connection ends; a QoS 0 publish from an older connection is lost.
        var generation = 0
        var reconnectAttempt = 0
        var publishes = AckTable<Result<Void, MQTTError>>()
        var qos0Waiting: Set<Int32> = []
        var subacks = AckTable<Result<[Int32], MQTTError>>()
        var unsubacks = AckTable<Result<Void, MQTTError>>()
        var outstandingQoS12 = 0
        /// QoS ≥ 1 publishes issued while disconnected, sent in order after the next CONNACK.
        var offlineQueue: [QueuedPublish] = []
        var routes: [Route] = []
        var nextID: UInt64 = 0
        var listeners: [UInt64: AsyncStream<MQTTConnectionEvent>.Continuation] = [:]
        var connectWaiter: CheckedContinuation<Result<Void, MQTTError>, Never>?
        var lastConnectFailure: MQTTError?
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        /// The loop driver has stopped for good.
        var exited = false
    }

    let mosq: OpaquePointer
    let options: MQTTConnectOptions
    let logger: Logger
    let connectProperties: MosquittoPropertyList
    /// Passphrase of the TLS private key, handed to OpenSSL by `tlsKeyPassword`.
    let keyPassword: [UInt8]?
    let state = Mutex(State())
    let deliveredInbound = Atomic<Int>(0)
    let droppedInbound = Atomic<Int>(0)
    let unroutedInbound = Atomic<Int>(0)
    /// The loop that drives the instance.
    let loop: EventLoop
    /// The driver's loop-thread state.
    let driver = LoopDriver()
    /// Whether libmosquitto's log callback is set (``syncLogCallback()``).
    let logCallbackSet = Atomic<Bool>(false)

    init(options: MQTTConnectOptions, logger: Logger, loop: EventLoop) throws(MQTTError) {
        self.loop = loop
        try options.validate()
        if let source = options.tls?.keyPassword {
            keyPassword = Array(try source.resolve().utf8)
        } else {
            keyPassword = nil
        }
        _ = mosquittoLibraryInit
        guard let mosq = mosquitto_new(options.clientID, options.cleanSession, nil) else {
            throw .library(errno == ENOMEM ? .noMemory : .invalidArgument, operation: "mosquitto_new")
        }
        self.mosq = mosq
        self.options = options
        var logger = logger
        logger[metadataKey: "mqtt.client"] = "\(options.clientID ?? "(generated)")"
        self.logger = logger
        self.connectProperties = MosquittoPropertyList()
        // From here on `deinit` destroys `mosq`.
        mosquitto_user_data_set(mosq, Unmanaged.passUnretained(self).toOpaque())
        try configure()
    }

    deinit {
        // The driver has finished (its watch, timers and hook held references). Detach the
        // callbacks so that nothing can call back into this object while libmosquitto tears down.
        uninstallCallbacks()
        mosquitto_destroy(mosq)
    }

    private func check(_ rc: Int32, _ operation: String) throws(MQTTError) {
        if rc != 0 { throw .library(MosquittoCode(code: rc), operation: operation) }
    }

    private func configure() throws(MQTTError) {
        try check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, options.protocolVersion.rawValue), "protocol version")
        // API calls only queue packets (packet__queue writes inline only in the unthreaded
        // mode); the loop's flush hook writes them.
        try check(mosquitto_threaded_set(mosq, true), "mosquitto_threaded_set")
        try check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, options.tcpNoDelay ? 1 : 0), "TCP_NODELAY")
        try check(mosquitto_max_inflight_messages_set(mosq, UInt32(options.maxInflightMessages)), "max inflight")
        installCallbacks()

        if options.protocolVersion == .v5 {
            if let expiry = options.sessionExpiryInterval {
                try connectProperties.check(
                    mosquitto_property_add_int32(
                        &connectProperties.pointer, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), expiry),
                    "session expiry interval")
            }
            if let size = options.maximumPacketSize {
                try connectProperties.check(
                    mosquitto_property_add_int32(
                        &connectProperties.pointer, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), size),
                    "maximum packet size")
            }
            try connectProperties.addUserProperties(options.connectUserProperties)
        }
        if let will = options.will {
            let properties = options.protocolVersion == .v5 ? try will.properties.makePropertyList() : MosquittoPropertyList()
            let rc = will.payload.withUnsafeBytes {
                mosquitto_will_set_v5(
                    mosq, will.topic, Int32($0.count), $0.baseAddress, Int32(will.qos.rawValue), will.retain,
                    properties.pointer)
            }
            try check(rc, "mosquitto_will_set_v5")
            _ = properties.release()  // owned by libmosquitto on success
        }
        if let credentials = options.credentials {
            let password = try credentials.password?.resolve()
            try check(mosquitto_username_pw_set(mosq, credentials.username, password), "mosquitto_username_pw_set")
        }
        if let tls = options.tls {
            try check(
                mosquitto_tls_set(
                    mosq, tls.caFile, tls.caDirectory, tls.certificateFile, tls.keyFile,
                    keyPassword == nil ? nil : tlsKeyPassword),
                "mosquitto_tls_set")
            try check(mosquitto_tls_opts_set(mosq, 1, tls.version, tls.ciphers), "mosquitto_tls_opts_set")
            try check(mosquitto_tls_insecure_set(mosq, !tls.verifyHostname), "mosquitto_tls_insecure_set")
        }
    }

    // MARK: Events

    func emit(_ event: MQTTConnectionEvent) {
        let listeners = state.withLock { Array($0.listeners.values) }
        for listener in listeners { listener.yield(event) }
    }

    func connectionEvents() -> AsyncStream<MQTTConnectionEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MQTTConnectionEvent.self, bufferingPolicy: .bufferingNewest(256))
        let added = state.withLock { s -> UInt64? in
            guard s.phase != .stopped else { return nil }
            s.nextID += 1
            s.listeners[s.nextID] = continuation
            return s.nextID
        }
        guard let id = added else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.listeners.removeValue(forKey: id) }
        }
        return stream
    }

    // MARK: Driver (shared parts; the rest is in MQTTClientCore+EventLoop.swift)

    enum AfterFailure { case exit(MQTTError?), retry(attempt: Int, delay: Duration) }

    /// The connection attempt or the connection failed with `code`: stop (with the error to
    /// report) or retry after the policy's backoff; a retry is announced (`.reconnecting`) here.
    func afterFailure(_ code: MosquittoCode) -> AfterFailure {
        let decision = state.withLock { s -> AfterFailure in
            if s.phase == .stopping || s.phase == .stopped { return .exit(nil) }
            let failure = s.lastConnectFailure ?? .library(code, operation: s.everConnected ? "network loop" : "connect")
            s.lastConnectFailure = nil
            if !s.everConnected && !options.reconnect.retryInitialConnect { return .exit(failure) }
            if s.everConnected && !options.reconnect.enabled { return .exit(failure) }
            if s.phase == .connected { s.phase = .reconnecting }
            s.reconnectAttempt += 1
            return .retry(attempt: s.reconnectAttempt, delay: options.reconnect.delay(forAttempt: s.reconnectAttempt))
        }
        if case .retry(let attempt, let delay) = decision {
            logger.info("MQTT reconnect attempt \(attempt) in \(delay) after: \(code)")
            emit(.reconnecting(attempt: attempt, delay: delay))
        }
        return decision
    }

    func connectCall() -> Int32 {
        mosquitto_connect_bind_v5(
            mosq, options.host, Int32(options.port), Int32(options.keepAlive), options.bindAddress,
            connectProperties.pointer)
    }

    /// Runs last, on the loop, after the driver released its watch, timers and hook: fails every
    /// waiter and ends every stream.
    func finish(_ error: MQTTError?) {
        releaseDriver()
        struct Leftovers {
            var connectWaiter: CheckedContinuation<Result<Void, MQTTError>, Never>?
            var publishes: [AckWaiter<Result<Void, MQTTError>>] = []
            var subacks: [CheckedContinuation<Result<[Int32], MQTTError>, Never>] = []
            var unsubacks: [CheckedContinuation<Result<Void, MQTTError>, Never>] = []
            var routes: [Route] = []
            var listeners: [AsyncStream<MQTTConnectionEvent>.Continuation] = []
            var exitWaiters: [CheckedContinuation<Void, Never>] = []
            var wasConnected = false
        }
        let leftovers = state.withLock { s -> Leftovers in
            var l = Leftovers()
            l.wasConnected = s.phase == .connected
            s.phase = .stopped
            s.exited = true
            l.connectWaiter = s.connectWaiter
            s.connectWaiter = nil
            l.publishes = s.publishes.drainAll() + s.offlineQueue.map(\.completion)
            s.offlineQueue = []
            s.qos0Waiting = []
            l.subacks = s.subacks.drain()
            l.unsubacks = s.unsubacks.drain()
            l.routes = s.routes
            s.routes = []
            l.listeners = Array(s.listeners.values)
            s.listeners = [:]
            l.exitWaiters = s.exitWaiters
            s.exitWaiters = []
            return l
        }
        if let error { logger.error("MQTT client stopped: \(error)") }
        leftovers.connectWaiter?.resume(returning: .failure(error ?? .closed))
        for c in leftovers.publishes { c.deliver(.failure(.closed)) }
        for c in leftovers.subacks { c.resume(returning: .failure(.closed)) }
        for c in leftovers.unsubacks { c.resume(returning: .failure(.closed)) }
        for route in leftovers.routes { route.continuation.finish() }
        for listener in leftovers.listeners {
            if leftovers.wasConnected { listener.yield(.disconnected(reason: error)) }
            listener.finish()
        }
        for c in leftovers.exitWaiters { c.resume() }
    }

    /// Asks the driver to stop (sends DISCONNECT if connected) and waits until it has.
    func stop() async {
        loop.execute { [self] in stopOnLoop() }
        await waitForExit()
    }

    /// Returns once the loop driver has stopped.
    func waitForExit() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s in
                if s.exited { return true }
                s.exitWaiters.append(c)
                return false
            }
            if done { c.resume() }
        }
    }

    /// Starts the driver: the first connect on the loop.
    func start() {
        loop.execute { [self] in startOnLoop() }
    }

    /// From the owner's `deinit`: stop without waiting. Always queued, even on the loop: the
    /// owner may be dropped inside a callback.
    func stopDetached() {
        loop.execute { [self] in stopOnLoop() }
    }
}

/// OpenSSL's passphrase callback for an encrypted client key. libmosquitto passes its own
/// instance as OpenSSL user data; the box is its user data.
private func tlsKeyPassword(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ rwflag: Int32, _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let buffer, let userdata, let box = mosquitto_userdata(OpaquePointer(userdata)) else { return 0 }
    let core = Unmanaged<MQTTClientCore>.fromOpaque(box).takeUnretainedValue()
    guard let password = core.keyPassword, !password.isEmpty, password.count <= Int(size) else { return 0 }
    password.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    return Int32(password.count)
}
