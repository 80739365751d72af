#if canImport(Glibc)
import Glibc
#endif
import CEpoll
import HeapModule
import Synchronization

/// One thread that waits in `epoll_wait(2)` for every descriptor the bridge reads (the broker's socket,
/// the D-Bus connection, the AcquireNotify sockets), fires timers, and runs Swift tasks: it is a
/// `SerialExecutor` and a `TaskExecutor`, so a task started with
/// `withTaskExecutorPreference(loop)` — and every default actor such a task calls — runs here.
///
/// Why: a command crossing the bridge used to be handed from thread to thread (MQTT network
/// thread → the cooperative pool → the D-Bus dispatch thread → a socket reader thread → the
/// pool → libmosquitto's thread), and each hand-off is a futex wake-up and a context switch.
/// On one loop a hand-off is an append to an array; the thread sleeps only when there is
/// nothing left to do (docs/architecture.md "Threads").
///
/// Rules: handlers and jobs run on the loop thread and must not block. Calls that change
/// watches, timers and hooks may come from any thread (off the loop they are carried over to
/// it). The only wake-up from another thread is a byte written to a pipe, made only while the loop
/// sleeps or is about to.
///
/// `@unchecked Sendable` (also `Watch` and `Timer`): what other threads touch is in a `Mutex`
/// (the incoming work, the sleeping and stopping flags) or atomic (the loop's thread, the id
/// counter); every other field is confined to the loop thread, which the compiler cannot check.
public final class EventLoop: @unchecked Sendable {
    /// Readiness of a watched descriptor.
    public struct IOEvents: OptionSet, Sendable {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let readable = IOEvents(rawValue: Int16(POLLIN))
        public static let writable = IOEvents(rawValue: Int16(POLLOUT))
        /// Hang-up or error (always reported, never asked for).
        public static let hangup = IOEvents(rawValue: Int16(POLLHUP | POLLERR | POLLNVAL))
    }

    /// A descriptor the loop polls. Cancel it before closing the descriptor.
    public final class Watch: @unchecked Sendable {
        public let fd: Int32
        fileprivate unowned let loop: EventLoop
        fileprivate let id: Int
        // Loop-thread state.
        fileprivate var events: IOEvents
        fileprivate var handler: ((IOEvents) -> Void)?

        fileprivate init(loop: EventLoop, id: Int, fd: Int32, events: IOEvents, handler: @escaping (IOEvents) -> Void) {
            self.loop = loop
            self.id = id
            self.fd = fd
            self.events = events
            self.handler = handler
        }

        /// Changes what the loop waits for on this descriptor (empty: nothing but hang-ups).
        public func setEvents(_ events: IOEvents) {
            loop.onLoop { [self] in
                guard handler != nil, self.events != events else { return }
                self.events = events
                loop.updateRegistration(fd)
            }
        }

        /// Stops watching; the handler is not called again once this ran on the loop (on the
        /// loop thread: at once).
        public func cancel() {
            loop.onLoop { [self] in
                guard handler != nil else { return }
                handler = nil
                loop.watches.removeValue(forKey: id)
                loop.byFD[fd]?.removeAll { $0 === self }
                loop.updateRegistration(fd)
            }
        }
    }

    /// A one-shot timer.
    public final class Timer: @unchecked Sendable {
        fileprivate unowned let loop: EventLoop
        fileprivate let id: Int
        fileprivate let deadline: UInt64
        fileprivate var body: (() -> Void)?

        fileprivate init(loop: EventLoop, id: Int, deadline: UInt64, body: @escaping () -> Void) {
            self.loop = loop
            self.id = id
            self.deadline = deadline
            self.body = body
        }

        /// Cancels the timer; its body does not run once this ran on the loop.
        public func cancel() {
            loop.onLoop { [self] in
                body = nil
                loop.timers.removeValue(forKey: id)
            }
        }
    }

    private enum Work: Sendable {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private struct Shared {
        var work: [Work] = []
        var sleeping = false
        var stopping = false
    }

    public let name: String
    private let shared = Mutex(Shared())
    /// A pipe: the loop polls `wakeFD`, other threads write a byte to `wakeWriteFD`.
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private var thread = pthread_t()
    /// The loop thread's `pthread_self()`, 0 until it runs.
    private let loopThread = Atomic<UInt>(0)
    private let exited = Mutex<Bool>(false)

