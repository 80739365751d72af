import CDBus
#if canImport(Glibc)
import Glibc
#endif
import Reactor
import Synchronization

/// A connection driven by its `Reactor.EventLoop`, with no thread of its own (docs/dbus.md
/// "The event loop").
///
/// libdbus' watches become loop watches (enabled/disabled and read/write flags through
/// `setEvents`), its timeouts loop timers (re-armed after each expiry, as libdbus' timeouts
/// repeat until removed). Reading, `dbus_watch_handle`/`dbus_timeout_handle` and dispatching
/// (until `dbus_connection_dispatch` says complete) all happen on the loop thread, so filters,
/// pending-call notifications (replies resume their continuations there) and signal deliveries
/// run on it. When libdbus queues incoming data by other means (a call completing on another
/// thread, say) its dispatch-status function flags it; a loop hook dispatches before the loop
/// sleeps, and a wake-up is sent when the flag is raised off the loop.
///
/// Sending happens on the caller's thread under `io` (on the loop thread that is the loop
/// itself; libdbus writes at once what the socket takes and leaves the rest to the write watch).
extension ConnectionBox {
    struct LoopWatch {
        var fd: Int32
        /// The loop's watch; nil while parked (disabled after a hang-up, see `watchReady`).
        var watch: EventLoop.Watch?
        var enabled: Bool
        var events: EventLoop.IOEvents
    }

    struct LoopTimer {
        var timer: EventLoop.Timer?
        /// Bumped by every re-arm, so a timer body that lost a race does nothing.
        var generation: UInt64
    }

    struct LoopState {
        var watches: [Handle: LoopWatch] = [:]
        var timers: [Handle: LoopTimer] = [:]
        var nextGeneration: UInt64 = 1
        var hook: Int?
        /// libdbus has incoming messages queued that nobody dispatched yet.
        var dispatchPending = false
        /// Teardown ran: no new watch or timer is armed.
        var finished = false
    }

    /// Installs the filter and the loop's watch, timeout and dispatch-status functions (on any
    /// thread: the loop carries the registrations over), then dispatches what libdbus may
    /// already hold (`dbus_bus_get_private` registers before we get the connection).
    func installOnLoop() -> Bool {
        guard installFilter() else { return false }
        let hook = loop.addHook { [self] in
            let pending = loopState.withLock { s -> Bool in
                defer { s.dispatchPending = false }
                return s.dispatchPending && !s.finished
            }
            if pending { dispatchOnLoop() }
        }
        loopState.withLock { $0.hook = hook }
        let watchesOK = dbus_connection_set_watch_functions(raw, { watch, data in
            ConnectionBox.from(data).loopAddWatch(watch!)
            return 1
        }, { watch, data in
            ConnectionBox.from(data).loopRemoveWatch(watch!)
        }, { watch, data in
            ConnectionBox.from(data).loopToggleWatch(watch!)
        }, userData, nil)
        let timersOK = dbus_connection_set_timeout_functions(raw, { t, data in
            ConnectionBox.from(data).loopArmTimer(t!)
            return 1
        }, { t, data in
            ConnectionBox.from(data).loopRemoveTimer(t!)
        }, { t, data in
            ConnectionBox.from(data).loopArmTimer(t!)
        }, userData, nil)
        dbus_connection_set_dispatch_status_function(raw, { _, status, data in
            guard status == DBUS_DISPATCH_DATA_REMAINS else { return }
            ConnectionBox.from(data).loopDispatchNeeded()
        }, userData, nil)
        guard watchesOK != 0, timersOK != 0 else {
            // Out of memory: the caller closes the connection; leave nothing on the loop.
            dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
            dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
            dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
            releaseLoopRegistrations()
            return false
        }
        loop.execute { [self] in dispatchOnLoop() }
        return true
    }

    // MARK: Watches

    private static func events(_ flags: UInt32) -> EventLoop.IOEvents {
        var e: EventLoop.IOEvents = []
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { e.insert(.readable) }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { e.insert(.writable) }
        return e
    }

    private func loopAddWatch(_ w: OpaquePointer) {
        let handle = Handle(w)
        let fd = dbus_watch_get_unix_fd(w)
        let enabled = dbus_watch_get_enabled(w) != 0
        let events = Self.events(dbus_watch_get_flags(w))
        guard fd >= 0 else { return }
        loopState.withLock { s in
            guard !s.finished else { return }
            s.watches[handle]?.watch?.cancel()
            let watch = loop.watch(fd, for: enabled ? events : []) { [self] revents in watchReady(handle, revents) }
            s.watches[handle] = LoopWatch(fd: fd, watch: watch, enabled: enabled, events: events)
        }
    }

    private func loopToggleWatch(_ w: OpaquePointer) {
        let handle = Handle(w)
        let enabled = dbus_watch_get_enabled(w) != 0
        let events = Self.events(dbus_watch_get_flags(w))
        loopState.withLock { s in
            guard !s.finished, var entry = s.watches[handle] else { return }
            entry.enabled = enabled
            entry.events = events
            if let watch = entry.watch {
                watch.setEvents(enabled ? events : [])
            } else if enabled {
                entry.watch = loop.watch(entry.fd, for: events) { [self] revents in watchReady(handle, revents) }
            }
            s.watches[handle] = entry
        }
    }

    private func loopRemoveWatch(_ w: OpaquePointer) {
        let entry = loopState.withLock { $0.watches.removeValue(forKey: Handle(w)) }
        entry?.watch?.cancel()
    }

