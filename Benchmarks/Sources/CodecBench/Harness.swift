import CMallocCounter
import Foundation

/// Keeps a value alive so the optimiser cannot drop the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Measures `body`: warms up, then runs batches for about `seconds`; prints ns/op, ops/s
/// and heap allocations per op (counted by interposing malloc). Runs only when `name`
/// contains the filter given on the command line.
func bench(_ name: String, seconds: Double = 1.0, _ body: () throws -> Void) rethrows {
    if let filter = CommandLine.arguments.dropFirst().first, !name.contains(filter) { return }
    for _ in 0..<1000 { try body() }
    let clock = ContinuousClock()
    var iterations = 0
    var batch = 1000
    let a0 = malloc_counter_allocations()
    let start = clock.now
    var elapsed = Duration.zero
    while elapsed < .seconds(seconds) {
        for _ in 0..<batch { try body() }
        iterations += batch
        elapsed = clock.now - start
        if elapsed < .milliseconds(100) { batch *= 2 }
    }
    let allocs = malloc_counter_allocations() - a0
    let ns = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
    let nsPerOp = ns / Double(iterations)
    let line = String(
        format: "%-48@ %10.1f ns/op %14.0f ops/s %8.2f allocs/op", name as NSString, nsPerOp, 1e9 / nsPerOp,
        Double(allocs) / Double(iterations))
    print(line)
}
