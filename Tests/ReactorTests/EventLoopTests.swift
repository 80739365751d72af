import Glibc
import Reactor
import Synchronization
import TestSupport
import Testing

/// Marks where code ran.
actor Probe {
    var ranInLoop: [Bool] = []
    func record(_ loop: EventLoop) { ranInLoop.append(loop.inLoop) }
}

@Suite("EventLoop")
struct EventLoopTests {
    @Test("the receive buffer is one per loop: 64 KiB, the same at every use, writable")
    func receiveBufferIsTheLoops() async {
        let loop = EventLoop(name: "t-recv"), other = EventLoop(name: "t-recv2")
        defer { loop.shutdown(); other.shutdown() }
        func lend(_ l: EventLoop, write byte: UInt8) async -> (address: Int, count: Int, first: UInt8) {
            await withCheckedContinuation { c in
                l.execute {
                    c.resume(returning: l.withReceiveBuffer { b -> (Int, Int, UInt8) in
                        let before = b[0]
                        b[0] = byte
                        b[b.count - 1] = byte
                        return (Int(bitPattern: b.baseAddress), b.count, before)
                    })
                }
            }
        }
        let first = await lend(loop, write: 7), again = await lend(loop, write: 8), elsewhere = await lend(other, write: 9)
        #expect(first.count == 65536 && again.count == 65536)
        #expect(first.address == again.address && again.first == 7, "the same buffer, lent again")
        #expect(elsewhere.address != first.address, "each loop has its own")
    }

