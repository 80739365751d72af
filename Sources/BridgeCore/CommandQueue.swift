import BinaryCoding
import BridgeConfig
import BridgeStore

/// One device's commands, without I/O: what waits (user commands and internal requests, the
/// start-up steps ahead of them), the one GATT operation under way, deadlines and answers.
/// Time is passed in (instants of the bridge's clock); the session does the store writes,
/// publishes and BLE calls that each decision asks for (shared/spec/bridge.md: the lifecycle
/// queued → sent → ok/error/expired, at most once, the offline policy).
struct CommandQueue: Sendable {
    /// The command whose GATT operation is under way: its writes (and read) are with the writer
    /// task until ``written(_:failure:)``, and/or its answer (`expect`) is awaited from a
    /// notification — whichever comes first; the answer may arrive before BlueZ returns the write.
    struct InFlight: Sendable {
        var command: PendingCommand
        var expect: String?
        var read: CharacteristicID?
        var sequence: UInt64
        /// How long the answer may take (the request's own timeout, else the command timeout).
        var limit: Duration
        var timeoutAt: BridgeInstant
    }

    /// Commands and internal requests waiting, in order.
    private(set) var waiting: [PendingCommand] = []
    /// Handshake steps (start-up requests, and requests the driver's outputs ask for): they go
    /// before anything in ``waiting``, in order.
    private(set) var startup: [DeviceRequest] = []
    private(set) var inFlight: InFlight?
    /// The GATT operation still with the writer task (one operation in flight per device: no
    /// new one starts before BlueZ returned this one, even when its answer already came).
    private(set) var writing: UInt64?
    private(set) var lastSequence: UInt64 = 0

    var count: Int { waiting.count }

    /// Nothing under way and nothing ahead: a command admitted now goes out at once.
    var isIdle: Bool { inFlight == nil && writing == nil && startup.isEmpty && waiting.isEmpty }

    /// Only the write of the operation under way is ahead, its answer already in: a command
    /// admitted now goes out as soon as BlueZ returns that write (usually in the same event-loop
    /// turn, the method return arriving with the next command).
    var onlyWriteReturnAhead: Bool { inFlight == nil && writing != nil && startup.isEmpty && waiting.isEmpty }

    /// Hands every waiting user command that has no outbox row yet to `body` (which stores it).
    mutating func storeUnstored(_ body: (inout PendingCommand) -> Void) {
        for i in waiting.indices where waiting[i].outboxID == nil && !waiting[i].isInternal { body(&waiting[i]) }
    }

    // MARK: Admission

    enum Admission: Equatable {
        /// Answer `error` at once (the offline policy `reject` while the link is down).
        case reject(CommandError)
        /// Take it: `outbox` says when its row is written; `announce`: publish `queued` (it will
        /// wait: the link is down, or the busy device holds it back).
        case accept(OutboxWrite, announce: Bool)
    }

    /// When an admitted command's outbox row is written (at most once: a row says `sent` before
    /// the device gets the first byte).
    enum OutboxWrite: Equatable {
        /// It goes out at once: the dispatch writes its row `sent`, in one commit, before the
        /// device write (an internal request has none).
        case atDispatch
        /// It waits: stored `queued` now (under `latest`, superseding the older commands for
        /// its attribute).
        case queuedNow
        /// It waits only for BlueZ to return the previous write (its answer already in): stored
        /// `queued` at the end of this event-loop turn if it was not sent by then. The method
        /// return usually arrives with the next command and sends it `sent` in one commit
        /// instead of `queued` then `sent` (without a loop: after the events already received).
        case queuedAtEndOfTurn
        /// It waits and has a row already (from the outbox), or is internal (none).
        case unchanged
    }

    /// The user commands waiting (internal requests not counted).
    var waitingCommands: Int { waiting.reduce(0) { $0 + ($1.isInternal ? 0 : 1) } }

