/// Where a device's link is, as its session sees it.
enum LinkState: Sendable {
    /// No link: the last one was lost (`lastError` nil) or the last attempt failed with
    /// `lastError`; the connect loop tries again after its backoff.
    case down(lastError: BLEError?)
    /// No link and no attempt ended yet: the session just started, or this node just got the
    /// device.
    case connecting
    /// The link is up; `available`: the device was heard within the availability timeout (what
    /// the retained availability topic says).
    case up(any BLELink, available: Bool)
    /// Another bridge on the broker owns the device (docs/scale-out.md): no link, no publish.
    case notOwned
    /// The session stopped.
    case stopped
}

/// How a wait for the link ended.
enum LinkWait: Sendable, Equatable {
    case up
    /// The deadline passed; the last connect error, if any.
    case timedOut(BLEError?)
    case stopped
}

/// A session's link as a state machine, without I/O: the ``LinkState`` and who waits for the
/// link (``DeviceSession/waitForLink(timeout:)``, each with its deadline). Each transition
/// returns what the session has to do (publish, disconnect, resume a waiter); `Waiter` is what
/// the session resumes (a continuation; anything in the tests).
struct LinkStateMachine<Waiter: Sendable>: Sendable {
    private(set) var state: LinkState
    /// Waiting for the link, with their deadlines, in arrival order.
    private(set) var waiters: [(deadline: BridgeInstant, waiter: Waiter)] = []

    init(owned: Bool) { state = owned ? .connecting : .notOwned }

    /// The link, while it is up.
    var link: (any BLELink)? { if case let .up(l, _) = state { l } else { nil } }
    var isUp: Bool { if case .up = state { true } else { false } }
    /// What the availability topic says: online only while the link is up and the device heard.
    @inline(__always) var available: Bool { if case .up(_, true) = state { true } else { false } }
    /// This node runs the device (not handed over, not stopped).
    var isOwned: Bool { state.isLive }

    enum LinkUpAction {
        /// Take the link (the device is online): the waiters are resumed `up`.
        case takeLink(resume: [Waiter])
        /// This node lost the device (or stopped) while it connected: close the link.
        case disconnect
    }

    /// The connect loop brought a link up.
    mutating func linkUp(_ link: any BLELink) -> LinkUpAction {
        guard isOwned else { return .disconnect }
        state = .up(link, available: true)
        defer { waiters = [] }
        return .takeLink(resume: waiters.map { $0.waiter })
    }

    /// The link went away; true when it was up (the session then carries out the loss), false
    /// when it was already closed (the device was handed over).
    mutating func linkLost() -> Bool {
        guard isUp else { return false }
        state = .down(lastError: nil)
        return true
    }

    /// A connect attempt failed with `error` (kept for the waiters' timeouts).
    mutating func connectFailed(_ error: BLEError) {
        switch state {
        case .down, .connecting: state = .down(lastError: error)
        case .up, .notOwned, .stopped: break
        }
    }

    /// Someone waits for the link until `deadline`: the answer now (up, or stopped), or nil
    /// when it waits.
    mutating func wait(_ waiter: Waiter, until deadline: BridgeInstant) -> LinkWait? {
        if isUp { return .up }
        if case .stopped = state { return .stopped }
        waiters.append((deadline, waiter))
        return nil
    }

    /// The earliest deadline of a waiter (``expire(at:)`` answers it then).
    var nextDeadline: BridgeInstant? { waiters.reduce(nil) { earliest($0, $1.deadline) } }

    /// The waiters whose deadline passed at `now` (removed), each with its answer.
    mutating func expire(at now: BridgeInstant) -> [(waiter: Waiter, answer: LinkWait)] {
        guard waiters.contains(where: { $0.deadline <= now }) else { return [] }
        var lastError: BLEError?
        if case let .down(e) = state { lastError = e }
        let due = waiters.filter { $0.deadline <= now }.map { (waiter: $0.waiter, answer: LinkWait.timedOut(lastError)) }
        waiters.removeAll { $0.deadline <= now }
        return due
    }

    /// The device was heard (a notification): true when it just came back online (publish it).
    mutating func heard() -> Bool {
        guard case let .up(l, false) = state else { return false }
        state = .up(l, available: true)
        return true
    }

    /// The device was silent past the availability timeout: true when it just went offline
    /// (publish it).
    mutating func silent() -> Bool {
        guard case let .up(l, true) = state else { return false }
        state = .up(l, available: false)
        return true
    }

    /// This node got the device back: the connect loop may connect.
    mutating func gained() {
        if case .notOwned = state { state = .connecting }
    }

    /// This node lost the device: the link to close and lose (nil: it was not up).
    mutating func lost() -> (any BLELink)? {
        defer { if isOwned { state = .notOwned } }
        return link
    }

    /// The session stops: the link to close, and the waiters (resumed `stopped`).
    mutating func stop() -> (link: (any BLELink)?, resume: [Waiter]) {
        defer { state = .stopped; waiters = [] }
        return (link, waiters.map { $0.waiter })
    }
}

extension LinkState {
    /// Neither handed over nor stopped.
    var isLive: Bool {
        switch self {
        case .notOwned, .stopped: false
        default: true
        }
    }
}
