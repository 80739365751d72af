/// A map that keeps only its `capacity` most recently written entries (the oldest written goes
/// first): for what is keyed by what nearby devices send, such as advertising addresses, which
/// a device may randomise at will. A value, no I/O; a write is O(1) amortised.
struct RecentMap<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    let capacity: Int
    private var entries: [Key: (value: Value, stamp: UInt64)] = [:]
    /// The writes in order; an entry written again leaves a stale element behind (its stamp no
    /// longer matches), skipped when it comes up.
    private var order: [(key: Key, stamp: UInt64)] = []
    private var head = 0
    private var stamp: UInt64 = 0

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    var count: Int { entries.count }
    var values: [Value] { entries.values.map(\.value) }
    var keys: [Key] { Array(entries.keys) }

    subscript(key: Key) -> Value? {
        get { entries[key]?.value }
        set {
            guard let newValue else {
                entries[key] = nil
                return
            }
            stamp += 1
            entries[key] = (newValue, stamp)
            order.append((key, stamp))
            while entries.count > capacity { evictOldest() }
            if order.count > 2 * capacity { compact() }
        }
    }

    private mutating func evictOldest() {
        while head < order.count {
            let (key, s) = order[head]
            head += 1
            if entries[key]?.stamp == s {
                entries[key] = nil
                return
            }
        }
    }

    /// Drops the consumed and the stale elements of `order` (a burst of rewrites of the same
    /// few keys must not grow it either).
    private mutating func compact() {
        order = order[head...].filter { entries[$0.key]?.stamp == $0.stamp }
        head = 0
    }

    /// The bookkeeping's size (at most twice the capacity, for the tests).
    var orderCount: Int { order.count }
}
