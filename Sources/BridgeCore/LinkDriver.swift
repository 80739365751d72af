import Synchronization

/// The I/O of one device's link, in two tasks of its session: the connect loop
/// (``maintainLink()``: connect, deliver notifications until the link is lost, back off, again)
/// and the writer (``runWrites()``: each GATT operation's writes and read in turn). What happens
/// is reported to the session as its events; the driver decides nothing about commands.
struct LinkDriver: Sendable {
    /// A GATT operation handed to the writer task.
    struct WriteJob: Sendable {
        var sequence: UInt64
        var link: any BLELink
        var request: DeviceRequest
    }

    let address: String
    let notify: [CharacteristicID]
    let pair: Bool
    let central: any BLECentral
    let output: SessionOutput
    let metrics: DeviceMetrics
    let reconnect: (min: Duration, max: Duration)
    /// How long one connect attempt (scan for the device included) may hold the adapter's
    /// ConnectGate. Connects are serialised per adapter (shared/spec/bridge.md point 3), so an
    /// away device's attempt must end and let the others through (point 2) before it retries.
    let connectAttempt: Duration
    /// The connect loop's gate (this node owns the device) and the cluster's view of the link.
    let signal: LinkSignal
    /// Where the session takes its events.
    let events: SessionEvents
    let jobs: AsyncStream<WriteJob>
    let jobSink: AsyncStream<WriteJob>.Continuation

    init(address: String, notify: [CharacteristicID], pair: Bool, central: any BLECentral, output: SessionOutput,
         metrics: DeviceMetrics, reconnect: (min: Duration, max: Duration), connectAttempt: Duration, owned: Bool,
         events: SessionEvents) {
        self.address = address
        self.notify = notify
        self.pair = pair
        self.central = central
        self.output = output
        self.metrics = metrics
        self.reconnect = reconnect
        self.connectAttempt = connectAttempt
        self.events = events
        signal = LinkSignal(owned: owned)
        (jobs, jobSink) = AsyncStream.makeStream(of: WriteJob.self, bufferingPolicy: .unbounded)
    }

    /// Hands a GATT operation to the writer task.
    func write(_ job: WriteJob) { jobSink.yield(job) }

    /// Ends the writer task (after the jobs already handed over).
    func finishWrites() { jobSink.finish() }

    /// The writer task: performs each GATT operation's writes (and read) in turn and reports the
    /// result as an event, so the session keeps taking notifications while BlueZ answers.
    func runWrites() async {
        for await job in jobs {
            let result: Result<[UInt8]?, BLEError>
            do throws(BLEError) {
                for w in job.request.writes {
                    try await job.link.write(w.value, to: w.characteristic, withResponse: w.withResponse)
                }
                if let r = job.request.read {
                    result = .success(try await job.link.read(r))
                } else {
                    result = .success(nil)
                }
            } catch {
                result = .failure(error)
            }
            events.yield(.written(sequence: job.sequence, result))
        }
    }

    /// Connect → services resolved → subscribed; on loss, jittered exponential backoff.
    func maintainLink() async {
        var backoff = Backoff(min: reconnect.min, max: reconnect.max)
        while !Task.isCancelled {
            // Another node owns the device: no connect until this one gets it.
            await signal.waitUntilOwned()
            if Task.isCancelled { break }
            do throws(BLEError) {
                let connect = { @Sendable [self] () async throws(BLEError) -> any BLELink in
                    let start = output.clock.now()
                    let link = try await central.connect(address: address, notify: notify, pair: pair, timeout: connectAttempt)
                    metrics.connectDuration.record(output.clock.now() - start)
                    return link
                }
                // One adapter: one connect at a time. Several: each adapter's own gate (``AdapterSet``).
                let link = try await signal.working { () async throws(BLEError) -> any BLELink in
                    central.serialisesConnects ? try await connect() : try await output.gate.withPermit(connect)
                }
                backoff.reset()
                events.yield(.linkUp(link))
                await link.deliverNotifications { [events] n in events.yield(.notification(n), inline: true) }
                events.yield(.linkDown("link lost"))
            } catch {
                metrics.connectFailures.increment()
                events.yield(.connectFailed(error))
            }
            if Task.isCancelled { break }
            // The device went to another node meanwhile: when it comes back, connect at once.
            if !signal.isOwned {
                backoff.reset()
                continue
            }
            try? await output.sleep(backoff.next(jitter: Double.random(in: 0.5...1.0)))
        }
    }
}

/// What other threads see of a session's link, behind one lock: whether this node owns the
/// device (the connect loop waits until it does) and whether the link is up (the cluster's
/// sightings). The session's ``LinkStateMachine`` is the truth; the session writes this
/// projection of it. Cancellation-safe: a cancelled waiter returns at once.
final class LinkSignal: Sendable {
    private struct State {
        var owned: Bool
        var up = false
        /// Connects and disconnects of this session under way.
        var linkWork = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var next = 0
    }
    private let state: Mutex<State>

    init(owned: Bool) { state = Mutex(State(owned: owned)) }

    var isOwned: Bool { state.withLock { $0.owned } }
    var isUp: Bool { state.withLock { $0.up } }

    func set(up: Bool) { state.withLock { $0.up = up } }

    /// Whether this session is connecting or disconnecting the device now: its link, if BlueZ
    /// shows one, is this session's to finish, not a leftover for the cluster to close (a second
    /// `Disconnect` sent meanwhile took bluetoothd 5.66 down on the real stack).
    var isBusy: Bool { state.withLock { $0.linkWork > 0 } }

    /// Runs `body` (a connect or a disconnect) with ``isBusy`` true.
    func working<T, E: Error>(_ body: () async throws(E) -> T) async throws(E) -> T {
        state.withLock { $0.linkWork += 1 }
        defer { state.withLock { $0.linkWork -= 1 } }
        return try await body()
    }

    func set(owned: Bool) {
        let resumed = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.owned = owned
            guard owned else { return [] }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for c in resumed { c.resume() }
    }

    /// Returns once the device is owned (at once when it is), or when the task is cancelled.
    func waitUntilOwned() async {
        let id = state.withLock { s -> Int? in
            guard !s.owned else { return nil }
            s.next += 1
            return s.next
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let now = state.withLock { s -> Bool in
                    if s.owned || Task.isCancelled { return true }
                    s.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// The link's up flag as ``DeviceSession/linked`` gave it (a `Mutex<Bool>` before):
    /// `linked.withLock { $0 }`.
    func withLock<R>(_ body: (inout Bool) -> R) -> R {
        var up = isUp
        return body(&up)
    }
}
