/// An instant of the bridge's clock (``BridgeClock``): the time since a fixed instant of the
/// continuous clock, the process' origin. Deadlines, timeouts, the link's schedule and the
/// cluster's views are kept in it.
///
/// Not `ContinuousClock.Instant` itself: the standard library does not freeze that type's
/// layout, so every struct of the core that held one (a command with its deadline, the queue,
/// the link's schedule) had a size known only at run time and was copied, compared and
/// destroyed through the runtime's value witnesses; the deadline computed after every event
/// cost ~5k instructions for that alone (docs/benchmarks.md, "Instructions per command"). A
/// `Duration` is frozen, and so is this.
@frozen
public struct BridgeInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// The time since ``origin``.
    public var sinceOrigin: Duration

    @inlinable
    public init(sinceOrigin: Duration) { self.sinceOrigin = sinceOrigin }

    /// The same instant of the continuous clock.
    public init(_ instant: ContinuousClock.Instant) { sinceOrigin = Self.origin.duration(to: instant) }

    /// This instant on the continuous clock.
    public var continuous: ContinuousClock.Instant { Self.origin.advanced(by: sinceOrigin) }

    /// The continuous clock's now.
    public static var now: BridgeInstant { BridgeInstant(ContinuousClock.now) }

    /// The instant all others are counted from (taken once, the first time it is needed).
    static let origin = ContinuousClock.now

    @inlinable
    public func advanced(by duration: Duration) -> BridgeInstant { BridgeInstant(sinceOrigin: sinceOrigin + duration) }

    @inlinable
    public func duration(to other: BridgeInstant) -> Duration { other.sinceOrigin - sinceOrigin }

    @inlinable
    public static func + (lhs: BridgeInstant, rhs: Duration) -> BridgeInstant { lhs.advanced(by: rhs) }

    @inlinable
    public static func - (lhs: BridgeInstant, rhs: Duration) -> BridgeInstant { BridgeInstant(sinceOrigin: lhs.sinceOrigin - rhs) }

    @inlinable
    public static func - (lhs: BridgeInstant, rhs: BridgeInstant) -> Duration { lhs.sinceOrigin - rhs.sinceOrigin }

    @inlinable
    public static func += (lhs: inout BridgeInstant, rhs: Duration) { lhs = lhs + rhs }

    @inlinable
    public static func < (lhs: BridgeInstant, rhs: BridgeInstant) -> Bool { lhs.sinceOrigin < rhs.sinceOrigin }

    public var description: String { "\(sinceOrigin) after the origin" }
}
