import CMosquitto
import Logging
import Reactor
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The driver's state on the loop thread (docs/mqtt.md "The event loop"). Every field but
/// `flushRequested` is read and written on the loop thread only.
final class LoopDriver: @unchecked Sendable {
    /// The broker socket's watch while libmosquitto has a socket open.
    var watch: EventLoop.Watch?
    /// Whether the watch also waits for writability (packets left after a short write).
    var writable = false
    /// The flush hook (added at start, removed by `finish`).
    var hook: Int?
    /// `mosquitto_loop_misc` (keep-alive) once a second while the socket is open.
    var miscTimer: EventLoop.Timer?
    /// The backoff before the next connection attempt.
    var retryTimer: EventLoop.Timer?
    /// `disconnect()`'s limit for the DISCONNECT to go out.
    var deadlineTimer: EventLoop.Timer?
    var finished = false
    /// Read on until `EAGAIN`: the last read that tried found more than one packet waiting.
    var readAhead = false
    /// Single-packet reads since the last probe for a burst.
    var readsSinceProbe = 0
    /// An off-loop caller queued a packet and asked the loop to wake up and flush (at most one
    /// such request pending).
    let flushRequested = Atomic<Bool>(false)
}

/// The driver: the instance runs on a `Reactor.EventLoop`, with no thread of its own.
///
/// - Reading: a watch on `mosquitto_socket` calls `mosquitto_loop_read` when it is readable.
/// - Writing: the instance is in threaded mode, so API calls only queue packets; the loop's hook,
///   run each time the loop has no work left, writes them with `mosquitto_loop_write` — a burst
///   of publishes made in one loop turn leaves together, and nothing else is woken. Writability is
///   polled only while a write was short.
/// - Keep-alive: `mosquitto_loop_misc` on a one-second loop timer.
/// - Connecting: DNS and the TCP connect block, so each attempt (`mosquitto_connect_bind_v5`, then
///   `mosquitto_reconnect`) runs on a short-lived helper thread (`mqtt-connect`) that hands the
///   result back with one `loop.execute`; the loop does not touch the instance meanwhile. The TLS
///   handshake then continues non-blocking inside `mosquitto_loop_read`, on the loop. Backoff
///   waits are loop timers.
/// - Callbacks (CONNACK, messages, acks, disconnect) run on the loop thread.
extension MQTTClientCore {
    /// Installs the flush hook and starts the first connection attempt. On the loop.
    func startOnLoop() {
        guard !driver.finished else { return }
        guard state.withLock({ $0.phase == .connecting }) else { return }  // stopped meanwhile
        driver.hook = loop.addHook { [self] in flushWrites() }
        connectAttempt(reconnect: false)
    }

    /// Runs the blocking connect (or reconnect) on a helper thread; the loop continues in
    /// `connectReturned`.
    private func connectAttempt(reconnect: Bool) {
        let rc = runOnHelperThread(named: "mqtt-connect") { [self] in
            let rc = reconnect ? mosquitto_reconnect(mosq) : connectCall()
            let code = MosquittoCode(code: rc)  // errno is this thread's
            loop.execute { [self] in connectReturned(rc, code) }
        }
        if rc != 0 {
            logger.error("MQTT could not start a connect thread: errno \(rc)")
            linkEnded(.system(errno: rc))
        }
    }

    /// The helper thread's connect call returned `rc`. On the loop.
    private func connectReturned(_ rc: Int32, _ code: MosquittoCode) {
        if driver.finished {
            // disconnect() came while the attempt ran and did not wait for it: close what it
            // opened (CONNECT then DISCONNECT, if the socket takes them now).
            if rc == 0 {
                _ = mosquitto_disconnect_v5(mosq, 0, nil)
                _ = mosquitto_loop_write(mosq, 1)
            }
            return
        }
        if rc != 0 {
            logger.debug("MQTT connect failed: \(code)")
            linkEnded(code)
            return
        }
        let fd = mosquitto_socket(mosq)
        guard fd >= 0 else {
            linkEnded(.noConnection)
            return
        }
        driver.writable = false
        driver.watch = loop.watch(fd, for: .readable) { [self] events in socketReady(events) }
        scheduleMisc()
        // The CONNECT packet is queued: the hook writes it before the loop sleeps.
    }

