import Foundation

/// The one clock of the bridge's core: every deadline, timeout, keep-alive, poll, backoff and
/// tick is read from it (`now`) and waited on with it (`sleep`). The runtime uses the
/// continuous clock (and its event loop's timers for waiting); tests use a manual clock that
/// they advance, so nothing in them waits for real time to pass.
///
/// Times that are stored (outbox `created_at` and `deadline`, `last_seen`) stay wall-clock
/// `Date`s: they must survive a restart, which a monotonic instant does not. They are converted
/// at the store's edge (``date(of:now:)`` and ``instant(of:now:)``).
public struct BridgeClock: Sendable {
    /// The current instant (``BridgeInstant``). Instants of one `BridgeClock` compare only with each other.
    public let now: @Sendable () -> BridgeInstant
    /// Waits for a duration of this clock (throws when the task is cancelled).
    public let sleep: Sleep

    public init(now: @escaping @Sendable () -> BridgeInstant, sleep: Sleep) {
        self.now = now
        self.sleep = sleep
    }

    /// `ContinuousClock` and `Task.sleep`.
    public static let continuous = BridgeClock(now: { .now }, sleep: .task)

    /// `ContinuousClock`, waiting with `sleep` (the runtime's event loop timers).
    public static func continuous(sleep: Sleep) -> BridgeClock { BridgeClock(now: { .now }, sleep: sleep) }

    /// The wall-clock date of `instant`, for the store (`wallNow` is the date at `now`).
    static func date(of instant: BridgeInstant, now: BridgeInstant, wallNow: Date) -> Date {
        wallNow.addingTimeInterval((instant - now).seconds)
    }

    /// The instant of a stored wall-clock `date` (`wallNow` is the date at `now`).
    static func instant(of date: Date, now: BridgeInstant, wallNow: Date) -> BridgeInstant {
        now + .seconds(date.timeIntervalSince(wallNow))
    }
}