    /// What becomes of `cmd` (already validated) arriving now; `limit`: the most user commands
    /// that may wait (`limits.max_queued`), one more is refused `queue_full`.
    func admission(of cmd: PendingCommand, linkUp: Bool, busy: Bool, policy: OfflinePolicy, device: String,
                   limit: Int = .max) -> Admission {
        if !linkUp, !cmd.isInternal, policy == .reject {
            return .reject(CommandError(.deviceOffline, "\(device) is not connected"))
        }
        if !cmd.isInternal, waitingCommands >= limit {
            return .reject(CommandError(.queueFull, "\(device) has \(limit) commands waiting already (limits.max_queued)"))
        }
        let passes = !busy || cmd.bypassesBusyGate
        let announce = (!linkUp || (inFlight != nil && busy)) && !cmd.announced && !cmd.isInternal
        let outbox: OutboxWrite
        if linkUp, isIdle, passes {
            outbox = .atDispatch
        } else if cmd.outboxID != nil || cmd.isInternal {
            outbox = .unchanged
        } else if linkUp, onlyWriteReturnAhead, passes, policy != .latest {
            // Never put off under `latest`: its store looks for older rows of the attribute and
            // changes the queue.
            outbox = .queuedAtEndOfTurn
        } else {
            outbox = .queuedNow
        }
        return .accept(outbox, announce: announce)
    }

    mutating func append(_ cmd: PendingCommand) { waiting.append(cmd) }

    /// Removes the waiting commands whose outbox rows are `ids` (superseded under the `latest`
    /// policy); returns them in queue order.
    mutating func remove(outboxIDs ids: Set<Int64>) -> [PendingCommand] {
        let removed = waiting.filter { $0.outboxID.map(ids.contains) == true }
        if !removed.isEmpty { waiting.removeAll { $0.outboxID.map(ids.contains) == true } }
        return removed
    }

    /// An internal request (a poll) at the back.
    mutating func appendInternal(_ request: DeviceRequest) {
        waiting.append(PendingCommand(payload: .internal(request), deadline: nil))
    }

    /// An internal request (a keep-alive) ahead of everything waiting.
    mutating func pushInternal(_ request: DeviceRequest) {
        waiting.insert(PendingCommand(payload: .internal(request), deadline: nil), at: 0)
    }

    /// The link is up: the driver's start-up requests run first.
    mutating func startUp(_ requests: [DeviceRequest]) { startup = requests }

    /// Next handshake steps (asked for by the driver's outputs): before anything else, in order.
    mutating func insertSteps(_ requests: [DeviceRequest]) {
        if !requests.isEmpty { startup.insert(contentsOf: requests, at: 0) }
    }

    // MARK: Dispatch

    enum Next {
        /// A GATT operation is under way (or its write not returned yet).
        case underWay
        /// Nothing may go out: the queue is empty, or the busy device holds back what waits.
        case blocked
        /// Send this (a start-up step comes as an internal command).
        case send(PendingCommand)
    }

    /// Takes the next command to send: a start-up step, else the first waiting command the busy
    /// gate lets through.
    mutating func next(busy: Bool) -> Next {
        guard inFlight == nil, writing == nil else { return .underWay }
        if !startup.isEmpty { return .send(PendingCommand(payload: .internal(startup.removeFirst()), deadline: nil)) }
        guard let index = waiting.firstIndex(where: { !busy || $0.bypassesBusyGate }) else { return .blocked }
        return .send(waiting.remove(at: index))
    }

    /// Marks the waiting user commands not announced yet as announced, handing each to `body`
    /// (which publishes `queued`).
    mutating func announceWaiting(_ body: (PendingCommand) -> Void) {
        for i in waiting.indices where !waiting[i].announced && !waiting[i].isInternal {
            waiting[i].announced = true
            body(waiting[i])
        }
    }

    enum Start: Equatable {
        /// Nothing to write, read or await: it ended `ok`.
        case done
        /// Nothing to write: its answer is awaited (until its timeout).
        case awaiting
        /// Hand its writes (and read) to the writer as operation `sequence`.
        case write(sequence: UInt64)
    }

    /// `cmd` (taken by ``next(busy:)``, its outbox row `sent`) goes out as `request` at `now`.
    mutating func start(_ cmd: PendingCommand, _ request: DeviceRequest, commandTimeout: Duration, now: BridgeInstant) -> Start {
        let limit = request.timeout ?? commandTimeout
        if request.writes.isEmpty, request.read == nil {
            guard let key = request.expect else { return .done }
            lastSequence += 1
            inFlight = InFlight(command: cmd, expect: key, read: nil, sequence: lastSequence, limit: limit, timeoutAt: now + limit)
            return .awaiting
        }
        lastSequence += 1
        writing = lastSequence
        inFlight = InFlight(command: cmd, expect: request.read == nil ? request.expect : nil, read: request.read,
                            sequence: lastSequence, limit: limit, timeoutAt: now + limit)
        return .write(sequence: lastSequence)
    }

