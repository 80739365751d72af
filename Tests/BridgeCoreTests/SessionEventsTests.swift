import Foundation
import Testing
import TestSupport
@testable import BridgeCore

/// The session's event queue: order, finish, cancellation, posts from many threads.
@Suite struct SessionEventsTests {
    /// `.observed(rssi:)` carries a number through the queue.
    static func number(_ e: DeviceSession.Event?) -> Int? {
        if case let .observed(n)? = e { return n }
        return nil
    }

    @Test func eventsComeOutInOrderBufferedOrAwaited() async {
        let q = SessionEvents()
        for n in 0..<600 { q.yield(.observed(rssi: n)) }  // past the compaction threshold
        for n in 0..<300 { #expect(Self.number(await q.next()) == n) }
        for n in 600..<700 { q.yield(.observed(rssi: n)) }
        for n in 300..<700 { #expect(Self.number(await q.next()) == n) }
        // A waiting consumer gets the next post.
        let waiting = Task { await q.next() }
        #expect(await eventually { q.hasWaiter })
        q.yield(.observed(rssi: 7))
        #expect(Self.number(await waiting.value) == 7)
        #expect(!q.hasWaiter)
    }

    @Test func afterFinishTheBufferDrainsThenNilAndLaterPostsAreDropped() async {
        let q = SessionEvents()
        q.yield(.observed(rssi: 1))
        q.yield(.observed(rssi: 2))
        q.finish()
        q.yield(.observed(rssi: 3))
        #expect(Self.number(await q.next()) == 1)
        #expect(Self.number(await q.next()) == 2)
        #expect(await q.next() == nil)
        #expect(await q.next() == nil)
    }

    @Test func finishEndsAWaitingConsumer() async {
        let q = SessionEvents()
        let consumer = Task { await q.next() }
        #expect(await eventually { q.hasWaiter })
        q.finish()
        #expect(await consumer.value == nil)
    }

    @Test func cancellingTheWaitingTaskEndsItsWait() async {
        let q = SessionEvents()
        let consumer = Task { await q.next() }
        #expect(await eventually { q.hasWaiter })
        consumer.cancel()
        #expect(await consumer.value == nil)
        #expect(!q.hasWaiter)
        // A task cancelled before it waits does not wait; the queue still works for the next one.
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await q.next()
        }
        #expect(await cancelled.value == nil)
        q.yield(.observed(rssi: 5))
        #expect(Self.number(await q.next()) == 5)
    }

    @Test func postsFromManyThreadsKeepEachThreadsOrder() async {
        let q = SessionEvents()
        let threads = 4, each = 2000
        let consumer = Task { () -> [Int] in
            var got: [Int] = []
            while got.count < threads * each, let e = await q.next() { got.append(Self.number(e) ?? -1) }
            return got
        }
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0..<each { q.yield(.observed(rssi: t * 1_000_000 + i)) }
        }
        let got = await consumer.value
        #expect(got.count == threads * each)
        for t in 0..<threads {
            let mine = got.filter { $0 / 1_000_000 == t }.map { $0 % 1_000_000 }
            #expect(mine == Array(0..<each), "thread \(t)")
        }
    }
}
