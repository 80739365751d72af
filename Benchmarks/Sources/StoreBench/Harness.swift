import CMallocCounter
import Foundation

/// Keeps a value alive so the optimiser cannot drop the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// What one case measured: wall time, CPU time of the process (user + system, `getrusage`) and
/// heap allocations, per operation.
struct Measurement {
    var name: String
    var operations: Int
    var wallNanoseconds: Double
    var userMicroseconds: Double
    var systemMicroseconds: Double
    var allocations: UInt64

    var line: String {
        let n = Double(operations)
        let cpu = (userMicroseconds + systemMicroseconds) / n
        return String(
            format: "%@ %9.0f ops/s %8.2f µs wall %8.2f µs CPU (%6.2f user %6.2f sys) %7.1f allocs",
            name.padding(toLength: 62, withPad: " ", startingAt: 0) as NSString, 1e9 * n / wallNanoseconds, wallNanoseconds / 1e3 / n, cpu,
            userMicroseconds / n, systemMicroseconds / n, Double(allocations) / n)
    }
}

private func cpuMicroseconds() -> (user: Double, system: Double) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func us(_ t: timeval) -> Double { Double(t.tv_sec) * 1e6 + Double(t.tv_usec) }
    return (us(usage.ru_utime), us(usage.ru_stime))
}

/// Runs `body` (one operation per call, `index` counting from 0) after a warm-up, for about
/// `seconds`, and prints the figures. Runs only when `name` contains the command line's filter.
/// Long enough runs include SQLite's WAL checkpoints in the average.
func measure(_ name: String, seconds: Double = 2.0, warmUp: Int = 500, _ body: (Int) throws -> Void) rethrows {
    if let filter = CommandLine.arguments.dropFirst().first, !name.contains(filter) { return }
    var index = 0
    for _ in 0..<warmUp { try body(index); index += 1 }
    let clock = ContinuousClock()
    let a0 = malloc_counter_allocations()
    let c0 = cpuMicroseconds()
    let start = clock.now
    var operations = 0
    var elapsed = Duration.zero
    while elapsed < .seconds(seconds) {
        for _ in 0..<100 { try body(index); index += 1 }
        operations += 100
        elapsed = clock.now - start
    }
    let c1 = cpuMicroseconds()
    let allocations = malloc_counter_allocations() - a0
    let ns = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
    print(Measurement(name: name, operations: operations, wallNanoseconds: ns, userMicroseconds: c1.user - c0.user,
                      systemMicroseconds: c1.system - c0.system, allocations: allocations).line)
}
