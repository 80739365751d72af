import CDBus
import Reactor
import Synchronization

/// The state shared between callers and the `Reactor.EventLoop` that drives one connection
/// (its watches, timeouts and dispatching: `ConnectionBox+Loop.swift`).
///
/// `@unchecked Sendable`: `raw` is an immutable pointer to a libdbus connection (thread-safe
/// after `dbus_threads_init_default()`: callers send on their own thread, the loop reads and
/// dispatches); all mutable state sits behind `state`'s and `loopState`'s `Mutex`es. The box is
/// the user data of the connection's filter (retained once there, released by libdbus' free
/// function when the filter is removed).
final class ConnectionBox: @unchecked Sendable {
    let raw: OpaquePointer
    let state: Mutex<State>
    /// The event loop that drives this connection.
    let loop: EventLoop
    /// libdbus' watches and timeouts as the loop's, and what teardown must undo.
    let loopState = Mutex(LoopState())

    /// The address of a libdbus object (watch, timeout, message) as a plain value,
    /// so that it can sit in the locked state; it is turned back into a pointer by the thread
    /// that uses the object (watches and timers: the loop).
    struct Handle: Hashable, Sendable {
        let bits: UInt
        init(_ p: OpaquePointer) { bits = UInt(bitPattern: Int(bitPattern: p)) }
        var pointer: OpaquePointer { OpaquePointer(bitPattern: Int(bitPattern: bits))! }
    }

    enum Command {
        /// Send an owned message (+1), no reply wanted.
        case send(Handle)
        /// Send an owned message as a call, completing `PendingBox`.
        case call(Handle, timeoutMs: Int32, PendingBox)
        /// Forget the unanswered call of the pending box with this id (its reply, should it come, is dropped).
        case cancel(UInt64)
    }

    struct Subscription {
        var rule: DBusMatchRule
        var continuation: AsyncThrowingStream<DBusMessage, any Error>.Continuation
        /// Current unique-name owner of `rule.sender` when that is a well-known name.
        var senderOwner: String?
    }

    struct State {
        /// No new work is accepted (closed by us or lost).
        var closed = false
        var stopRequested = false
        var pendingBoxes: [UInt64: PendingBox] = [:]
        /// The calls sent and not yet answered, by the serial this connection gave them.
        var calls: [UInt32: Call] = [:]
        /// A pending box's call serial (for ``Command/cancel(_:)``).
        var serials: [UInt64: UInt32] = [:]
        /// The last serial given. Ours count from 2^31 up; libdbus numbers the few messages it
        /// sends itself (`Hello` on a bus it registers with) from 1, so the two never meet.
        var lastSerial: UInt32 = 0x8000_0000
        var subscriptions: [UInt64: Subscription] = [:]
        var nextID: UInt64 = 1
        var registry = ObjectRegistry()
        /// The one loop timer that expires calls (``armExpiry(by:)``): when it fires, which
        /// arming it was, and the timer.
        var expiryAt: ContinuousClock.Instant?
        var expiryGeneration: UInt64 = 0
        var expiryTimer: EventLoop.Timer?

        mutating func makeID() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }

