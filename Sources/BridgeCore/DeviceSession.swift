import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
import Synchronization

/// One device: its link, its driver, its command queue. One GATT operation in flight; one
/// device's trouble never blocks another (each session runs in its own task).
actor DeviceSession {
    enum Event: Sendable {
        case command(PendingCommand)
        case linkUp(any BLELink)
        case linkDown(String)
        case connectFailed(BLEError)
        case notification(GATTNotification)
        /// A sighting of the device (a scan's advertisement) at this RSSI.
        case observed(rssi: Int)
        case tick
        /// The writes (and the read) of the GATT operation `sequence` finished.
        case written(sequence: UInt64, Result<[UInt8]?, BLEError>)
        /// Stop the session (device removed, renamed or reconfigured): `error` ends the queued
        /// commands (nil: they stay in the outbox for the session that replaces this one).
        case stop(error: CommandError?, done: CheckedContinuation<Void, Never>)
        /// Someone waits for the link (``waitForLink(timeout:)``).
        case waitForLink(deadline: ContinuousClock.Instant, CheckedContinuation<LinkWait, Never>)
        /// Resumed once every event before it was handled (``settled()``).
        case settle(CheckedContinuation<Void, Never>)
        /// Store the waiting commands whose `queued` row was put off (``accept(_:)``).
        case storeWaiting
        /// This node gained or lost the device (several bridges on one broker,
        /// docs/scale-out.md); losing it ends the waiting commands with `error` and closes the
        /// link before `done` is resumed.
        case ownership(Bool, error: CommandError?, done: CheckedContinuation<Void, Never>?)
    }

    /// How a wait for the link ended.
    enum LinkWait: Sendable, Equatable {
        case up
        /// The deadline passed; the last connect error, if any.
        case timedOut(BLEError?)
        case stopped
    }

    /// A GATT operation handed to the session's writer task.
    struct WriteJob: Sendable {
        var sequence: UInt64
        var link: any BLELink
        var request: DeviceRequest
    }

    let config: DeviceConfig
    let central: any BLECentral
    let output: SessionOutput
    nonisolated let events: AsyncStream<Event>
    nonisolated let sink: AsyncStream<Event>.Continuation
    let reconnectMin: Duration
    let reconnectMax: Duration
    /// How long one connect attempt (scan for the device included) may hold the adapter's
    /// ConnectGate. Connects are serialised per adapter (shared/spec/bridge.md point 3), so an
    /// away device's attempt must end and let the others through (point 2) before it retries.
    let connectAttempt: Duration
    nonisolated let metrics: DeviceMetrics

    var driver: any DeviceDriver
    var link: (any BLELink)?
    /// The commands: what waits, what is under way (``CommandQueue``, no I/O).
    var queue = CommandQueue()
    /// The link's timing: last heard, keep-alive and polls due (``LinkSchedule``, no I/O).
    var schedule: LinkSchedule
    nonisolated let writeJobs: AsyncStream<WriteJob>
    nonisolated let writeSink: AsyncStream<WriteJob>.Continuation
    /// The device's state as stored and published (``DeviceState``, no I/O).
    var state: DeviceState
    var available = false
    /// Waiting for the link (``waitForLink(timeout:)``), with their deadlines.
    var linkWaiters: [(deadline: ContinuousClock.Instant, continuation: CheckedContinuation<LinkWait, Never>)] = []
    /// Why the last connect attempt failed (cleared at link up).
    var lastConnectError: BLEError?
    /// Resumed once the session has stopped (its link closed).
    var stopped: [CheckedContinuation<Void, Never>] = []
    /// The RSSI of the last sighting (``observed(rssi:)``), published or not.
    var lastRSSI: Int?
    /// Whether this node runs the device: always, unless several bridges share the broker and
    /// another one owns it (docs/scale-out.md). Not owned: no link, no publish, no command.
    nonisolated let owned: OwnershipSignal
    /// Whether the link is up, for the cluster's sightings (any thread).
    nonisolated let linked = Mutex(false)

    init(config: DeviceConfig, driver: any DeviceDriver, central: any BLECentral, output: SessionOutput,
         initialState: JSONObject, reconnect: (min: Duration, max: Duration),
         connectAttempt: Duration = Bridge.defaultConnectAttempt, owned: Bool = true) {
        self.owned = OwnershipSignal(owned)
        self.config = config
        self.driver = driver
        self.central = central
        self.output = output
        self.state = DeviceState(initialState)
        schedule = LinkSchedule(now: output.clock.now())
        reconnectMin = reconnect.min
        reconnectMax = reconnect.max
        self.connectAttempt = connectAttempt
        metrics = output.metrics.device(config.id)
        driverNotifyCharacteristics = driver.notifyCharacteristics
        driverRequiresPairing = driver.requiresPairing
        (events, sink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        (writeJobs, writeSink) = AsyncStream.makeStream(of: WriteJob.self, bufferingPolicy: .unbounded)
    }

    var id: String { config.id }

    /// Commands handed to the session that it has not taken yet.
    nonisolated let backlog = Atomic<Int>(0)

    /// Hands a command to the session (any thread). A new command (not from the outbox) finding
    /// `limits.max_queued` others not taken yet is answered `queue_full` at once: a flood of
    /// commands cannot pile up ahead of the session either.
    nonisolated func submit(_ command: PendingCommand) {
        if command.outboxID == nil, !command.isInternal, backlog.load(ordering: .relaxed) >= output.maxQueued {
            output.respond(command, device: config.id, .error,
                           error: CommandError(.queueFull, "\(config.id) has \(output.maxQueued) commands not taken yet (limits.max_queued)"))
            return
        }
        backlog.add(1, ordering: .relaxed)
        sink.yield(.command(command))
    }

    /// The bridge's ticker: deadlines, timeouts, keep-alives and polls are checked now.
    nonisolated func tickNow() { sink.yield(.tick) }

    /// Stops the session and returns once its link is closed. `error` ends the queued commands;
    /// nil leaves them in the outbox for the session that replaces this one.
    nonisolated func stop(failingQueuedWith error: CommandError?) async {
        await withCheckedContinuation { sink.yield(.stop(error: error, done: $0)) }
    }

    /// Waits until the link is up (at once when it is), the deadline passes, or the session stops.
    nonisolated func waitForLink(timeout: Duration) async -> LinkWait {
        await withCheckedContinuation { sink.yield(.waitForLink(deadline: output.clock.now() + timeout, $0)) }
    }

    /// Returns once every event handed to the session before this call was handled (and its
    /// dispatch done): what those events would publish or store is published or stored by then.
    /// For an observer that must know that something did *not* happen.
    nonisolated func settled() async {
        await withCheckedContinuation { sink.yield(.settle($0)) }
    }

    /// Records a sighting of the device (any thread): its RSSI goes into the state (`rssi`,
    /// published with `last_seen`) the first time and whenever it moved by at least
    /// ``BridgeDefaults/rssiStep`` dBm since the published value, so a stream of adverts costs no publish or
    /// store write while the signal holds steady.
    nonisolated func observed(rssi: Int) { sink.yield(.observed(rssi: rssi)) }

    /// This node gained (`true`) or lost the device; returns once the session took it in (on a
    /// loss: the waiting commands ended with `error`, the link closed).
    nonisolated func setOwned(_ owned: Bool, failingQueuedWith error: CommandError?) async {
        if owned { self.owned.set(true) }
        await withCheckedContinuation { sink.yield(.ownership(owned, error: error, done: $0)) }
    }

    /// Runs until cancelled or stopped: keeps the link, processes commands and notifications.
    /// Ticks come from the bridge's one ticker (``tick()``), not from a timer per session.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.maintainLink() }
            group.addTask { await self.runWrites() }
            for await event in events {
                if case let .stop(error, done) = event {
                    stopped.append(done)
                    if error == nil { storeWaiting() }  // left in the outbox for the next session
                    stopQueued(error)
                    break
                }
                await handle(event)
                if Task.isCancelled { break }
            }
            writeSink.finish()
            group.cancelAll()
        }
        // Cancelled (the bridge stops) with a command whose `queued` row was put off: stored now,
        // so it stays in the outbox for the next start.
        storeWaiting()
        await shutdown()
        for w in linkWaiters { w.continuation.resume(returning: .stopped) }
        linkWaiters = []
        // Events that came after the stop: their commands and waiters must not hang.
        sink.finish()
        for await event in events {
            switch event {
            case let .stop(_, done): done.resume()
            case let .waitForLink(_, c): c.resume(returning: .stopped)
            case let .settle(c): c.resume()
            case let .command(cmd):
                backlog.subtract(1, ordering: .relaxed)
                let why = stopped.isEmpty ? "the bridge stopped before it took the command" : "\(id) was stopped (removed or reconfigured)"
                output.respond(cmd, device: id, .error, error: CommandError(stopped.isEmpty ? .interrupted : .unknownDevice, why))
            default: break
            }
        }
        for done in stopped { done.resume() }
        stopped = []
    }

    /// The queued commands when the session stops: ended with `error`, or left in the outbox.
    func stopQueued(_ error: CommandError?) {
        let (interrupted, waiting) = queue.stop()
        if let f = interrupted {
            finish(f.command, .error, error: CommandError(.interrupted, "\(id) was stopped after the command was written (not repeated)"))
        }
        if let error { for cmd in waiting where !cmd.isInternal { finish(cmd, .error, error: error) } }
    }

    /// The writer task: performs each GATT operation's writes (and read) in turn and reports the
    /// result as an event, so the session keeps taking notifications while BlueZ answers.
    nonisolated func runWrites() async {
        for await job in writeJobs {
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
            sink.yield(.written(sequence: job.sequence, result))
        }
    }

    /// Connect → services resolved → subscribed; on loss, jittered exponential backoff.
    nonisolated func maintainLink() async {
        var backoff = Backoff(min: reconnectMin, max: reconnectMax)
        let notify = driverNotifyCharacteristics
        let attempt = connectAttempt
        while !Task.isCancelled {
            // Another node owns the device: no connect until this one gets it.
            await owned.wait()
            if Task.isCancelled { break }
            do throws(BLEError) {
                let connect = { @Sendable [self] () async throws(BLEError) -> any BLELink in
                    let start = output.clock.now()
                    let link = try await central.connect(address: config.address ?? "", notify: notify, pair: driverRequiresPairing,
                                                         timeout: attempt)
                    metrics.connectDuration.record(output.clock.now() - start)
                    return link
                }
                // One adapter: one connect at a time. Several: each adapter's own gate (``AdapterSet``).
                let link = central.serialisesConnects ? try await connect() : try await output.gate.withPermit(connect)
                backoff.reset()
                sink.yield(.linkUp(link))
                await link.deliverNotifications { [sink] n in sink.yield(.notification(n)) }
                sink.yield(.linkDown("link lost"))
            } catch {
                metrics.connectFailures.increment()
                sink.yield(.connectFailed(error))
            }
            if Task.isCancelled { break }
            // The device went to another node meanwhile: when it comes back, connect at once.
            if !owned.isOwned {
                backoff.reset()
                continue
            }
            try? await output.sleep(backoff.next(jitter: Double.random(in: 0.5...1.0)))
        }
    }

    nonisolated let driverNotifyCharacteristics: [CharacteristicID]
    nonisolated let driverRequiresPairing: Bool

    // MARK: Events

    func handle(_ event: Event) async {
        switch event {
        case let .command(cmd):
            backlog.subtract(1, ordering: .relaxed)
            accept(cmd)
        case let .linkUp(l):
            if owned.isOwned { linkUp(l) } else { await l.disconnect() }  // connected as it lost the device
        case let .linkDown(reason):
            if link != nil { linkDown(reason) }  // else closed when the device was handed over
        case let .ownership(on, error, done):
            await ownership(on, failingQueuedWith: error)
            done?.resume()
        case let .connectFailed(error):
            lastConnectError = error
            output.logger.debug("connect failed", metadata: ["device": "\(id)", "error": "\(error)"])
        case let .waitForLink(deadline, c):
            if link != nil { c.resume(returning: .up) } else { linkWaiters.append((deadline, c)) }
        case .stop: break  // taken by run()
        case .settle: storeWaiting()  // resumed below, after the dispatch
        case .storeWaiting: storeWaiting()
        case let .notification(n): process(driver.receive(n), from: n)
        case let .observed(rssi): if owned.isOwned { observe(rssi: rssi) }
        case .tick: tick()
        case let .written(sequence, result): written(sequence, result)
        }
        dispatch()
        metrics.queueDepth.record(queue.count)
        // The answers' writes: committed now, or by the event loop's hook once the turn's other
        // events are in (``AnswerBatch``). A settle waiter sees them stored and published.
        if case let .settle(c) = event {
            output.batch.commit()
            c.resume()
        } else if !output.batch.deferred {
            output.batch.commit()
        }
    }

    func accept(_ cmd: PendingCommand) {
        var cmd = cmd
        // Validate now, so a bad command is answered at once even while the device is away. One
        // that goes out at once is encoded here by the driver itself, for this link, once; any
        // other is validated on a copy of the driver (encoding assigns sequence numbers and
        // registers the expected answer, so it happens for real when the command is sent).
        if case let .command(body) = cmd.payload {
            do throws(CommandError) {
                if let link, queue.isIdle, !driver.isBusy {
                    let request = try driver.encode(body, mtu: link.mtu)
                    cmd.encoded = request
                    cmd.attribute = request.attribute
                    cmd.bypassesBusyGate = request.bypassesBusyGate
                } else {
                    var probe = driver
                    let request = try probe.encode(body, mtu: link?.mtu ?? BridgeDefaults.attMTU)
                    cmd.attribute = request.attribute
                    cmd.bypassesBusyGate = request.bypassesBusyGate
                }
            } catch {
                finish(cmd, .error, error: error)
                return
            }
        }
        switch queue.admission(of: cmd, linkUp: link != nil, busy: driver.isBusy, policy: config.offlinePolicy, device: id,
                               limit: output.maxQueued) {
        case let .reject(error):
            finish(cmd, .error, error: error)
        case let .accept(outbox, announce):
            switch outbox {
            case .atDispatch, .unchanged: break
            case .queuedNow: store(&cmd)
            case .queuedAtEndOfTurn: output.batch.atEndOfTurn { [sink] in sink.yield(.storeWaiting) }
            }
            if announce {
                cmd.announced = true
                output.respond(cmd, device: id, .queued)
            }
            queue.append(cmd)
        }
    }

    /// Stores the waiting commands whose `queued` row ``accept(_:)`` put off and that were not
    /// sent meanwhile.
    func storeWaiting() {
        // Never put off under `latest` (its store looks for older rows of the attribute and
        // changes the queue), so nothing is to store then.
        guard config.offlinePolicy != .latest else { return }
        queue.storeUnstored { store(&$0) }
    }

    /// Stores a command that waits (`queued`); under the `latest` policy the waiting commands
    /// for the same attribute end `superseded`.
    func store(_ cmd: inout PendingCommand) {
        let entry = cmd.outboxEntry(device: id, .queued, now: output.clock.now(), wallNow: Date())
        do throws(StoreError) {
            let latest = config.offlinePolicy == .latest && cmd.attribute != nil
            let (saved, replaced) = try output.metrics.commit { () throws(StoreError) in try output.store.enqueue(entry, replacingSameAttribute: latest) }
            cmd.outboxID = saved.id
            if !replaced.isEmpty {
                for old in queue.remove(outboxIDs: Set(replaced.compactMap(\.id))) {
                    output.respond(old, device: id, .error, error: CommandError(.superseded, "replaced by a newer \(cmd.attribute ?? "") command"))
                }
            }
        } catch {
            output.logger.error("outbox write failed", metadata: ["device": "\(id)", "error": "\(error)"])
        }
    }

    func linkUp(_ l: any BLELink) {
        link = l
        linked.withLock { $0 = true }
        lastConnectError = nil
        metrics.linkUp(pairing: l.pairDuration)
        if l.pairedOnConnect {
            // A first pairing: the registry remembers it, the driver finishes it (GoPro §2).
            driver.didPair()
            try? output.store.markPaired(id)
            output.event("device_paired", device: id)
        }
        do throws(CommandError) {
            queue.startUp(try driver.startupRequests())
        } catch {
            output.logger.error("profile start-up failed", metadata: ["device": "\(id)", "error": "\(error)"])
        }
        schedule.up(at: output.clock.now(), keepAlive: driver.keepAlive?.interval, polls: driver.polls.count)
        setAvailable(true)
        let now = Date()
        try? output.store.markSeen(id, at: now)
        commitState([:], at: now)  // last_seen
        output.event("device_connected", device: id)
        for w in linkWaiters { w.continuation.resume(returning: .up) }
        linkWaiters = []
    }

    /// A sighting's RSSI (``observed(rssi:)``).
    func observe(rssi: Int) {
        lastRSSI = rssi
        guard state.rssiIsNews(rssi) else { return }
        commitState(["rssi": .int(Int64(rssi))], at: Date())
    }

    /// Merges `changed` and `last_seen` into the state, stores it and publishes it (staged
    /// like an answer's state: a device's states are saved in the order they were made).
    func commitState(_ changed: JSONObject, at date: Date) {
        let json = state.stamp(changed, at: date)
        output.batch.stage([.saveState(deviceID: id, json: json, at: date.timeIntervalSince1970)], timed: false)
        publishState(json: json)
    }

    func linkDown(_ reason: String) {
        link = nil
        linked.withLock { $0 = false }
        metrics.linkDown()
        driver.linkLost()
        schedule.down()
        // The writer task's pending call fails on the dead link; its result is ignored.
        if let f = queue.linkLost() {
            finish(f.command, .error, error: CommandError(.interrupted, "the link to \(id) was lost after the command was written (not repeated)"))
        }
        setAvailable(false)
        output.event("device_disconnected", device: id, ["reason": .string(reason)])
    }

    func tick() {
        let now = output.clock.now()
        if !linkWaiters.isEmpty {
            for w in linkWaiters where w.deadline <= now { w.continuation.resume(returning: .timedOut(lastConnectError)) }
            linkWaiters.removeAll { $0.deadline <= now }
        }
        let (expired, timedOut) = queue.expire(at: now)
        for cmd in expired {
            finish(cmd, .expired, error: CommandError(.deviceOffline, "\(id) did not become ready before the deadline"))
        }
        if let f = timedOut {
            let error = CommandError(.timeout, "no answer from \(id) within \(f.limit)")
            finish(f.command, .error, error: error)
            internalFailed(f.command, error)
        }
        // Availability from the last good exchange.
        if available, schedule.silent(at: now, timeout: config.availabilityTimeout) { setAvailable(false) }
        // Polls and keep-alive.
        if schedule.isUp { schedule.duePolls(at: now, driver.polls) { queue.appendInternal($0) } }
        if let k = driver.keepAlive, schedule.keepAliveDue(at: now, interval: k.interval) { queue.pushInternal(k.request) }
    }

    // MARK: Dispatch (one GATT operation in flight)

    func dispatch() {
        while let link {
            var cmd: PendingCommand
            switch queue.next(busy: driver.isBusy) {
            case .underWay: return
            case .blocked:
                queue.announceWaiting { output.respond($0, device: id, .queued) }
                return
            case let .send(c): cmd = c
            }
            let request: DeviceRequest
            do throws(CommandError) {
                switch cmd.payload {
                case let .internal(r): request = r
                case let .command(body):
                    if let encoded = cmd.encoded { request = encoded } else { request = try driver.encode(body, mtu: link.mtu) }
                case let .write(topic, payload): request = try driver.encodeWrite(topic: topic, payload: payload, mtu: link.mtu)
                }
            } catch {
                finish(cmd, .error, error: error)
                continue
            }
            // At most once: the outbox says `sent` before the device gets the first byte.
            if let oid = cmd.outboxID {
                try? output.metrics.commit { try output.store.setStatus(.sent, for: oid) }
            } else if !cmd.isInternal {
                let entry = cmd.outboxEntry(device: id, .sent, now: output.clock.now(), wallNow: Date())
                do throws(StoreError) {
                    cmd.outboxID = try output.metrics.commit { () throws(StoreError) in try output.store.enqueue(entry) }.entry.id
                } catch {
                    output.logger.error("outbox write failed", metadata: ["device": "\(id)", "error": "\(error)"])
                }
            }
            if cmd.announced { output.respond(cmd, device: id, .sent) }
            cmd.encoded = nil
            switch queue.start(cmd, request, commandTimeout: config.commandTimeout, now: output.clock.now()) {
            case .done: finish(cmd, .ok)
            case .awaiting: break
            case let .write(sequence): writeSink.yield(WriteJob(sequence: sequence, link: link, request: request))
            }
        }
    }

    /// The writer task finished operation `sequence`.
    func written(_ sequence: UInt64, _ result: Result<[UInt8]?, BLEError>) {
        var failure: BLEError?
        var value: [UInt8]?
        switch result {
        case let .success(v): value = v
        case let .failure(e): failure = e
        }
        let outcome = queue.written(sequence, failure: failure)
        switch outcome {
        case .read, .done, .awaitingAnswer: schedule.heard(at: output.clock.now())
        default: break
        }
        switch outcome {
        case .stale, .awaitingAnswer:
            break  // from a link that is gone; or the answer is awaited from a notification
        case .alreadyEnded:
            // Already answered by a notification (or timed out): nothing left but the write's fate.
            if let failure { output.logger.debug("write failed after its answer", metadata: ["device": "\(id)", "error": "\(failure)"]) }
        case let .read(f):
            let effects = process(driver.decodeRead(f.read!, value ?? []), from: nil, answering: f.command)
            finish(f.command, .ok, data: effects.readData, removed: true)
        case let .done(cmd):
            finish(cmd, .ok)
        case let .requeued(cmd):
            // Not written: kept (at the front) for when the link is back.
            if let oid = cmd.outboxID { try? output.store.setStatus(.queued, for: oid) }
        case let .failed(cmd):
            let error = failure!
            let failure = CommandError(.bluetoothError, error.description)
            finish(cmd, .error, error: failure)
            if error.kind != .notConnected { internalFailed(cmd, failure) }  // else linkDown follows
        }
    }

    /// Tells the driver that its internal request `cmd` failed (user commands get a response instead).
    func internalFailed(_ cmd: PendingCommand, _ error: CommandError) {
        guard case let .internal(request) = cmd.payload else { return }
        let outputs = driver.internalRequestFailed(request, error)
        if !outputs.isEmpty { process(outputs, from: nil) }
    }

    /// Carries out what the driver's `outputs` come to (``OutputEffects``): the store writes
    /// staged first, then the answers and publishes in order, then the state.
    /// - Parameter answering: a command these outputs answer (a read's), whose outbox entry is
    ///   removed in the same commit as the new state.
    @discardableResult
    func process(_ outputs: [DriverOutput], from notification: GATTNotification?, answering: PendingCommand? = nil) -> OutputEffects {
        if notification != nil {
            output.counters.notification()
            metrics.notifications.increment()
            schedule.heard(at: output.clock.now())
            if !available, link != nil { setAvailable(true) }
        }
        let effects = OutputEffects(outputs, answering: answering, device: id, queue: &queue, state: &state, at: Date())
        // Staged: committed with the turn's other answers, before any publish made from here on.
        output.batch.stage(effects.writes)
        for step in effects.steps {
            switch step {
            case let .answer(cmd, .success(data)): finish(cmd, .ok, data: data, removed: true)
            case let .answer(cmd, .failure(error)): finish(cmd, .error, error: error, removed: true)
            case let .unmatched(key): output.logger.debug("unmatched response", metadata: ["device": "\(id)", "key": "\(key)"])
            case let .event(e): output.mqtt.send(OutboundMessage(topic: output.topics.event(id), json: e, qos: 0, retain: false))
            case let .characteristic(topic, value):
                // Retained like the state: Home Assistant's json_attributes_topic reads it after a restart.
                output.mqtt.send(OutboundMessage(topic: output.topics.characteristic(id, topic), json: value, qos: output.stateQoS,
                                                 retain: output.retainState))
            case let .malformed(reason):
                metrics.decodeErrors.increment()
                output.event("device_error", device: id, ["message": .string(reason)])
            case let .deviceError(error):
                output.event("device_error", device: id, ["code": .string(error.code.rawValue), "message": .string(error.message)])
            }
        }
        if let merged = effects.state {
            publishState(json: merged.json)
            if merged.hardwareChanged { output.deviceInfoChanged(config, state.values) }
        }
        return effects
    }

    /// - Parameter removed: the outbox entry was already removed (with the answer's state).
    func finish(_ cmd: PendingCommand, _ status: CommandStatus, data: JSONValue? = nil, error: CommandError? = nil, removed: Bool = false) {
        if !removed, let oid = cmd.outboxID { try? output.metrics.commit { try output.store.removeCommand(oid) } }
        output.respond(cmd, device: id, status, data: data, error: error)
    }

    func setAvailable(_ on: Bool) {
        available = on
        output.mqtt.send(OutboundMessage(topic: output.topics.availability(id), json: ["state": on ? "online" : "offline"], qos: 1, retain: true))
    }

    /// - Parameter json: the state's JSON text when the caller has it (the text just stored).
    func publishState(json: String? = nil) {
        let payload = Array((json ?? state.json).utf8)
        output.mqtt.send(OutboundMessage(topic: output.topics.state(id), payload: payload, qos: output.stateQoS, retain: output.retainState))
    }

    /// Whether no command is under way or waiting (a handover drains to this).
    func isIdle() -> Bool { queue.isIdle }

    /// For the health topic: link state and queue depth.
    func health() -> JSONValue {
        ["connected": .bool(link != nil), "available": .bool(available), "queue": .int(Int64(queue.count)),
         "in_flight": .bool(queue.inFlight != nil)]
    }

    /// Republishes retained topics (after the broker came back).
    func republish() {
        guard owned.isOwned else { return }
        setAvailable(available)
        if !state.isEmpty { publishState() }
    }

    /// Takes the device (the link comes up by ``maintainLink()``) or gives it up: the waiting
    /// commands end with `error`, a command under way ends `interrupted` (never repeated), the
    /// link closes and the availability goes offline before this returns, so the next owner's
    /// `online` comes after it.
    func ownership(_ on: Bool, failingQueuedWith error: CommandError?) async {
        guard !on else { return }
        owned.set(false)
        stopQueued(error ?? CommandError(.interrupted, "\(id) moved to another bridge before the command was sent (not repeated)"))
        if let l = link {
            linkDown("handed over")
            await l.disconnect()
        }
    }

    func shutdown() async {
        if let link { await link.disconnect() }
        link = nil
        metrics.linkDown()
    }
}

extension Duration {
    /// The whole duration in seconds, sub-second part included (`500ms` → 0.5).
    var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }

    /// The duration in whole milliseconds (towards zero), saturating at `Int64`'s bounds: integer
    /// arithmetic only, no conversion of a double.
    var wholeMilliseconds: Int64 {
        let c = components
        let (ms, overflow) = c.seconds.multipliedReportingOverflow(by: 1000)
        let (sum, carry) = ms.addingReportingOverflow(c.attoseconds / 1_000_000_000_000_000)
        return overflow || carry ? (c.seconds < 0 ? .min : .max) : sum
    }
}


/// Whether a session's node owns its device, and a wait until it does (any thread,
/// cancellation-safe: a cancelled waiter returns at once).
final class OwnershipSignal: Sendable {
    private struct State {
        var owned: Bool
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var next = 0
    }
    private let state: Mutex<State>

    init(_ owned: Bool) { state = Mutex(State(owned: owned)) }

    var isOwned: Bool { state.withLock { $0.owned } }

    func set(_ owned: Bool) {
        let resumed = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.owned = owned
            guard owned else { return [] }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for c in resumed { c.resume() }
    }

    /// Returns once the device is owned (at once when it is), or when the task is cancelled.
    func wait() async {
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
}