    /// A watched descriptor is ready (loop thread).
    private func watchReady(_ handle: Handle, _ revents: EventLoop.IOEvents) {
        let enabled = loopState.withLock { s -> Bool? in
            guard let entry = s.watches[handle] else { return nil }
            if !entry.enabled {
                // A hang-up on a disabled watch would be reported on every poll: park the loop's
                // watch until libdbus enables it again (its enabled twin sees the hang-up).
                s.watches[handle]?.watch?.cancel()
                s.watches[handle]?.watch = nil
            }
            return entry.enabled
        }
        guard enabled == true else { return }
        var flags: UInt32 = 0
        if revents.contains(.readable) { flags |= DBUS_WATCH_READABLE.rawValue }
        if revents.contains(.writable) { flags |= DBUS_WATCH_WRITABLE.rawValue }
        let r = revents.rawValue
        if r & Int16(POLLERR) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
        if r & Int16(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
        if r & Int16(POLLNVAL) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
        _ = dbus_watch_handle(handle.pointer, flags)
        dispatchOnLoop()
    }

    // MARK: Timeouts

    /// Adds or re-arms a timeout (libdbus' add and toggle functions): a fresh loop timer when
    /// enabled, none when disabled.
    private func loopArmTimer(_ t: OpaquePointer) {
        let handle = Handle(t)
        let enabled = dbus_timeout_get_enabled(t) != 0
        let interval = dbus_timeout_get_interval(t)
        loopState.withLock { s in
            s.timers[handle]?.timer?.cancel()
            guard !s.finished else { return }
            let generation = s.nextGeneration
            s.nextGeneration += 1
            var timer: EventLoop.Timer?
            if enabled {
                timer = loop.schedule(after: .milliseconds(Int64(max(0, interval)))) { [self] in
                    timerFired(handle, generation)
                }
            }
            s.timers[handle] = LoopTimer(timer: timer, generation: generation)
        }
    }

    private func loopRemoveTimer(_ t: OpaquePointer) {
        let entry = loopState.withLock { $0.timers.removeValue(forKey: Handle(t)) }
        entry?.timer?.cancel()
    }

    /// A timeout expired (loop thread): libdbus handles it (a pending call's timeout queues its
    /// synthesised error reply), then it is armed again unless libdbus removed or re-armed it.
    private func timerFired(_ handle: Handle, _ generation: UInt64) {
        let live = loopState.withLock { $0.timers[handle]?.generation == generation }
        guard live else { return }
        _ = dbus_timeout_handle(handle.pointer)
        let rearm = loopState.withLock { $0.timers[handle]?.generation == generation }
        if rearm { loopArmTimer(handle.pointer) }
        dispatchOnLoop()
    }

    // MARK: Dispatching

    /// libdbus queued incoming data (any thread): dispatch before the loop sleeps.
    private func loopDispatchNeeded() {
        let first = loopState.withLock { s -> Bool in
            defer { s.dispatchPending = true }
            return !s.dispatchPending
        }
        // On the loop the hook runs before it sleeps; from elsewhere, wake it up.
        if first, !loop.inLoop { loop.execute {} }
    }

    /// Dispatches every queued message (loop thread); notices a lost connection.
    func dispatchOnLoop() {
        // What libdbus flagged so far is dispatched now; a flag raised meanwhile stays for the hook.
        let finished = loopState.withLock { s -> Bool in
            s.dispatchPending = false
            return s.finished
        }
        guard !finished else { return }
        while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
        if dbus_connection_get_is_connected(raw) == 0 {
            // The Disconnected message has been dispatched by now (it is queued last).
            markClosed()
            finishLoopTeardown()
        }
    }

    // MARK: Teardown

    /// `close()` (loop thread): no new work is accepted, what was already sent
    /// leaves (the write watch still works) for at most 500 ms, then the connection closes.
    func beginLoopTeardown() {
        guard !loopState.withLock({ $0.finished }) else { return }
        io.withLock { $0 = false }  // waits for a command under way on another thread
        markClosed()
        flushThenFinish(deadline: ContinuousClock.now + .milliseconds(500))
    }

    private func flushThenFinish(deadline: ContinuousClock.Instant) {
        // The connection may have been lost and released meanwhile (`dispatchOnLoop` finished the
        // teardown while this waited on its timer): `raw` must not be touched again.
        guard !loopState.withLock({ $0.finished }) else { return }
        if dbus_connection_get_is_connected(raw) != 0, dbus_connection_has_messages_to_send(raw) != 0,
           ContinuousClock.now < deadline
        {
            loop.schedule(after: .milliseconds(2)) { [self] in flushThenFinish(deadline: deadline) }
            return
        }
        finishLoopTeardown()
    }

    /// Closes and releases the connection and removes every watch, timer and hook it had on the
    /// loop (loop thread; idempotent).
    func finishLoopTeardown() {
        let first = loopState.withLock { s -> Bool in
            defer { s.finished = true }
            return !s.finished
        }
        guard first else { return }
        io.withLock { $0 = false }
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        closeAndRelease()
        releaseLoopRegistrations()
    }

    /// Marks the registrations finished and removes every watch, timer and the hook from the loop.
    private func releaseLoopRegistrations() {
        let (watches, timers, hook) = loopState.withLock { s in
            defer {
                s.finished = true
                s.watches = [:]
                s.timers = [:]
                s.hook = nil
            }
            return (s.watches.values.compactMap(\.watch), s.timers.values.compactMap(\.timer), s.hook)
        }
        for w in watches { w.cancel() }
        for t in timers { t.cancel() }
        if let hook { loop.removeHook(hook) }
    }
}