        /// The next serial of ours that no unanswered call holds (after 2^32 - 1, 2^31 again).
        mutating func takeSerial() -> UInt32 {
            repeat {
                lastSerial = lastSerial == .max ? 0x8000_0000 : lastSerial + 1
            } while calls[lastSerial] != nil
            return lastSerial
        }
    }

    /// A call sent and not yet answered: its box, and when it times out.
    struct Call {
        let box: PendingBox
        let deadline: ContinuousClock.Instant
    }

    private init(raw: OpaquePointer, loop: EventLoop) {
        self.raw = raw
        self.loop = loop
        self.state = Mutex(State())
    }

    /// A started connection; `uniqueName` is `nil` until `Hello` has been answered.
    struct Opened: Sendable {
        let box: ConnectionBox
        let uniqueName: String?
    }

    /// Opens a connection and hands it to `loop` (blocking; runs on a connect thread; no thread
    /// of its own afterwards, see `ConnectionBox+Loop.swift`).
    ///
    /// For an address, `Hello` is left to the caller (sent through the loop with a timeout)
    /// rather than `dbus_bus_register`, which holds a process-wide libdbus lock while it blocks:
    /// one mute server would stall every other connect in the process.
    static func open(_ bus: DBusBus, loop: EventLoop) -> Result<Opened, DBusError> {
        var err = CDBus.DBusError()
        dbus_error_init(&err)
        let raw: OpaquePointer?
        switch bus {
        case .system, .session:
            raw = dbus_bus_get_private(bus == .system ? DBUS_BUS_SYSTEM : DBUS_BUS_SESSION, &err)
            if raw == nil { return .failure(LibDBus.take(&err)) }
        case let .address(address):
            guard !address.containsNUL else { return .failure(.invalidArgument("address contains NUL")) }
            raw = address.withCString { dbus_connection_open_private($0, &err) }
            if raw == nil { return .failure(LibDBus.take(&err)) }
        }
        guard let raw else { return .failure(.connectionFailed(name: "", message: "no connection")) }
        dbus_connection_set_exit_on_disconnect(raw, 0)
        let unique = dbus_bus_get_unique_name(raw).map { String(cString: $0) }
        let box = ConnectionBox(raw: raw, loop: loop)
        guard box.installOnLoop() else {
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
            return .failure(.outOfMemory)
        }
        return .success(Opened(box: box, uniqueName: unique))
    }

    // MARK: libdbus integration

    var userData: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ data: UnsafeMutableRawPointer?) -> ConnectionBox {
        Unmanaged<ConnectionBox>.fromOpaque(data!).takeUnretainedValue()
    }

    /// Adds the filter that sees every incoming message, retaining `self` once (released by
    /// libdbus' free function when the filter is removed at teardown).
    func installFilter() -> Bool {
        let retained = Unmanaged.passRetained(self).toOpaque()
        guard dbus_connection_add_filter(raw, ConnectionBox.filterFunction, retained, { data in
            Unmanaged<ConnectionBox>.fromOpaque(data!).release()
        }) != 0 else {
            Unmanaged<ConnectionBox>.fromOpaque(retained).release()
            return false
        }
        return true
    }

    static let filterFunction: DBusHandleMessageFunction = { _, message, data in
        // `message` is borrowed: libdbus keeps ownership, so it is never unref'd here.
        guard let message, let data else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        let box = ConnectionBox.from(data)
        switch dbus_message_get_type(message) {
        case Int32(DBUS_MESSAGE_TYPE_METHOD_RETURN), Int32(DBUS_MESSAGE_TYPE_ERROR):
            return box.answer(message) ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        default:
            return box.handleIncoming(message)
        }
    }

    // MARK: Commands, on the caller's thread

    /// Runs a command on the calling thread; `false` (and nothing done) once closed.
    ///
    /// libdbus is thread-safe once `dbus_threads_init_default()` ran: sending from here writes
    /// the message at once (no hand-off to the loop, which keeps reading and dispatching; what
    /// the socket does not take is left to the write watch, carried over to the loop). `io`
    /// keeps teardown from closing the connection while a command is under way.
    func perform(_ command: Command) -> Bool {
        io.withLock { open -> Bool in
            guard open, !state.withLock({ $0.closed }) else { return false }
            execute(command)
            return true
        }
    }

    /// Open until `teardown`; held while a caller's command runs.
    let io = Mutex(true)

    /// Whether the connection can pass unix descriptors; `nil` once closed (`raw` is only
    /// touched off the loop under `io`: teardown may release it at any moment otherwise).
    func canPassUnixFDs() -> Bool? {
        io.withLock { open -> Bool? in
            guard open, !state.withLock({ $0.closed }) else { return nil }
            return dbus_connection_can_send_type(raw, TypeCode.unixFD) != 0
        }
    }

    /// Sends an owned message without waiting; the message is released either way.
    func send(_ message: OpaquePointer) throws(DBusError) {
        guard perform(.send(Handle(message))) else {
            dbus_message_unref(message)
            throw .disconnected
        }
    }

    /// `close()`: the loop tears down (after the work already queued), once.
    func requestStop() {
        let first = state.withLock { s -> Bool in
            defer { s.stopRequested = true }
            return !s.stopRequested
        }
        if first { loop.execute { [self] in beginLoopTeardown() } }
    }

    // Calls are sent with `dbus_connection_send` under a serial of ours and their replies are
    // matched here (the filter sees them), as `floor_bridge.c` does: `dbus_connection_send_with_reply`
    // made a libdbus pending call, a timeout, and built in advance the `NoReply` error it would
    // deliver on that timeout, ~25k instructions per call (docs/benchmarks.md, "Instructions per
    // command, session 6"). The timeouts share one loop timer (`armExpiry`); a lost connection
    // fails every call in `closeAndRelease`, after the last replies received were dispatched.
    func execute(_ command: Command) {
        switch command {
        case let .send(handle):
            let msg = handle.pointer
            if dbus_message_get_serial(msg) == 0 { dbus_message_set_serial(msg, state.withLock { $0.takeSerial() }) }
            _ = dbus_connection_send(raw, msg, nil)
            dbus_message_unref(msg)
        case let .call(handle, timeoutMs, box):
            let msg = handle.pointer
            enum Registration { case sent(UInt32), cancelled, closed }
            let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(timeoutMs)))
            let registration = state.withLock { s -> Registration in
                guard s.pendingBoxes[box.id] != nil else { return .cancelled }
                guard !s.closed else { return .closed }
                let serial = s.takeSerial()
                s.calls[serial] = Call(box: box, deadline: deadline)
                s.serials[box.id] = serial
                return .sent(serial)
            }
            guard case let .sent(serial) = registration else {
                dbus_message_unref(msg)
                if case .closed = registration { finish(box, .failure(.disconnected)) }
                return
            }
            dbus_message_set_serial(msg, serial)
            let sent = dbus_connection_send(raw, msg, nil)
            dbus_message_unref(msg)
            guard sent != 0 else {
                if takeCall(serial) != nil { finish(box, .failure(.outOfMemory)) }
                return
            }
            armExpiry(by: deadline)
        case let .cancel(id):
            state.withLock { s in
                s.pendingBoxes.removeValue(forKey: id)
                guard let serial = s.serials.removeValue(forKey: id) else { return }
                s.calls.removeValue(forKey: serial)
            }
        }
    }

    /// Makes sure the expiry timer fires by `deadline`. One loop timer serves every pending call,
    /// armed for the earliest deadline; calls share their timeout, so a new call's deadline is
    /// almost always later than the armed one and costs nothing here, and an answered call
    /// leaves the timer alone (it finds nothing due when it fires, and is not armed again).
    private func armExpiry(by deadline: ContinuousClock.Instant) {
        let arming = state.withLock { s -> (generation: UInt64, replaced: EventLoop.Timer?)? in
            if let at = s.expiryAt, at <= deadline { return nil }
            s.expiryAt = deadline
            s.expiryGeneration &+= 1
            defer { s.expiryTimer = nil }
            return (s.expiryGeneration, s.expiryTimer)
        }
        guard let arming else { return }
        let timer = loop.schedule(after: ContinuousClock.now.duration(to: deadline)) { [weak self] in
            self?.expireCalls(arming: arming.generation)
        }
        arming.replaced?.cancel()
        let current = state.withLock { s -> Bool in
            guard s.expiryGeneration == arming.generation else { return false }  // armed earlier meanwhile
            s.expiryTimer = timer
            return true
        }
        if !current { timer.cancel() }
    }

    /// The expiry timer fired (loop thread): fails every call whose deadline passed with
    /// `.timeout` and arms the timer again for the earliest call left.
    private func expireCalls(arming generation: UInt64) {
        let now = ContinuousClock.now
        let (due, next) = state.withLock { s -> ([Call], ContinuousClock.Instant?) in
            if s.expiryGeneration == generation { s.expiryAt = nil; s.expiryTimer = nil }
            var due: [Call] = []
            var next: ContinuousClock.Instant?
            for (serial, call) in s.calls {
                if call.deadline <= now {
                    due.append(call)
                    s.calls.removeValue(forKey: serial)
                    s.serials.removeValue(forKey: call.box.id)
                } else if next.map({ call.deadline < $0 }) ?? true {
                    next = call.deadline
                }
            }
            return (due, next)
        }
        for call in due { finish(call.box, .failure(.timeout(method: call.box.method, milliseconds: call.box.timeoutMs))) }
        if let next { armExpiry(by: next) }
    }

    /// Takes the unanswered call with this serial out (nil: answered, timed out or cancelled).
    private func takeCall(_ serial: UInt32) -> Call? {
        state.withLock { s in
            guard let call = s.calls.removeValue(forKey: serial) else { return nil }
            s.serials.removeValue(forKey: call.box.id)
            return call
        }
    }

    /// A method return or error (loop thread, from the filter): whether it answered a call of
    /// ours. One that did not (a reply to what libdbus sent itself) is left to libdbus.
    func answer(_ reply: OpaquePointer) -> Bool {
        guard let call = takeCall(dbus_message_get_reply_serial(reply)) else { return false }
        let result: Result<DBusMessage, DBusError>
        do {
            let msg = try DBusMessage(copying: reply)
            result = msg.asError.map { .failure($0) } ?? .success(msg)
        } catch {
            result = .failure(error)
        }
        finish(call.box, result)
        return true
    }

    private func finish(_ box: PendingBox, _ result: Result<DBusMessage, DBusError>) {
        state.withLock { _ = $0.pendingBoxes.removeValue(forKey: box.id) }
        box.resolve(result)
    }

    /// Marks the connection closed and ends every signal stream with `.disconnected`.
    func markClosed() {
        let subs = state.withLock { s -> [Subscription] in
            s.closed = true
            let all = Array(s.subscriptions.values)
            s.subscriptions = [:]
            return all
        }
        for sub in subs { sub.continuation.finish(throwing: DBusError.disconnected) }
    }

    /// Closes the libdbus connection, fails what is still pending, removes the watch and timeout
    /// functions and the filter (releasing the filter's retain of this box), unrefs the connection.
    func closeAndRelease() {
        dbus_connection_close(raw)
        while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
        let (boxes, expiry) = state.withLock { s in
            let r = (Array(s.pendingBoxes.values), s.expiryTimer)
            s.pendingBoxes = [:]
            s.calls = [:]
            s.serials = [:]
            s.registry = ObjectRegistry()
            s.expiryAt = nil
            s.expiryTimer = nil
            s.expiryGeneration &+= 1
            return r
        }
        expiry?.cancel()
        for b in boxes { b.resolve(.failure(.disconnected)) }
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        // Releases the filter's retain of this box (exactly once, via the free function).
        dbus_connection_remove_filter(raw, ConnectionBox.filterFunction, Unmanaged.passUnretained(self).toOpaque())
        dbus_connection_unref(raw)
    }
}

