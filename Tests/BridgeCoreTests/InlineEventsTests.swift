import BinaryCoding
import BridgeStore
import Foundation
import Reactor
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// Events handled in their poster's turn (``SessionEvents``, ``DeviceSession/handleNow(_:)``):
/// when the session's run loop waits with nothing buffered and the poster is one of the session
/// loop's callbacks outside any task; every other event still goes through the run loop, in order.
@Suite struct InlineEventsTests {
    /// A loop for ``SessionEvents`` alone: whether "its callback" runs now is the test's to say.
    /// Its executor is never used (no session runs on it).
    static func fakeLoop(_ inCallback: Flag) -> SessionLoop {
        SessionLoop(executor: NeverExecutor(), inCallback: { inCallback.value.load(ordering: .relaxed) })
    }

    final class Flag: Sendable {
        let value: Atomic<Bool>
        init(_ on: Bool) { value = Atomic(on) }
        func set(_ on: Bool) { value.store(on, ordering: .relaxed) }
    }

    final class NeverExecutor: SerialExecutor {
        func enqueue(_ job: consuming ExecutorJob) { fatalError("no job runs on the fake loop") }
    }

    /// The events a handler saw, in order.
    final class Seen: Sendable {
        let events = Mutex<[Int]>([])
        var all: [Int] { events.withLock { $0 } }
        func add(_ e: DeviceSession.Event) { events.withLock { $0.append(SessionEventsTests.number(e) ?? -1) } }
    }

    @Test func anEventPostedFromTheLoopsCallbackWhileTheRunLoopWaitsIsHandledBeforeTheYieldReturns() async {
        let q = SessionEvents()
        let inCallback = Flag(true)
        let seen = Seen()
        q.allowInline(.init(loop: Self.fakeLoop(inCallback)) { seen.add($0) })
        let consumer = Task { await q.next() }
        #expect(await eventually { q.hasWaiter })
        q.yield(.observed(rssi: 1), inline: true)
        #expect(seen.all == [1])
        #expect(q.hasWaiter)  // the run loop was not woken
        // Not offered for handling in place, or the caller is not one of the loop's callbacks
        // (a task's job on it, another thread): the run loop takes it.
        inCallback.set(false)
        q.yield(.observed(rssi: 2), inline: true)
        #expect(SessionEventsTests.number(await consumer.value) == 2)
        #expect(seen.all == [1])
        inCallback.set(true)
        let second = Task { await q.next() }
        #expect(await eventually { q.hasWaiter })
        q.yield(.observed(rssi: 3))  // inline: false
        #expect(SessionEventsTests.number(await second.value) == 3)
        #expect(seen.all == [1])
    }

    @Test func anEventPostedWhileOneIsHandledInPlaceGoesToTheRunLoopAfterIt() async {
        let q = SessionEvents()
        let seen = Seen()
        let consumer = Task { await q.next() }
        // The handler posts another event, as a session's own output could: not handled inside
        // the first one's handling, but by the run loop once that is over.
        q.allowInline(.init(loop: Self.fakeLoop(Flag(true))) { e in
            seen.add(e)
            if SessionEventsTests.number(e) == 1 {
                q.yield(.observed(rssi: 2), inline: true)
                seen.add(.observed(rssi: 100))  // the handling of 1 went on after posting 2
            }
        })
        #expect(await eventually { q.hasWaiter })
        q.yield(.observed(rssi: 1), inline: true)
        #expect(seen.all == [1, 100])
        #expect(SessionEventsTests.number(await consumer.value) == 2)
    }

    @Test func nothingIsHandledInPlaceWhileTheRunLoopIsBusyOrAfterFinish() async {
        let q = SessionEvents()
        let seen = Seen()
        q.allowInline(.init(loop: Self.fakeLoop(Flag(true))) { seen.add($0) })
        // No waiter (the run loop handles an event): buffered, taken in order.
        q.yield(.observed(rssi: 1), inline: true)
        q.yield(.observed(rssi: 2), inline: true)
        #expect(SessionEventsTests.number(await q.next()) == 1)
        #expect(SessionEventsTests.number(await q.next()) == 2)
        // A waiter, but events still buffered: none may overtake them (the waiter takes the
        // buffer first, so there is none while something is buffered; checked through finish).
        q.finish()
        let after = Task { await q.next() }
        q.yield(.observed(rssi: 3), inline: true)
        #expect(await after.value == nil)
        #expect(seen.all == [])
    }

    /// Runs `body` as one of `loop`'s callbacks (a closure it runs, not a task's job) and returns
    /// its result.
    static func inCallback<T: Sendable>(of loop: EventLoop, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { c in loop.execute { c.resume(returning: body()) } }
    }

    /// The bridge on a real event loop: a command handed over in one of the loop's callbacks (where
    /// the runtime's MQTT messages arrive) is taken and sent before the callback returns — its
    /// outbox row already says `sent`; one handed over in a task's job on the same loop waits for
    /// the session's turn, after that job.
    @Test func aCommandFromTheLoopsCallbackIsSentInThatCallbackOneFromATaskAfterIt() async throws {
        try await withEventLoop { loop in
            let h = try BridgeTests.Harness(loop: SessionLoop(executor: loop, inCallback: { loop.inCallback }))
            try await h.running {
                _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
                #expect(await h.session.waitForLink(timeout: .seconds(5)) == .up)
                await h.session.settled()
                #expect(await eventually { h.session.sink.hasWaiter })
                let inCallback = await Self.inCallback(of: loop) { () -> [String] in
                    h.set(#"{"command":"ping","value":7,"transaction":"t1"}"#)
                    return (try? h.store.pendingCommands(for: "dev").map { "\($0.status)" }) ?? ["the store failed"]
                }
                #expect(inCallback == ["sent"])
                #expect(try await h.responses(1)[0] == ["transaction": "t1", "status": "ok", "command": ["command": "ping", "value": 7], "data": ["echo": 7]])
                #expect(await eventually { h.session.sink.hasWaiter })
                let inJob = await Task(executorPreference: loop) { () -> [String] in
                    h.set(#"{"command":"ping","value":8,"transaction":"t2"}"#)
                    return (try? h.store.pendingCommands(for: "dev").map { "\($0.status)" }) ?? ["the store failed"]
                }.value
                #expect(inJob == [])  // not taken yet: the session runs on this loop, after the job
                let both = try await h.responses(2)
                #expect(both[1]["transaction"] == "t2")
                #expect(both[1]["status"] == "ok")
                #expect(h.device.writes == [[1, 7], [1, 8]])
            }
        }
    }
}
