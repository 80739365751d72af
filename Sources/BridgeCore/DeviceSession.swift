import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
import Synchronization

/// One device: its link, its driver, its command queue. One GATT operation in flight; one
/// device's trouble never blocks another (each session runs in its own task).
///
/// The actor takes events one at a time, asks its pure values what to do (``CommandQueue``,
/// ``LinkStateMachine``, ``LinkSchedule``, ``DeviceState``, ``OutputEffects``) and does the I/O:
/// the store, the publishes (``SessionOutput``), the driver; the link's tasks are its
/// ``LinkDriver``'s. Commands: `DeviceSession+Commands.swift`; the link: `DeviceSession+Link.swift`.
actor DeviceSession {
    enum Event: Sendable {
        case command(PendingCommand)
        case linkUp(any BLELink)
        case linkDown(String)
        case connectFailed(BLEError)
        case notification(GATTNotification)
        /// A sighting of the device (a scan's advertisement) at this RSSI.
        case observed(rssi: Int)
        /// A passive device's advertisement waits in ``heardSlot`` (``heard(_:)``).
        case advertised
        case tick
        /// The writes (and the read) of the GATT operation `sequence` finished.
        case written(sequence: UInt64, Result<[UInt8]?, BLEError>)
        /// Stop the session (device removed, renamed or reconfigured): `error` ends the queued
        /// commands (nil: they stay in the outbox for the session that replaces this one).
        case stop(error: CommandError?, done: CheckedContinuation<Void, Never>)
        /// Someone waits for the link (``waitForLink(timeout:)``).
        case waitForLink(deadline: BridgeInstant, CheckedContinuation<LinkWait, Never>)
        /// Resumed once every event before it was handled (``settled()``).
        case settle(CheckedContinuation<Void, Never>)
        /// Store the waiting commands whose `queued` row was put off (``accept(_:)``).
        case deferredRowsDue
        /// This node gained or lost the device (several bridges on one broker,
        /// docs/scale-out.md); losing it ends the waiting commands with `error` and closes the
        /// link before `done` is resumed.
        case ownership(Bool, error: CommandError?, done: CheckedContinuation<Void, Never>?)
    }

    let config: DeviceConfig
    let output: SessionOutput
    /// Where the session runs: the bridge's event loop (``SessionOutput/loop``), whose
    /// callbacks may then hand it an event in their own turn (``SessionEvents``); else a serial
    /// queue of its own, as a default actor's.
    nonisolated let executor: any SerialExecutor
    nonisolated let unownedExecutor: UnownedSerialExecutor
    /// The events, in order, from any thread (``SessionEvents``).
    nonisolated let sink = SessionEvents()
    nonisolated let metrics: DeviceMetrics
    /// The connect loop and the writer task.
    nonisolated let linkDriver: LinkDriver

    var driver: any DeviceDriver
    /// Whether the driver holds commands back, read in place: a getter called on the stored
    /// existential copies the whole driver first (every reference in it retained, then released:
    /// ~400 instructions for the GoPro's), one called through `inout` does not.
    var driverIsBusy: Bool { Self.isBusy(&driver) }
    private static func isBusy(_ driver: inout any DeviceDriver) -> Bool { driver.isBusy }
    /// The link: down, connecting, up (and whether available), handed over, stopped; and who
    /// waits for it (``LinkStateMachine``, no I/O).
    var link: LinkStateMachine<CheckedContinuation<LinkWait, Never>>
    /// The commands: what waits, what is under way (``CommandQueue``, no I/O).
    var queue = CommandQueue()
    /// The link's timing: last heard, keep-alive and polls due (``LinkSchedule``, no I/O).
    var schedule: LinkSchedule
    /// The device's state as stored and published (``DeviceState``, no I/O).
    var state: DeviceState
    /// Resumed once the session has stopped (its link closed).
    var stopped: [CheckedContinuation<Void, Never>] = []
    /// The RSSI of the last sighting (``observed(rssi:)``), published or not.
    var lastRSSI: Int?
    /// A passive device's decoder and publish decisions (DeviceSession+Passive.swift); nil for a
    /// device that connects.
    var passive: Passive?
    /// A passive device's newest advertisement not taken yet: one per device at most, the newest
    /// wins (``heard(_:)``).
    nonisolated let heardSlot = Mutex<Advertisement?>(nil)
    /// Never connected: read from advertisements (``passive``).
    nonisolated let isPassive: Bool
    /// `<base>/<device>/response`, made once (every command's answer goes there).
    nonisolated let responseTopic: String
    /// The next deadline last posted to the bridge's timer (``postDeadline()``); `.none`: none
    /// posted since the timer took the last one.
    var postedDeadline: BridgeInstant?? = .none

    init(config: DeviceConfig, driver: any DeviceDriver, central: any BLECentral, output: SessionOutput,
         initialState: JSONObject, reconnect: (min: Duration, max: Duration),
         connectAttempt: Duration = Bridge.defaultConnectAttempt, owned: Bool = true, decoder: (any PassiveDecoder)? = nil,
         lastCounter: UInt32? = nil) {
        self.config = config
        self.driver = driver
        self.output = output
        executor = output.loop?.executor ?? QueueExecutor(label: "gatt2mqtt.session.\(config.id)")
        unownedExecutor = executor.asUnownedSerialExecutor()
        self.state = DeviceState(initialState)
        passive = decoder.map { Passive(decoder: $0, config: config, state: initialState, lastCounter: lastCounter) }
        isPassive = decoder != nil
        link = LinkStateMachine(owned: owned)
        schedule = LinkSchedule(now: output.clock.now())
        metrics = output.metrics.device(config.id)
        responseTopic = output.topics.response(config.id)
        linkDriver = LinkDriver(address: config.address ?? "", notify: driver.notifyCharacteristics, pair: driver.requiresPairing,
                                central: central, output: output, metrics: metrics, reconnect: reconnect,
                                connectAttempt: connectAttempt, owned: owned, events: sink)
    }

    var id: String { config.id }

    /// Whether the link is up, for the cluster's sightings (any thread; `linked.withLock { $0 }`).
    nonisolated var linked: LinkSignal { linkDriver.signal }

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
        sink.yield(.command(command), inline: true)
    }

    /// The bridge's timer, at the session's deadline (``nextDeadline``): deadlines, timeouts,
    /// keep-alives and polls are checked now.
    nonisolated func tick() { sink.yield(.tick) }

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
    nonisolated func observed(rssi: Int) { sink.yield(.observed(rssi: rssi), inline: true) }

    /// This node gained (`true`) or lost the device; returns once the session took it in (on a
    /// loss: the waiting commands ended with `error`, or, when `error` is nil, dropped with their
    /// outbox rows and not answered because the node that won holds them; the link closed).
    nonisolated func setOwned(_ owned: Bool, failingQueuedWith error: CommandError?) async {
        if owned { linkDriver.signal.set(owned: true) }  // the connect loop starts at once
        await withCheckedContinuation { sink.yield(.ownership(owned, error: error, done: $0)) }
    }

    /// Runs until cancelled or stopped: keeps the link, processes commands and notifications.
    /// Ticks come from the bridge's one timer (``tick()``) at the session's next deadline, which
    /// the session posts after each event (``postDeadline()``), not from a timer per session.
    func run() async {
        if let loop = output.loop {
            sink.allowInline(SessionEvents.Inline(loop: loop) { event in self.handleNowOnExecutor(event) })
        }
        await withDiscardingTaskGroup { group in
            if !isPassive {  // a passive device is never connected
                group.addTask { await self.linkDriver.maintainLink() }
                group.addTask { await self.linkDriver.runWrites() }
            }
            while let event = await sink.next() {
                if case let .stop(error, done) = event {
                    stopped.append(done)
                    if error == nil { storeDeferredRows() }  // left in the outbox for the next session
                    stopQueued(error)
                    break
                }
                let settling: CheckedContinuation<Void, Never>? = if case let .settle(c) = event { c } else { nil }
                if let wait = take(event) { await perform(wait) }
                afterEvent(settling: settling)
                if Task.isCancelled { break }
            }
            linkDriver.finishWrites()
            group.cancelAll()
        }
        output.wake.set(ObjectIdentifier(self), nil)
        // Cancelled (the bridge stops) with a command whose `queued` row was put off: stored now,
        // so it stays in the outbox for the next start.
        storeDeferredRows()
        await shutdown()
        // Events that came after the stop: their commands and waiters must not hang.
        sink.finish()
        while let event = await sink.next() {
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

    /// What an event leaves to wait for: the only two that wait for I/O. Every other event is
    /// handled without a suspension point, so the session's loop takes an event, handles it and
    /// takes the next without leaving its executor (each `await` of an async call costs task
    /// switches, an async frame and a look-up of the task's executor under a lock: 3 events per
    /// command, ~10k instructions; docs/benchmarks.md, "session 7").
    enum Wait {
        /// A link that came up after the device was lost to another node: closed.
        case disconnect(any BLELink)
        /// This node gained or lost the device; `done` is resumed after.
        case ownership(Bool, error: CommandError?, done: CheckedContinuation<Void, Never>?)
    }

    /// Handles `event` up to what it must wait for (``perform(_:)``); ``afterEvent(settling:)``
    /// then does what follows every event. The event is handed over, not copied.
    func take(_ event: consuming Event) -> Wait? {
        switch event {
        case let .command(cmd):
            backlog.subtract(1, ordering: .relaxed)
            accept(cmd)
        case let .linkUp(l):
            switch link.linkUp(l) {
            case let .takeLink(waiters):
                linkUp(l)
                for w in waiters { w.resume(returning: .up) }
            case .disconnect:
                return .disconnect(l)  // connected as it lost the device
            }
        case let .linkDown(reason):
            if link.linkLost() { linkDown(reason) }  // else closed when the device was handed over
        case let .ownership(on, error, done):
            return .ownership(on, error: error, done: done)
        case let .connectFailed(error):
            link.connectFailed(error)
            output.logger.debug("connect failed", metadata: ["device": "\(id)", "error": "\(error)"])
        case let .waitForLink(deadline, c):
            if let answer = link.wait(c, until: deadline) { c.resume(returning: answer) }
        case .stop: break  // taken by run()
        case .settle: storeDeferredRows()  // resumed below, after the dispatch
        case .deferredRowsDue: storeDeferredRows()
        case let .notification(n): process(driver.receive(n), from: n)
        case let .observed(rssi): if link.isOwned { updateRSSI(rssi) }
        case .advertised: advertised()
        case .tick:
            postedDeadline = .none  // the timer took it: post the next one whatever it is
            if isPassive { passiveTimers() } else { checkTimers() }
        case let .written(sequence, result): written(sequence, result)
        }
        return nil
    }

    /// Handles an event that waits for nothing (``take(_:)`` returns no ``Wait``; those posted
    /// with `inline`: a command, a write's outcome, a notification, an advertisement, a sighting,
    /// the deferred rows) as the run loop would, in the turn of whoever posted it
    /// (``SessionEvents/yield(_:inline:)``).
    func handleNow(_ event: consuming Event) {
        let wait = take(event)
        assert(wait == nil, "an event handled inline asked to wait")
        afterEvent(settling: nil)
    }

    /// ``handleNow(_:)`` from the loop's callback that ``SessionEvents`` found on the session's
    /// executor (its thread, outside any task): what `assumeIsolated` does once that is checked,
    /// without checking again through the runtime (two executor look-ups and two closure
    /// contexts per event).
    nonisolated func handleNowOnExecutor(_ event: Event) {
        let body: (isolated DeviceSession, Event) -> Void = { session, event in session.handleNow(event) }
        unsafeBitCast(body, to: ((DeviceSession, Event) -> Void).self)(self, event)
    }

    func perform(_ wait: Wait) async {
        switch wait {
        case let .disconnect(l):
            await linkDriver.signal.working { await l.disconnect() }
        case let .ownership(on, error, done):
            await ownership(on, failingQueuedWith: error)
            done?.resume()
        }
    }

    /// After every event: the next command started, the next deadline posted, the answers'
    /// writes committed (or left to the turn's end).
    func afterEvent(settling: CheckedContinuation<Void, Never>?) {
        dispatch()
        postDeadline()
        metrics.queueDepth.record(queue.count)
        // The answers' writes: committed now, or by the event loop's hook once the turn's other
        // events are in (``AnswerBatch``). A settle waiter sees them stored and published.
        if let settling {
            output.batch.commit()
            settling.resume()
        } else if !output.batch.deferred {
            output.batch.commit()
        }
    }

    /// Whether no command is under way or waiting (a handover drains to this).
    func isIdle() -> Bool { queue.isIdle }

    /// For the health topic: link state and queue depth; a passive device (never connected) says
    /// so, and whether it is heard (`available`: online by its advertisements).
    func health() -> JSONValue {
        if let passive {
            return ["connected": false, "passive": true, "available": .bool(passive.tracker.online), "queue": 0, "in_flight": false]
        }
        return ["connected": .bool(link.isUp), "available": .bool(link.available), "queue": .int(Int64(queue.count)),
                "in_flight": .bool(queue.inFlight != nil)]
    }

    /// Republishes retained topics (after the broker came back).
    func republish() {
        guard link.isOwned else { return }
        publishAvailability(passive.map(\.tracker.online) ?? link.available)
        if !state.isEmpty { publishState() }
    }

    func publishAvailability(_ on: Bool) {
        output.mqtt.send(OutboundMessage(topic: output.topics.availability(id), json: ["state": on ? "online" : "offline"], qos: 1, retain: true))
    }

    /// - Parameter json: the state's JSON text when the caller has it (the text just stored).
    func publishState(json: String? = nil) {
        let payload = Array((json ?? state.json).utf8)
        output.mqtt.send(OutboundMessage(topic: output.topics.state(id), payload: payload, qos: output.stateQoS, retain: output.retainState))
    }
}
