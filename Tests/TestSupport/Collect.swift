import Reactor
import Synchronization

/// Takes elements of `sequence` (an MQTT subscription, a notification stream…) until `count`
/// arrived or `timeout` passed; returns what came. Ends as soon as the last one arrives.
public func collect<S: AsyncSequence & Sendable>(_ sequence: S, count: Int, timeout: Duration = .seconds(10)) async -> [S.Element]
    where S.Element: Sendable, S.Failure == Never
{
    let collected = Collected<S.Element>()
    _ = await withDeadline(timeout) {
        for await element in sequence {
            let taken = collected.items.withLock { $0.append(element); return $0.count }
            if taken >= count { break }
        }
    }
    return collected.items.withLock { $0 }
}

/// Collects from `sequence` until an element satisfies `predicate` (or `timeout`); returns
/// everything collected, the matching element last.
public func collectUntil<S: AsyncSequence & Sendable>(_ sequence: S, timeout: Duration = .seconds(30),
                                                      _ predicate: (S.Element) -> Bool) async -> [S.Element]
    where S.Element: Sendable, S.Failure == Never
{
    var all: [S.Element] = []
    let end = ContinuousClock.now + timeout
    while ContinuousClock.now < end {
        let next = await collect(sequence, count: 1, timeout: end - ContinuousClock.now)
        all += next
        if next.isEmpty || next.contains(where: predicate) { break }
    }
    return all
}

/// Everything `sequence` yields until it ends; nil when it has not ended within `timeout`. For a
/// stream that the code under test closes: what it carried, and that it was closed.
public func collectToEnd<S: AsyncSequence & Sendable>(_ sequence: S, timeout: Duration = .seconds(30)) async -> [S.Element]?
    where S.Element: Sendable, S.Failure == Never
{
    let collected = Collected<S.Element>()
    let ended = await withDeadline(timeout) { () async -> Bool? in
        for await element in sequence { collected.items.withLock { $0.append(element) } }
        return Task.isCancelled ? nil : true
    }
    return ended == true ? collected.items.withLock { $0 } : nil
}

/// Elements gathered by one task and read by another (what ``collect(_:count:timeout:)`` took
/// so far; the notifications a test's handler saw).
public final class Collected<Element: Sendable>: Sendable {
    public let items = Mutex<[Element]>([])
    public init() {}
}