    enum WriteOutcome {
        /// From a link that is gone: ignore it.
        case stale
        /// The command was already answered (or timed out): only the write's fate is news.
        case alreadyEnded
        /// The read's value came: decode it, end the command.
        case read(InFlight)
        /// Written, nothing to await: `ok`.
        case done(PendingCommand)
        /// Written; the answer is awaited from a notification.
        case awaitingAnswer
        /// Not written (the link was not there): back at the front, its outbox row `queued` again.
        case requeued(PendingCommand)
        /// The write (or read) failed: `error`.
        case failed(PendingCommand)
    }

    /// The writer finished operation `sequence` (`failure` nil: it succeeded).
    mutating func written(_ sequence: UInt64, failure: BLEError?) -> WriteOutcome {
        guard writing == sequence else { return .stale }
        writing = nil
        guard let f = inFlight, f.sequence == sequence else { return .alreadyEnded }
        guard let failure else {
            if f.read != nil {
                inFlight = nil
                return .read(f)
            }
            if f.expect == nil {
                inFlight = nil
                return .done(f.command)
            }
            return .awaitingAnswer
        }
        inFlight = nil
        var cmd = f.command
        if failure.kind == .notConnected, !cmd.isInternal {
            cmd.encoded = nil
            waiting.insert(cmd, at: 0)
            return .requeued(cmd)
        }
        return .failed(cmd)
    }

    // MARK: Answers

    /// The key of the answer awaited now, if any.
    var awaitedKey: String? { inFlight?.expect }

    /// The answer `key` came: the command awaiting it ends (nil: no command awaits it).
    mutating func answer(_ key: String) -> InFlight? {
        guard let f = inFlight, f.expect == key, f.read == nil else { return nil }
        inFlight = nil
        return f
    }

    // MARK: Time, loss, stop

    /// When ``expire(at:)`` has something to do next: the earliest deadline of a waiting user
    /// command, or the answer timeout of the command under way (nil: none).
    var nextDeadline: BridgeInstant? { earliest(inFlight?.timeoutAt, waitingDeadline) }

    /// The earliest deadline of a waiting user command (nil: none).
    var waitingDeadline: BridgeInstant? {
        // By index: the session asks after every event, and a loop over the elements copies each.
        var next: BridgeInstant?
        for i in waiting.indices where !waiting[i].isInternal {
            if let d = waiting[i].deadline, next.map({ d < $0 }) ?? true { next = d }
        }
        return next
    }

    /// At `now`: the waiting user commands whose deadline passed (in order, removed), and the
    /// command under way whose answer is late (ended).
    mutating func expire(at now: BridgeInstant) -> (expired: [PendingCommand], timedOut: InFlight?) {
        func due(_ cmd: PendingCommand) -> Bool {
            if let d = cmd.deadline, d <= now, !cmd.isInternal { return true }
            return false
        }
        var expired: [PendingCommand] = []
        if waiting.contains(where: due) {
            var kept: [PendingCommand] = []
            for cmd in waiting { if due(cmd) { expired.append(cmd) } else { kept.append(cmd) } }
            waiting = kept
        }
        var timedOut: InFlight?
        if let f = inFlight, now >= f.timeoutAt {
            inFlight = nil
            timedOut = f
        }
        return (expired, timedOut)
    }

    /// The link went away: the start-up steps are dropped, the writer's pending result will be
    /// ignored, and the command under way (written: never repeated) is returned to end `error`.
    mutating func linkLost() -> InFlight? {
        startup = []
        writing = nil
        defer { inFlight = nil }
        return inFlight
    }

    /// The session stops: everything is taken out; the command under way and the waiting
    /// commands are returned.
    mutating func stop() -> (interrupted: InFlight?, waiting: [PendingCommand]) {
        defer { inFlight = nil; waiting = [] }
        return (inFlight, waiting)
    }

    /// What becomes of a command found in the outbox at start (or when a session is replaced):
    /// one marked `sent` may have reached the device and is never sent again (at most once).
    enum Resumption: Equatable {
        case interrupted
        case resubmit
    }

    static func resumption(of status: OutboxEntry.Status) -> Resumption {
        status == .sent ? .interrupted : .resubmit
    }
}