    /// The socket is ready. On the loop.
    private func socketReady(_ events: EventLoop.IOEvents) {
        guard driver.watch != nil else { return }
        // Read on every event: a hang-up reads EOF, and during the TLS handshake a writable
        // socket is progress for `SSL_connect`, which only `mosquitto_loop_read` drives.
        // `mosquitto_loop_read` reads one packet unless QoS > 0 messages are in flight. In a
        // burst, reading on (bounded) until the socket reports EAGAIN saves a poll(2) per
        // packet; with one packet per event that extra read is a wasted system call. So read on
        // while the last such attempt found a second packet, and otherwise try it every 8th event.
        var limit = 1
        if driver.readAhead {
            limit = 16
        } else {
            driver.readsSinceProbe += 1
            if driver.readsSinceProbe >= 8 {
                driver.readsSinceProbe = 0
                limit = 16
            }
        }
        var rounds = 0
        var rc: Int32 = 0
        repeat {
            errno = 0
            rc = mosquitto_loop_read(mosq, 1)
            rounds += 1
        } while rc == 0 && errno != EAGAIN && rounds < limit && mosquitto_socket(mosq) >= 0
        if limit > 1 { driver.readAhead = rounds > 2 }  // the second read found a packet
        if rc != 0 || mosquitto_socket(mosq) < 0 {
            linkEnded(lost(rc))
            return
        }
        if events.contains(.writable) { flushWrites() }
    }

    /// Writes what is queued (the hook, and on writability). On the loop, never inside a
    /// libmosquitto callback.
    func flushWrites() {
        syncLogCallback()
        guard let watch = driver.watch else { return }
        var pending = mosquitto_want_write(mosq)
        if pending {
            let rc = mosquitto_loop_write(mosq, 1)
            if rc != 0 || mosquitto_socket(mosq) < 0 {
                linkEnded(lost(rc))
                return
            }
            pending = mosquitto_want_write(mosq)
            // Until the TLS handshake is done libmosquitto holds the CONNECT back while the
            // socket is writable: waiting for writability would spin. Reads drive the handshake
            // and the next flush writes the CONNECT.
            if pending && options.tls != nil && !state.withLock({ $0.linkUp }) { pending = false }
        }
        if pending != driver.writable {
            driver.writable = pending
            watch.setEvents(pending ? [.readable, .writable] : .readable)
        }
    }

    /// Keep-alive (PINGREQ, and the dead-connection check) every ``miscInterval(keepAlive:)``.
    /// On the loop.
    private func scheduleMisc() {
        driver.miscTimer = loop.schedule(after: Self.miscInterval(keepAlive: options.keepAlive)) { [self] in
            driver.miscTimer = nil
            guard driver.watch != nil else { return }
            let rc = mosquitto_loop_misc(mosq)
            if rc != 0 || mosquitto_socket(mosq) < 0 {
                linkEnded(lost(rc))
                return
            }
            scheduleMisc()
        }
    }

    /// How often `mosquitto_loop_misc` runs: a quarter of the keep-alive, 1 s to 15 s (60 s:
    /// every 15 s, not every second, so an idle client wakes its loop 4 times a minute). The
    /// PINGREQ goes out at most that late: by 1.25 × the keep-alive, inside the broker's 1.5 ×;
    /// a dead connection is noticed at most that late too. No keep-alive (0): once a minute.
    static func miscInterval(keepAlive: Int) -> Duration {
        guard keepAlive > 0 else { return .seconds(60) }
        return min(max(.milliseconds(keepAlive * 250), .seconds(1)), .seconds(15))
    }