/// One outstanding method call. The continuation is resumed exactly once: by the reply, the
/// timeout, the connection's end or cancellation, whichever comes first.
final class PendingBox: Sendable {
    let id: UInt64
    private let interface: String?
    private let member: String
    /// `interface.member`, for the timeout's error (composed only then: two allocations a call).
    var method: String { (interface.map { $0 + "." } ?? "") + member }
    let timeoutMs: Int
    weak let connection: ConnectionBox?
    /// Takes the outcome instead of a continuation (``DBusConnection/call(destination:path:interface:method:arguments:timeout:completion:)``).
    let callback: (@Sendable (Result<DBusMessage, DBusError>) -> Void)?

    private struct State {
        var continuation: CheckedContinuation<Result<DBusMessage, DBusError>, Never>?
        var early: Result<DBusMessage, DBusError>?
        var done = false
        /// The callback may be called: the call that sent this box has returned from
        /// ``ConnectionBox/perform(_:)`` (a reply found completed there is resolved under the
        /// connection's `io` lock, where a callback that starts the next call would take that
        /// lock again).
        var armed = false
    }
    private let state = Mutex(State())

    init(id: UInt64, interface: String?, member: String, timeoutMs: Int, connection: ConnectionBox,
         callback: (@Sendable (Result<DBusMessage, DBusError>) -> Void)? = nil) {
        self.id = id
        self.interface = interface
        self.member = member
        self.timeoutMs = timeoutMs
        self.connection = connection
        self.callback = callback
    }

    func attach(_ c: CheckedContinuation<Result<DBusMessage, DBusError>, Never>) {
        let early: Result<DBusMessage, DBusError>? = state.withLock { s in
            if let e = s.early { s.early = nil; return e }
            s.continuation = c
            return nil
        }
        if let early { c.resume(returning: early) }
    }

    /// Lets the callback be called: at once with an outcome that came before, else when it comes.
    func arm() {
        let early = state.withLock { s -> Result<DBusMessage, DBusError>? in
            s.armed = true
            defer { s.early = nil }
            return s.early
        }
        if let early { callback?(early) }
    }

    func resolve(_ r: Result<DBusMessage, DBusError>) {
        if let callback {
            let now = state.withLock { s -> Bool in
                guard !s.done else { return false }
                s.done = true
                if s.armed { return true }
                s.early = r
                return false
            }
            if now { callback(r) }
            return
        }
        let c: CheckedContinuation<Result<DBusMessage, DBusError>, Never>? = state.withLock { s in
            guard !s.done else { return nil }
            s.done = true
            if let c = s.continuation { s.continuation = nil; return c }
            s.early = r
            return nil
        }
        c?.resume(returning: r)
    }
}