    @Test("execute runs closures on the loop thread, in submission order")
    func executeOrder() async {
        let loop = EventLoop(name: "t-exec")
        defer { loop.shutdown() }
        #expect(!loop.inLoop)
        let seen = Mutex<[Int]>([])
        let onLoop = Mutex<[Bool]>([])
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            for i in 0..<100 {
                loop.execute {
                    seen.withLock { $0.append(i) }
                    onLoop.withLock { $0.append(loop.inLoop) }
                    if i == 99 { c.resume() }
                }
            }
        }
        #expect(seen.withLock { $0 } == Array(0..<100))
        #expect(onLoop.withLock { $0.allSatisfy { $0 } })
    }

    @Test("work queued by work on the loop runs after the work queued before it, in order, round after round")
    func workQueuedFromTheLoop() async {
        let loop = EventLoop(name: "t-nested")
        defer { loop.shutdown() }
        let seen = Mutex<[String]>([])
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            loop.execute {
                // On the loop: each closure queues the next level from inside the round being run.
                for i in 0..<3 {
                    loop.execute {
                        seen.withLock { $0.append("a\(i)") }
                        loop.execute {
                            seen.withLock { $0.append("b\(i)") }
                            loop.execute {
                                seen.withLock { $0.append("c\(i)") }
                                if i == 2 { c.resume() }
                            }
                        }
                    }
                }
            }
        }
        #expect(seen.withLock { $0 } == ["a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2"])
    }

    @Test("inCallback: true in what the loop runs outside tasks (closures, timers), false in a task's job on it and off it")
    func inCallbackIsTheLoopsOwnCallbacksOnly() async throws {
        let loop = EventLoop(name: "t-callback")
        defer { loop.shutdown() }
        #expect(!loop.inCallback)
        let inClosure = await withCheckedContinuation { c in loop.execute { c.resume(returning: loop.inCallback) } }
        #expect(inClosure)
        let inTimer = await withCheckedContinuation { c in
            _ = loop.schedule(after: .milliseconds(1)) { c.resume(returning: loop.inCallback) }
        }
        #expect(inTimer)
        let inJob = await Task(executorPreference: loop) { (loop.inLoop, loop.inCallback) }.value
        #expect(inJob == (true, false))
        // A closure the loop runs after a job: a callback again.
        let after = await withCheckedContinuation { c in loop.execute { c.resume(returning: loop.inCallback) } }
        #expect(after)
    }

    @Test("tasks preferring the loop, and the default actors they call, run on the loop thread")
    func taskExecutorPreference() async {
        let loop = EventLoop(name: "t-tasks")
        defer { loop.shutdown() }
        let probe = Probe()
        let inLoop = await withTaskExecutorPreference(loop) { () async -> [Bool] in
            var flags = [loop.inLoop]
            await probe.record(loop)
            flags.append(loop.inLoop)
            await withDiscardingTaskGroup { group in
                for _ in 0..<4 { group.addTask { await probe.record(loop) } }
            }
            return flags
        }
        #expect(inLoop == [true, true])
        let recorded = await withTaskExecutorPreference(loop) { await probe.ranInLoop }
        #expect(recorded.count == 5)
        #expect(recorded.allSatisfy { $0 })
    }

    @Test("a watched pipe reports readable on the loop; a cancelled watch is not called again")
    func watchPipe() async throws {
        let loop = EventLoop(name: "t-watch")
        defer { loop.shutdown() }
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        let (r, w) = (fds[0], fds[1])
        defer { close(r); close(w) }
        // Non-blocking: of two handlers woken by one byte, the second reads nothing.
        _ = fcntl(r, F_SETFL, fcntl(r, F_GETFL) | O_NONBLOCK)
        let calls = Mutex<[UInt8]>([])
        let (stream, sink) = AsyncStream.makeStream(of: UInt8.self)
        let watch = loop.watch(r, for: .readable) { events in
            guard events.contains(.readable) else { return }
            var b: UInt8 = 0
            if read(r, &b, 1) == 1 {
                calls.withLock { $0.append(b) }
                sink.yield(b)
            }
        }
        var it = stream.makeAsyncIterator()
        for v: UInt8 in [7, 8, 9] {
            var b = v
            _ = write(w, &b, 1)
            #expect(await it.next() == v)
        }
        watch.cancel()
        _ = await loop.registrations()  // runs after the cancel, on the loop
        // A second watch on the same pipe reads the next byte: the cancelled one, if it were
        // still called, would be called in the same loop turn (and read it, or find nothing).
        let (marker, markerSink) = AsyncStream.makeStream(of: UInt8.self)
        let second = loop.watch(r, for: .readable) { events in
            guard events.contains(.readable) else { return }
            var b: UInt8 = 0
            if read(r, &b, 1) == 1 { markerSink.yield(b) }
        }
        defer { second.cancel() }
        var b: UInt8 = 10
        _ = write(w, &b, 1)
        #expect(await collect(marker, count: 1, timeout: .seconds(30)) == [10])
        _ = await loop.registrations()  // that loop turn is over
        #expect(calls.withLock { $0 } == [7, 8, 9])
    }

    @Test("timers fire in deadline order; a cancelled one never fires")
    func timers() async throws {
        let loop = EventLoop(name: "t-timers")
        defer { loop.shutdown() }
        let fired = Mutex<[String]>([])
        let start = ContinuousClock.now
        loop.schedule(after: .milliseconds(30)) { fired.withLock { $0.append("30") } }
        loop.schedule(after: .milliseconds(10)) { fired.withLock { $0.append("10") } }
        let cancelled = loop.schedule(after: .milliseconds(20)) { fired.withLock { $0.append("20") } }
        cancelled.cancel()
        // Waits for a last timer (deadline after every other one, so after the cancelled one's
        // too: timers fire in deadline order), not for a while: when it fires, all are due.
        let (last, lastFired) = AsyncStream.makeStream(of: Void.self)
        loop.schedule(after: .milliseconds(60)) {
            fired.withLock { $0.append("60") }
            lastFired.yield()
            lastFired.finish()
        }
        #expect(await collect(last, count: 1, timeout: .seconds(30)).count == 1)
        #expect(ContinuousClock.now - start >= .milliseconds(60))
        #expect(fired.withLock { $0 } == ["10", "30", "60"])
    }

    @Test("many timers fire by deadline, equal delays in the order scheduled; cancelled ones never fire")
    func manyTimers() async throws {
        let loop = EventLoop(name: "t-many-timers")
        defer { loop.shutdown() }
        let fired = Mutex<[Int]>([])
        // Delays 20 ms apart, several timers per delay. Each deadline is taken when its timer is
        // scheduled, so scheduling them all must take less than the gap: a CI run on a loaded
        // machine took more than 2 ms (the gap before) for 80 of them, and a later timer of delay 0
        // came after an earlier one of delay 2.
        let delays = (0..<120).map { ($0 * 37) % 15 * 20 }
        let cancelled = Set(stride(from: 3, to: 120, by: 7))
        let expected = delays.indices.filter { !cancelled.contains($0) }.sorted { (delays[$0], $0) < (delays[$1], $1) }
        // A last timer after every other deadline: by the time it fires, so would have a
        // cancelled one (timers fire in deadline order).
        let (last, lastFired) = AsyncStream.makeStream(of: Void.self)
        loop.execute {  // in one loop turn: none fires before all are scheduled
            var timers: [EventLoop.Timer] = []
            for (i, ms) in delays.enumerated() {
                timers.append(loop.schedule(after: .milliseconds(ms)) { fired.withLock { $0.append(i) } })
            }
            for i in cancelled { timers[i].cancel() }
            loop.schedule(after: .milliseconds((delays.max() ?? 0) + 1)) { lastFired.yield() }
        }
        #expect(await collect(last, count: 1, timeout: .seconds(30)).count == 1)
        #expect(fired.withLock { $0 } == expected)
        #expect(await loop.registrations().timers == 0)
    }

    /// `Duration.components` of a negative delay under a second is (0 s, negative attoseconds):
    /// converting it trapped, and a cluster node crashed when it slept until an instant that had
    /// just passed. A delay too long for the loop's nanosecond clock saturates instead of
    /// wrapping around to a short one.
    @Test("a delay that has passed fires at once, under a second or not; one too long to represent does not fire")
    func delaysOutOfRange() async throws {
        let loop = EventLoop(name: "t-odd-delays")
        defer { loop.shutdown() }
        try await loop.sleep(for: .milliseconds(-300))
        try await loop.sleep(for: .nanoseconds(-1))
        try await loop.sleep(for: .seconds(-2))
        try await loop.sleep(for: .zero)
        let fired = Mutex<[String]>([])
        let far = [
            loop.schedule(after: .seconds(Int64.max)) { fired.withLock { $0.append("max") } },
            loop.schedule(after: .seconds(UInt64.max / 1_000_000_000 + 1)) { fired.withLock { $0.append("wraps") } },
        ]
        let (last, lastFired) = AsyncStream.makeStream(of: Void.self)
        loop.schedule(after: .milliseconds(-500)) {
            fired.withLock { $0.append("past") }
            lastFired.yield()
        }
        #expect(await collect(last, count: 1, timeout: .seconds(30)).count == 1)
        #expect(fired.withLock { $0 } == ["past"])
        #expect(await loop.registrations().timers == 2)
        for timer in far { timer.cancel() }
        #expect(await loop.registrations().timers == 0)
    }

    @Test("sleep throws CancellationError when its task is cancelled")
    func sleepCancellation() async {
        let loop = EventLoop(name: "t-sleep")
        defer { loop.shutdown() }
        let task = Task {
            do {
                try await loop.sleep(for: .seconds(30))
                return "slept"
            } catch is CancellationError {
                return "cancelled"
            } catch {
                return "other"
            }
        }
        // Cancelled while it waits on the loop's timer.
        #expect(await eventuallyAsync { await loop.registrations().timers == 1 })
        task.cancel()
        #expect(await task.value == "cancelled")
    }

    @Test("hooks run before the loop waits, after the work queued with them")
    func hooks() async throws {
        let loop = EventLoop(name: "t-hooks")
        defer { loop.shutdown() }
        let log = Mutex<[String]>([])
        let id = loop.addHook { log.withLock { if $0.last != "hook" { $0.append("hook") } } }
        #expect(await eventually { log.withLock { $0 == ["hook"] } })  // added, and idle
        log.withLock { $0.removeAll() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            loop.execute {
                log.withLock { $0.append("a") }
                loop.execute {
                    log.withLock { $0.append("b") }
                    loop.execute { c.resume() }
                }
            }
        }
        // The hook runs once the loop has nothing left to do: after "b", not between.
        #expect(await eventually { log.withLock { $0.count >= 3 } })
        loop.removeHook(id)
        let entries = log.withLock { $0 }
        #expect(entries.starts(with: ["a", "b", "hook"]))
    }

    @Test("a hook may remove itself and add another while the hooks run")
    func hooksChangedByAHook() async throws {
        let loop = EventLoop(name: "t-hook-edit")
        defer { loop.shutdown() }
        let runs = Mutex<[String]>([])
        let first = Mutex<Int?>(nil)
        let id = loop.addHook {
            runs.withLock { $0.append("first") }
            // On the loop thread: the table changes while the loop iterates it.
            if let me = first.withLock({ $0.take() }) {
                loop.removeHook(me)
                loop.addHook { runs.withLock { if $0.last != "second" { $0.append("second") } } }
            }
        }
        first.withLock { $0 = id }
        loop.execute {}  // a turn, so the hooks run: the first removes itself, adds the second
        #expect(await eventually { first.withLock { $0 == nil } })
        loop.execute {}  // the next turn runs the second
        #expect(await eventually { runs.withLock { $0.contains("second") } })
        #expect(await loop.registrations().hooks == 1, "the first removed, the second kept")
        #expect(runs.withLock { $0.filter { $0 == "first" }.count } == 1, "the removed hook did not run again")
    }

    @Test("registrations counts watches, pending timers and hooks, and drops what was cancelled or fired")
    func registrations() async throws {
        let loop = EventLoop(name: "t-regs")
        defer { loop.shutdown() }
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let watch = loop.watch(fds[0], for: .readable) { _ in }
        let timer = loop.schedule(after: .seconds(60)) {}
        let (short, shortFired) = AsyncStream.makeStream(of: Void.self)
        loop.schedule(after: .milliseconds(1)) {
            shortFired.yield()
            shortFired.finish()
        }
        let hook = loop.addHook {}
        // Waits for the short timer to fire (not for a while); registrations() below runs on
        // the loop after the turn in which it fired.
        #expect(await collect(short, count: 1, timeout: .seconds(30)).count == 1)
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 1, timers: 1, hooks: 1))
        watch.cancel()
        timer.cancel()
        loop.removeHook(hook)
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
    }
}

@Suite("EventLoop: leaving it")
struct EventLoopLeavingTests {
    /// `gatt2mqtt run` shuts its loop down after the work that preferred it returned: the code
    /// after `withTaskExecutorPreference` must not still be on the loop thread (shutdown joins it).
    @Test("code after withTaskExecutorPreference runs off the loop")
    func leavesTheLoop() async throws {
        let loop = EventLoop(name: "t-leave")
        let inside = await withTaskExecutorPreference(loop) { () async -> Bool in
            try? await loop.sleep(for: .milliseconds(1))
            return loop.inLoop
        }
        #expect(inside)
        #expect(!loop.inLoop)
        loop.shutdown()
    }
}