    // Loop-thread state.
    private var local: [Work] = []
    /// The round of ``local`` being run, swapped with it: emptying a copy of `local` (kept
    /// capacity) allocated a new buffer every round, ~11 per command.
    private var running: [Work] = []
    /// A task's job is running (``inCallback``).
    private var inJob = false
    fileprivate var watches: [Int: Watch] = [:]
    /// The live watches of each descriptor (libdbus watches one socket twice: read and write).
    fileprivate var byFD: [Int32: [Watch]] = [:]
    /// What each descriptor is registered for in the epoll set.
    private var registered: [Int32: UInt32] = [:]
    private let epollFD: Int32
    fileprivate var timers: [Int: Timer] = [:]
    /// Pending timers by deadline (earliest first; equal deadlines in the order scheduled). A
    /// cancelled timer stays until it reaches the top.
    private var timerHeap = Heap<TimerEntry>()
    private var hooks: [Int: () -> Void] = [:]
    private var nextID = 0
    private var readyEvents = [UInt32](repeating: 0, count: 64)
    private var readyData = [UInt64](repeating: 0, count: 64)
    /// ``withReceiveBuffer(_:)``'s buffer (loop thread only; allocated at first use).
    private var receiveBuffer: UnsafeMutableRawBufferPointer?

    /// Starts the loop's thread.
    public init(name: String = "event-loop") {
        self.name = name
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe: errno \(errno)")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
        epollFD = reactor_epoll_create()
        precondition(epollFD >= 0, "epoll_create1: errno \(errno)")
        // The wake pipe is data 0; a watched descriptor is data fd + 1.
        precondition(reactor_epoll_ctl(epollFD, reactor_epoll_ctl_add(), wakeFD, UInt32(EPOLLIN.rawValue), 0) == 0)
        let retained = Unmanaged.passRetained(self)
        let rc = pthread_create(&thread, nil, { raw in
            let loop = Unmanaged<EventLoop>.fromOpaque(raw!).takeRetainedValue()
            loop.threadMain()
            return nil
        }, retained.toOpaque())
        precondition(rc == 0, "pthread_create: \(rc)")
    }

    deinit {
        close(epollFD)
        close(wakeFD)
        close(wakeWriteFD)
        receiveBuffer?.deallocate()
    }

    /// Lends the loop's receive buffer (64 KiB) to a read made on the loop thread — a packet
    /// socket's next packet — so a read needs neither 64 KiB on the heap each time (too big for
    /// the stack) nor a buffer per descriptor: one per loop, allocated at first use, its pages
    /// touched only as far as reads reach. What `body` leaves there is overwritten by the next
    /// read: copy it out before handing it on.
    public func withReceiveBuffer<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        precondition(inLoop, "EventLoop.withReceiveBuffer called off the loop thread")
        if let buffer = receiveBuffer { return try body(buffer) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
        receiveBuffer = buffer
        return try body(buffer)
    }

    /// True on the loop's own thread.
    public var inLoop: Bool {
        loopThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// True in one of the loop's callbacks (an I/O handler, a timer, a closure it runs), on its
    /// thread outside any task's job: no code isolated to the loop runs now, so an actor whose
    /// executor is the loop may be entered at once.
    public var inCallback: Bool { inLoop && !inJob }

    // MARK: Submitting work

    /// Runs `body` on the loop (after what is already queued), from any thread.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        submit(.closure(body))
    }

    /// Runs `body` now when on the loop thread, else queues it like ``execute(_:)``.
    fileprivate func onLoop(_ body: @escaping @Sendable () -> Void) {
        if inLoop { body() } else { submit(.closure(body)) }
    }

    private func submit(_ work: Work) {
        if inLoop {
            local.append(work)
            return
        }
        let wake = shared.withLock { s -> Bool in
            s.work.append(work)
            if s.sleeping {
                s.sleeping = false
                return true
            }
            return false
        }
        if wake { signal() }
    }

    private func signal() {
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)
    }

    // MARK: Descriptors, timers, hooks

    /// Polls `fd` for `events` and calls `handler` on the loop with what is ready (hang-ups are
    /// always reported). The handler runs until ``Watch/cancel()``.
    public func watch(_ fd: Int32, for events: IOEvents, _ handler: @escaping @Sendable (IOEvents) -> Void) -> Watch {
        let watch = Watch(loop: self, id: makeID(), fd: fd, events: events, handler: handler)
        onLoop { [self] in
            guard watch.handler != nil else { return }
            watches[watch.id] = watch
            byFD[fd, default: []].append(watch)
            updateRegistration(fd)
        }
        return watch
    }

