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

    /// The address of a libdbus object (watch, timeout, message, pending call) as a plain value,
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
        /// Cancel the pending call with this id.
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
        var pendingCalls: [UInt64: Handle] = [:]
        var subscriptions: [UInt64: Subscription] = [:]
        var nextID: UInt64 = 1
        var registry = ObjectRegistry()

        mutating func makeID() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }
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
            guard !address.utf8.contains(0) else { return .failure(.invalidArgument("address contains NUL")) }
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
        return ConnectionBox.from(data).handleIncoming(message)
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

    func execute(_ command: Command) {
        switch command {
        case let .send(handle):
            let msg = handle.pointer
            _ = dbus_connection_send(raw, msg, nil)
            dbus_message_unref(msg)
        case let .call(handle, timeoutMs, box):
            let msg = handle.pointer
            var pending: OpaquePointer?
            let ok = dbus_connection_send_with_reply(raw, msg, &pending, timeoutMs)
            dbus_message_unref(msg)
            guard ok != 0 else { return finish(box, .failure(.outOfMemory)) }
            guard let pending else { return finish(box, .failure(.disconnected)) }
            // Our reference (the one `pendingCalls` holds) is dropped by `complete`, which the
            // loop runs as soon as the reply is dispatched: from `set_notify` on, the loop may do
            // that while this thread still uses `pending`, and libdbus then frees it with its own
            // last reference. Hold one more until this thread is done with it (a fresh-clone CI
            // run crashed in `dbus_pending_call_get_completed` on a freed call).
            dbus_pending_call_ref(pending)
            defer { dbus_pending_call_unref(pending) }
            let registered = state.withLock { s -> Bool in
                guard s.pendingBoxes[box.id] != nil else { return false }  // cancelled meanwhile
                s.pendingCalls[box.id] = Handle(pending)
                return true
            }
            guard registered else {
                dbus_pending_call_cancel(pending)
                dbus_pending_call_unref(pending)
                return
            }
            let data = Unmanaged.passRetained(box).toOpaque()
            let notifySet = dbus_pending_call_set_notify(pending, { pending, data in
                let box = Unmanaged<PendingBox>.fromOpaque(data!).takeUnretainedValue()
                box.connection?.complete(box, pending!)
            }, data, { data in Unmanaged<PendingBox>.fromOpaque(data!).release() })
            if notifySet == 0 {
                Unmanaged<PendingBox>.fromOpaque(data).release()
                dbus_pending_call_cancel(pending)
                forgetPending(box.id)?.unref()
                finish(box, .failure(.outOfMemory))
            } else if dbus_pending_call_get_completed(pending) != 0 {
                complete(box, pending)
            }
        case let .cancel(id):
            if let pending = forgetPending(id) {
                dbus_pending_call_cancel(pending.pointer)
                pending.unref()
            }
        }
    }

    private struct PendingRef {
        let pointer: OpaquePointer
        func unref() { dbus_pending_call_unref(pointer) }
    }

    private func forgetPending(_ id: UInt64) -> PendingRef? {
        state.withLock { s in
            s.pendingBoxes.removeValue(forKey: id)
            return s.pendingCalls.removeValue(forKey: id).map { PendingRef(pointer: $0.pointer) }
        }
    }

    /// A pending call finished (on the loop): steal the reply and resolve the box.
    func complete(_ box: PendingBox, _ pending: OpaquePointer) {
        guard let ref = forgetPending(box.id) else { return }  // already resolved
        defer { ref.unref() }
        guard let reply = dbus_pending_call_steal_reply(pending) else {
            return finish(box, .failure(.disconnected))
        }
        defer { dbus_message_unref(reply) }
        let result: Result<DBusMessage, DBusError>
        do {
            let msg = try DBusMessage(copying: reply)
            if let error = msg.asError {
                if msg.errorName == DBusErrorName.noReply && msg.sender == nil {
                    // Synthesised by libdbus: our timeout, or the connection went away.
                    result = .failure(dbus_connection_get_is_connected(raw) == 0
                        ? .disconnected : .timeout(method: box.method, milliseconds: box.timeoutMs))
                } else {
                    result = .failure(error)
                }
            } else {
                result = .success(msg)
            }
        } catch {
            result = .failure(error)
        }
        finish(box, result)
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
        let (boxes, calls) = state.withLock { s in
            let r = (Array(s.pendingBoxes.values), Array(s.pendingCalls.values))
            s.pendingBoxes = [:]
            s.pendingCalls = [:]
            s.registry = ObjectRegistry()
            return r
        }
        for p in calls {
            dbus_pending_call_cancel(p.pointer)
            dbus_pending_call_unref(p.pointer)
        }
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
    let method: String
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

    init(id: UInt64, method: String, timeoutMs: Int, connection: ConnectionBox,
         callback: (@Sendable (Result<DBusMessage, DBusError>) -> Void)? = nil) {
        self.id = id
        self.method = method
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