    /// The connection attempt failed or the connection ended (libmosquitto closed the socket and,
    /// for an open connection, called `handleDisconnect`). Stops or schedules the next attempt.
    /// On the loop.
    private func linkEnded(_ code: MosquittoCode) {
        guard !driver.finished else { return }
        releaseSocket()
        if state.withLock({ $0.phase == .stopping || $0.phase == .stopped }) {
            finish(nil)
            return
        }
        switch afterFailure(code) {
        case .exit(let error):
            finish(error)
        case .retry(_, let delay):
            driver.retryTimer = loop.schedule(after: delay) { [self] in
                driver.retryTimer = nil
                guard !driver.finished else { return }
                if state.withLock({ $0.phase == .stopping || $0.phase == .stopped }) {
                    finish(nil)
                    return
                }
                connectAttempt(reconnect: true)
            }
        }
    }

    /// The code of a failed read/write/keep-alive call (`errno` read at once), or "connection
    /// lost" when it returned success but libmosquitto closed the socket.
    private func lost(_ rc: Int32) -> MosquittoCode {
        MosquittoCode(code: rc == 0 ? Int32(MOSQ_ERR_CONN_LOST.rawValue) : rc)
    }

    /// Forgets the socket's watch and the keep-alive timer (libmosquitto closes the socket).
    private func releaseSocket() {
        driver.watch?.cancel()
        driver.watch = nil
        driver.writable = false
        driver.miscTimer?.cancel()
        driver.miscTimer = nil
    }

    /// `disconnect()` or the owner's `deinit`. On the loop.
    func stopOnLoop() {
        guard !driver.finished else { return }
        enum Action { case finish, disconnect(sendNow: Bool), none }
        let action = state.withLock { s -> Action in
            switch s.phase {
            case .idle:
                s.phase = .stopped
                return .finish
            case .stopping, .stopped:
                return .none
            case .connecting, .connected, .reconnecting:
                s.phase = .stopping
                return .disconnect(sendNow: s.linkUp)
            }
        }
        switch action {
        case .none:
            return
        case .finish:
            finish(nil)
        case .disconnect(let sendNow):
            guard driver.watch != nil else {
                // No socket: a backoff wait, or a connect on the helper thread (abandoned: it
                // closes what it opened when it returns).
                finish(nil)
                return
            }
            // Connected: DISCONNECT, written by the hook; writing it closes the socket and
            // `linkEnded` finishes. Still waiting for CONNACK: `handleConnect` sends it.
            if sendNow { _ = mosquitto_disconnect_v5(mosq, 0, nil) }
            driver.deadlineTimer = loop.schedule(after: .seconds(3)) { [self] in
                driver.deadlineTimer = nil
                logger.debug("MQTT DISCONNECT not written within 3 s; closing")
                releaseSocket()
                finish(nil)
            }
        }
    }

    /// The driver's part of `finish`: removes the watch, the timers and the hook. On the loop.
    func releaseDriver() {
        driver.finished = true
        releaseSocket()
        driver.retryTimer?.cancel()
        driver.retryTimer = nil
        driver.deadlineTimer?.cancel()
        driver.deadlineTimer = nil
        if let hook = driver.hook {
            loop.removeHook(hook)
            driver.hook = nil
        }
    }

    /// A library call that may have queued a packet was made. On the loop the hook writes it
    /// before the loop sleeps (no wake-up); from another thread the loop is asked, once until
    /// it has run, to wake up and flush.
    @inline(__always)
    func packetsQueued() {
        guard !loop.inLoop else { return }
        if !driver.flushRequested.exchange(true, ordering: .acquiringAndReleasing) {
            loop.execute { [driver] in driver.flushRequested.store(false, ordering: .releasing) }
        }
    }
}

/// Runs `body` on a new detached thread named `name` (at most 15 characters); returns
/// `pthread_create`'s error, 0 on success.
private func runOnHelperThread(named name: String, _ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Context {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let context = Unmanaged.passRetained(Context(name: name, body: body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { raw in
        let context = Unmanaged<Context>.fromOpaque(raw!).takeRetainedValue()
        _ = gatt2mqtt_set_thread_name(context.name)
        context.body()
        return nil
    }, context.toOpaque())
    if rc != 0 { context.release() }
    return Int32(rc)
}
