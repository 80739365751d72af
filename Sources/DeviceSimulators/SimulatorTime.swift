/// A simulated device's view of the clock it was given (any `Clock<Duration>`: the real
/// `ContinuousClock` in `gatt2mqtt simulate` and `gatt2mqtt peripherals`, a test's manual clock in
/// the tests, which advance it instead of sleeping): the time elapsed since the device was made,
/// which its timers compare, and sleeps, which its timer tasks wait on.
struct SimulatorTime: Sendable {
    /// Time elapsed on the clock since this was made.
    let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    init<C: Clock<Duration>>(_ clock: C) {
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleeper = { try await clock.sleep(for: $0) }
    }

    /// Sleeps for `duration` on the clock; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws { try await sleeper(duration) }
}
