import BridgeStore
import Logging
import Synchronization

/// The store writes of the answers handled in one event-loop turn, and every publish made
/// after the first of them, held until those writes are committed together (docs/benchmarks.md
/// "Issue 12: CPU per command").
///
/// A GoPro's answer (GP-0075) and the state it pushes (GP-0077) arrive in the same turn: one
/// commit (the command's outbox entry removed, the new state saved) instead of two, and with
/// several devices answering at once, one commit for all of them. The durability rule of
/// ``BridgeStore/apply(_:)`` holds: nothing about the staged writes — the response, the
/// retained state — is published before they are in SQLite, because while writes are staged
/// every publish (of any session, and the bridge's own) waits behind them, in the order sent.
/// A command's `sent` entry is never staged: it commits at once, before its device write
/// (at most once).
///
/// Who commits: with an event loop, its before-sleep hook (``Bridge/commitBatch()``), so
/// what one turn staged is committed once; without one (`deferred` false), the session at the
/// end of each event it handled, as before this type existed.
final class AnswerBatch: MQTTPort {
    private struct Pending {
        var writes: [BridgeStore.Write] = []
        var messages: [OutboundMessage] = []
        /// A staged write is on a command's or a notification's path: the commit is timed
        /// (`gatt2mqtt_sqlite_commit_duration_seconds`).
        var timed = false
        /// Run at the end of the turn, before the commit (``atEndOfTurn(_:)``).
        var endOfTurn: [@Sendable () -> Void] = []
        var isEmpty: Bool { writes.isEmpty && messages.isEmpty }
    }

    let inner: any MQTTPort
    let store: BridgeStore
    let metrics: BridgeMetrics
    let logger: Logger
    /// True when an event-loop hook commits (``Bridge/commitBatch()``).
    let deferred: Bool
    private let pending = Mutex(Pending())

    init(inner: any MQTTPort, store: BridgeStore, metrics: BridgeMetrics, logger: Logger, deferred: Bool) {
        self.inner = inner
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.deferred = deferred
    }

    /// Publishes at once when nothing is staged; else after the staged writes are committed.
    func send(_ message: OutboundMessage) {
        let direct = pending.withLock { p -> Bool in
            if p.isEmpty { return true }
            p.messages.append(message)
            return false
        }
        if direct { inner.send(message) }
    }

    /// Stages writes for the next commit. A device's newer state replaces its staged older
    /// one (the row holds the whole state: only the last text matters). `timed`: the writes are
    /// on a command's or a notification's path (not a link-up's `last_seen`).
    func stage(_ writes: [BridgeStore.Write], timed: Bool = true) {
        guard !writes.isEmpty else { return }
        pending.withLock { p in
            p.timed = p.timed || timed
            for w in writes {
                if case let .saveState(device, _, _) = w {
                    p.writes.removeAll { if case .saveState(device, _, _) = $0 { true } else { false } }
                }
                if case let .saveCounter(device, _, _) = w {
                    p.writes.removeAll { if case .saveCounter(device, _, _) = $0 { true } else { false } }
                }
                p.writes.append(w)
            }
        }
    }

    /// Runs `body` once the events of this turn are handled (at the next ``commit()``, from
    /// the loop's hook); at once when no hook commits.
    func atEndOfTurn(_ body: @escaping @Sendable () -> Void) {
        guard deferred else { return body() }
        pending.withLock { $0.endOfTurn.append(body) }
    }

    /// Commits what is staged in one transaction, then publishes what waited for it, in order.
    /// True when anything was committed or published.
    @discardableResult
    func commit() -> Bool {
        var any = false
        let ends = pending.withLock { p in
            defer { p.endOfTurn = [] }
            return p.endOfTurn
        }
        for body in ends { body() }
        if !ends.isEmpty { any = true }
        while true {
            let batch = pending.withLock { p -> Pending in
                defer { p = Pending() }
                return p
            }
            if batch.isEmpty { return any }
            any = true
            if !batch.writes.isEmpty {
                do throws(StoreError) {
                    if batch.timed {
                        try metrics.commit { () throws(StoreError) in try store.apply(batch.writes) }
                    } else {
                        try store.apply(batch.writes)
                    }
                } catch {
                    logger.error("state write failed", metadata: ["error": "\(error)"])
                }
            }
            for m in batch.messages { inner.send(m) }
        }
    }
}