    /// Runs `body` on the loop once `delay` has passed.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> Timer {
        let timer = Timer(loop: self, id: makeID(), deadline: Self.deadline(after: delay), body: body)
        onLoop { [self] in
            guard timer.body != nil else { return }
            timers[timer.id] = timer
            timerHeap.insert(TimerEntry(deadline: timer.deadline, id: timer.id))
        }
        return timer
    }

    /// Adds a hook the loop runs each time it has nothing left to do, just before it waits
    /// (flush buffered writes, commit a batch). Returns a token for ``removeHook(_:)``.
    @discardableResult
    public func addHook(_ body: @escaping @Sendable () -> Void) -> Int {
        let id = makeID()
        onLoop { [self] in hooks[id] = body }
        return id
    }

    public func removeHook(_ id: Int) {
        onLoop { [self] in hooks[id] = nil }
    }

    private let ids = Atomic<Int>(0)
    private func makeID() -> Int { ids.wrappingAdd(1, ordering: .relaxed).newValue }

    /// Suspends the calling task for `duration` on this loop's timers (no other thread
    /// involved); throws `CancellationError` when the task is cancelled first.
    public func sleep(for duration: Duration) async throws {
        let once = Mutex<(CheckedContinuation<Void, any Error>?, Timer?, Bool)>((nil, nil, false))
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let proceed = once.withLock { s -> Bool in
                    if s.2 { return false }
                    s.0 = c
                    return true
                }
                guard proceed else {
                    c.resume(throwing: CancellationError())
                    return
                }
                let timer = schedule(after: duration) {
                    once.withLock { s in
                        let c = s.0
                        s.0 = nil
                        return c
                    }?.resume()
                }
                once.withLock { $0.1 = timer }
            }
        } onCancel: {
            let (c, t) = once.withLock { s -> (CheckedContinuation<Void, any Error>?, Timer?) in
                s.2 = true
                let c = s.0
                s.0 = nil
                return (c, s.1)
            }
            t?.cancel()
            c?.resume(throwing: CancellationError())
        }
    }

    /// What is registered on the loop: descriptor watches, pending (not fired, not cancelled)
    /// timers and hooks.
    public struct Registrations: Sendable, Equatable, CustomStringConvertible {
        public var watches: Int
        public var timers: Int
        public var hooks: Int

        public init(watches: Int, timers: Int, hooks: Int) {
            self.watches = watches
            self.timers = timers
            self.hooks = hooks
        }

        public var description: String { "\(watches) watches, \(timers) timers, \(hooks) hooks" }
    }

    /// Counts what is registered now, read on the loop (after the work already queued): lets a
    /// component's tests check that it left nothing behind when it stopped.
    public func registrations() async -> Registrations {
        if inLoop { return currentRegistrations() }
        return await withCheckedContinuation { (c: CheckedContinuation<Registrations, Never>) in
            execute { [self] in c.resume(returning: currentRegistrations()) }
        }
    }

    private func currentRegistrations() -> Registrations {
        Registrations(watches: watches.count, timers: timers.count, hooks: hooks.count)
    }

    // MARK: Stopping

    /// Stops the loop after the work already queued and joins its thread. Must not be called on
    /// the loop itself. Work submitted afterwards never runs.
    public func shutdown() {
        precondition(!inLoop, "EventLoop.shutdown() on its own thread")
        let already = exited.withLock { $0 }
        if already { return }
        shared.withLock { $0.stopping = true }
        signal()
        pthread_join(thread, nil)
        exited.withLock { $0 = true }
    }

    // MARK: The loop

    private func threadMain() {
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
        nameThread()
        while true {
            runLocalWork()
            // The work other threads queued becomes the local queue: when `local` is empty (it is,
            // unless runLocalWork stopped at its round limit) the two arrays trade buffers and
            // nothing is copied or allocated.
            let (incoming, stopping) = shared.withLock { s -> (Bool, Bool) in
                guard !s.work.isEmpty else { return (false, s.stopping) }
                if local.isEmpty { swap(&s.work, &local) } else { local.append(contentsOf: s.work); s.work.removeAll(keepingCapacity: true) }
                return (true, s.stopping)
            }
            if incoming { continue }
            if stopping { break }
            if fireTimers() { continue }
            if !hooks.isEmpty {
                // A hook that adds or removes hooks changes a copy: this turn runs the ones it began with.
                for body in hooks.values { body() }
                if !local.isEmpty { continue }
            }
            waitForEvents()
        }
    }

    /// Gives the loop thread its `name` in the kernel (the first 15 bytes; `/proc`, `top -H`,
    /// gdb, perf), through `/proc/thread-self/comm`.
    private func nameThread() {
        let fd = Glibc.open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    private func runLocalWork() {
        // A job may queue more; run rounds until the queue is empty (they are all due now).
        var rounds = 0
        while !local.isEmpty, rounds < 64 {
            rounds += 1
            swap(&local, &running)
            for w in running { run(w) }
            running.removeAll(keepingCapacity: running.capacity <= 1024)
        }
    }

    private func run(_ work: Work) {
        switch work {
        case let .job(job):
            inJob = true
            defer { inJob = false }
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        case let .closure(body):
            body()
        }
    }

    /// Runs every timer that is due; true when one ran.
    private func fireTimers() -> Bool {
        let now = Self.now()
        var ran = false
        while let top = timerHeap.min, top.deadline <= now {
            timerHeap.removeMin()
            guard let timer = timers.removeValue(forKey: top.id), let body = timer.body else { continue }
            timer.body = nil
            body()
            ran = true
        }
        return ran
    }

    private func waitForEvents() {
        var timeout: Int32 = -1
        while let top = timerHeap.min, timers[top.id] == nil { timerHeap.removeMin() }  // cancelled ones
        if let top = timerHeap.min {
            let now = Self.now()
            let ns = top.deadline > now ? top.deadline - now : 0
            timeout = Int32(min(ns / 1_000_000 + (ns % 1_000_000 == 0 ? 0 : 1), 60_000))  // rounded up, no overflow
        }
        let go = shared.withLock { s -> Bool in
            guard s.work.isEmpty, !s.stopping else { return false }
            s.sleeping = true
            return true
        }
        guard go else { return }
        let n = reactor_epoll_wait(epollFD, &readyEvents, &readyData, Int32(readyEvents.count), timeout)
        shared.withLock { $0.sleeping = false }
        guard n > 0 else { return }
        for i in 0..<Int(n) {
            if readyData[i] == 0 {
                var drain = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
                _ = withUnsafeMutableBytes(of: &drain) { read(wakeFD, $0.baseAddress, $0.count) }
                continue
            }
            let fd = Int32(truncatingIfNeeded: readyData[i] - 1)
            guard let list = byFD[fd] else { continue }
            let ready = IOEvents(rawValue: Int16(truncatingIfNeeded: readyEvents[i]))
            for w in list {
                guard let handler = w.handler else { continue }
                let mine = ready.intersection(w.events.union(.hangup))
                if !mine.isEmpty { handler(mine) }
            }
        }
    }

    /// Brings the epoll registration of `fd` in line with its live watches (the union of their
    /// events; none left: removed).
    fileprivate func updateRegistration(_ fd: Int32) {
        let list = byFD[fd] ?? []
        if list.isEmpty {
            byFD[fd] = nil
            if registered.removeValue(forKey: fd) != nil {
                _ = reactor_epoll_ctl(epollFD, reactor_epoll_ctl_del(), fd, 0, 0)
            }
            return
        }
        var wanted: UInt32 = 0
        for w in list { wanted |= UInt32(UInt16(bitPattern: w.events.subtracting(.hangup).rawValue)) }
        if let current = registered[fd] {
            guard current != wanted else { return }
            if reactor_epoll_ctl(epollFD, reactor_epoll_ctl_mod(), fd, wanted, UInt64(fd) + 1) == 0 {
                registered[fd] = wanted
                return
            }
            // ENOENT: the descriptor was closed (and maybe reused) while registered: add afresh.
        }
        if reactor_epoll_ctl(epollFD, reactor_epoll_ctl_add(), fd, wanted, UInt64(fd) + 1) == 0 {
            registered[fd] = wanted
        } else if errno == EEXIST,
                  reactor_epoll_ctl(epollFD, reactor_epoll_ctl_mod(), fd, wanted, UInt64(fd) + 1) == 0 {
            registered[fd] = wanted
        } else {
            registered[fd] = nil
        }
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// A delay in nanoseconds: 0 for a negative one, `UInt64.max` when it does not fit.
    ///
    /// `Duration.components` truncates towards zero, so a negative delay under a second has
    /// `seconds == 0` and negative `attoseconds`: converting those to `UInt64` trapped, and a
    /// cluster node crashed sleeping until an instant that had just passed (the real-stack test
    /// of two bridges on one bluetoothd).
    static func nanoseconds(_ d: Duration) -> UInt64 {
        guard d > .zero else { return 0 }
        let c = d.components  // both parts ≥ 0 now
        let (whole, overflow) = UInt64(c.seconds).multipliedReportingOverflow(by: 1_000_000_000)  // checked: d > 0
        let (sum, carry) = whole.addingReportingOverflow(UInt64(c.attoseconds / 1_000_000_000))  // checked: d > 0
        return overflow || carry ? .max : sum
    }

    /// `now + delay` in nanoseconds, saturating (a delay too long to represent never comes).
    static func deadline(after delay: Duration) -> UInt64 {
        let (sum, overflow) = now().addingReportingOverflow(nanoseconds(delay))
        return overflow ? .max : sum
    }
}

// MARK: Executors

extension EventLoop: SerialExecutor, TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(inLoop, "not on the event loop \(name)")
    }
}

/// A timer in the loop's heap: its deadline, then its id (ids grow, so timers due at the same
/// nanosecond fire in the order they were scheduled).
struct TimerEntry: Comparable {
    var deadline: UInt64
    var id: Int

    static func < (a: TimerEntry, b: TimerEntry) -> Bool {
        (a.deadline, a.id) < (b.deadline, b.id)
    }
}
