import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Testing
@testable import BridgeCore

/// The command queue on its own: no session, no store, no clock but the instants passed in.
@Suite struct CommandQueueTests {
    let t0 = BridgeInstant.now
    let timeout: Duration = .seconds(5)

    func command(_ n: Int, deadline: Duration? = .seconds(60), outbox: Int64? = nil, bypass: Bool = false) -> PendingCommand {
        var c = PendingCommand(payload: .command(["command": "ping", "value": .int(Int64(n))]), outboxID: outbox,
                               transaction: .int(Int64(n)), deadline: deadline.map { t0 + $0 })
        c.bypassesBusyGate = bypass
        return c
    }

    func ping(_ n: Int) -> DeviceRequest {
        DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [1, UInt8(n)])], expect: "ping:\(n)")
    }

    /// The transaction (the test's number) of what `next` hands out, nil when it hands out nothing.
    func nextNumber(_ q: inout CommandQueue, busy: Bool = false) -> Int64? {
        if case let .send(c) = q.next(busy: busy) { return c.transaction?.int64Value }
        return nil
    }

    /// A command arriving after the answer but before BlueZ returned the write: only that
    /// return is ahead of it (the session then stores it at the end of the turn, not at once).
    @Test func onlyTheWriteReturnAhead() {
        var q = CommandQueue()
        #expect(!q.onlyWriteReturnAhead, "idle: nothing ahead")
        q.append(command(1))
        guard case let .send(first) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(first, ping(1), commandTimeout: timeout, now: t0)
        #expect(!q.onlyWriteReturnAhead, "the answer is still awaited")
        _ = q.answer("ping:1")
        #expect(q.onlyWriteReturnAhead)
        q.append(command(2))
        #expect(!q.onlyWriteReturnAhead, "a command waits ahead")
        _ = q.written(1, failure: nil)
        #expect(nextNumber(&q) == 2)
    }

    @Test func commandsGoOutInArrivalOrderOneAtATime() {
        var q = CommandQueue()
        for n in 1...3 { q.append(command(n)) }
        guard case let .send(first) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        #expect(first.transaction == 1)
        let r1 = q.start(first, ping(1), commandTimeout: timeout, now: t0)
        #expect(r1 == .write(sequence: 1))
        if case .underWay = q.next(busy: false) {} else { Issue.record("a second operation started while one is under way") }
        // The answer ends the command, but the operation lasts until its write returned.
        let r2 = q.answer("ping:1")
        #expect(r2?.command.transaction == 1)
        if case .underWay = q.next(busy: false) {} else { Issue.record("the next one started before the write returned") }
        guard case .alreadyEnded = q.written(1, failure: nil) else { Issue.record("expected alreadyEnded"); return }
        #expect(nextNumber(&q) == 2)
    }

    @Test func startUpStepsGoBeforeWaitingCommandsAndInsertedStepsFirst() {
        var q = CommandQueue()
        q.append(command(9))
        q.startUp([ping(1), ping(2)])
        q.insertSteps([ping(0)])
        var order: [String?] = []
        for _ in 0..<4 {
            guard case let .send(c) = q.next(busy: false) else { break }
            if case let .internal(r) = c.payload { order.append(r.expect) } else { order.append("user \(c.transaction?.int64Value ?? -1)") }
            _ = q.start(c, DeviceRequest(writes: []), commandTimeout: timeout, now: t0)  // nothing to write: done
        }
        #expect(order == ["ping:0", "ping:1", "ping:2", "user 9"])
    }

    @Test func deadlinesExpireAtTheExactInstant() {
        var q = CommandQueue()
        q.append(command(1, deadline: .milliseconds(100)))
        q.append(command(2, deadline: .milliseconds(200)))
        q.appendInternal(ping(7))  // internal requests never expire
        let r3 = q.expire(at: t0 + .milliseconds(99))
        #expect(r3.expired.isEmpty)
        let first = q.expire(at: t0 + .milliseconds(100))
        #expect(first.expired.map { $0.transaction } == [1])
        #expect(q.count == 2)
        let second = q.expire(at: t0 + .milliseconds(500))
        #expect(second.expired.map { $0.transaction } == [2])
        #expect(q.count == 1 && q.waiting[0].isInternal)
    }

    @Test func answerTimesOutAtItsLimit() {
        var q = CommandQueue()
        q.append(command(1))
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        var request = ping(1)
        request.timeout = .milliseconds(300)  // the request's own bound wins over the command timeout
        _ = q.start(c, request, commandTimeout: timeout, now: t0 + .seconds(1))
        let r4 = q.expire(at: t0 + .milliseconds(1299))
        #expect(r4.timedOut == nil)
        let late = q.expire(at: t0 + .milliseconds(1300)).timedOut
        #expect(late?.command.transaction == 1 && late?.limit == .milliseconds(300))
        #expect(q.inFlight == nil)
        // Its write returning later changes nothing but freeing the operation.
        guard case .alreadyEnded = q.written(1, failure: nil) else { Issue.record("expected alreadyEnded"); return }
        #expect(q.isIdle)
    }

    @Test func answersMatchOnlyTheAwaitedKey() {
        var q = CommandQueue()
        q.append(command(1))
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(c, ping(1), commandTimeout: timeout, now: t0)
        #expect(q.awaitedKey == "ping:1")
        let r5 = q.answer("ping:2")
        #expect(r5 == nil)
        #expect(q.inFlight != nil)
        let r6 = q.answer("ping:1")
        #expect(r6?.command.transaction == 1)
        let r7 = q.answer("ping:1")
        #expect(r7 == nil, "answered once")
    }

    @Test func aReadEndsWhenItsValueComes() {
        var q = CommandQueue()
        q.append(command(1))
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        let r8 = q.start(c, DeviceRequest(writes: [], read: CharacteristicID("2A19")), commandTimeout: timeout, now: t0)
        #expect(r8 == .write(sequence: 1))
        #expect(q.awaitedKey == nil)
        guard case let .read(f) = q.written(1, failure: nil) else { Issue.record("expected the read"); return }
        #expect(f.read == CharacteristicID("2A19") && q.isIdle)
    }

    @Test func nothingToWriteOrAwaitIsDoneAtOnce() {
        var q = CommandQueue()
        q.append(command(1))
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        let r9 = q.start(c, DeviceRequest(writes: []), commandTimeout: timeout, now: t0)
        #expect(r9 == .done)
        #expect(q.isIdle)
        q.append(command(2))
        guard case let .send(d) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        let r10 = q.start(d, DeviceRequest(writes: [], expect: "late"), commandTimeout: timeout, now: t0)
        #expect(r10 == .awaiting)
        #expect(q.awaitedKey == "late")
    }

    /// At most once: a command handed to the writer is never handed out again — not after a
    /// link loss, not after a stop; only one the link refused before writing goes back.
    @Test func aSentCommandIsNeverSentAgain() {
        var q = CommandQueue()
        q.append(command(1, outbox: 11))
        q.append(command(2, outbox: 12))
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(c, ping(1), commandTimeout: timeout, now: t0)
        let interrupted = q.linkLost()
        #expect(interrupted?.command.outboxID == 11)
        guard case .stale = q.written(1, failure: BLEError(.notConnected, "gone")) else { Issue.record("a dead link's result counts"); return }
        #expect(nextNumber(&q) == 2)
        #expect(nextNumber(&q) == nil)
        // Restart: an outbox row marked `sent` ends interrupted instead of going back to its device.
        #expect(CommandQueue.resumption(of: .sent) == .interrupted)
        #expect(CommandQueue.resumption(of: .queued) == .resubmit)
    }

    @Test func notWrittenGoesBackToTheFrontUnencoded() {
        var q = CommandQueue()
        var first = command(1, outbox: 11)
        first.encoded = ping(1)
        q.append(first)
        q.append(command(2, outbox: 12))
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(c, ping(1), commandTimeout: timeout, now: t0)
        guard case let .requeued(back) = q.written(1, failure: BLEError(.notConnected, "Not connected")) else {
            Issue.record("expected requeued"); return
        }
        #expect(back.outboxID == 11 && back.encoded == nil)
        #expect(q.waiting.map(\.outboxID) == [11, 12])
        // Any other failure ends it.
        guard case let .send(again) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(again, ping(1), commandTimeout: timeout, now: t0)
        guard case let .failed(f) = q.written(2, failure: BLEError(.failed, "write refused")) else { Issue.record("expected failed"); return }
        #expect(f.outboxID == 11 && q.waiting.map(\.outboxID) == [12])
    }

    @Test func busyGateBlocksAndAnnouncesOnce() {
        var q = CommandQueue()
        q.append(command(1))
        q.append(command(2, bypass: true))
        #expect(nextNumber(&q, busy: true) == 2, "the bypassing one passes the one held back")
        if case .blocked = q.next(busy: true) {} else { Issue.record("expected blocked") }
        var announced: [Int64] = []
        q.announceWaiting { announced.append($0.transaction?.int64Value ?? -1) }
        q.announceWaiting { announced.append($0.transaction?.int64Value ?? -1) }
        #expect(announced == [1])
        #expect(nextNumber(&q, busy: false) == 1)
    }

    /// `limits.max_queued`: one user command more than the limit is refused `queue_full`;
    /// internal requests (polls, keep-alives) neither count nor are refused.
    @Test func admissionRefusesACommandBeyondTheQueueLimit() {
        var q = CommandQueue()
        q.append(command(1))
        q.appendInternal(ping(9))
        q.append(command(2))
        #expect(q.waitingCommands == 2)
        #expect(q.admission(of: command(3), linkUp: false, busy: false, policy: .queue, device: "d", limit: 3)
            == .accept(.queuedNow, announce: true))
        #expect(q.admission(of: command(3), linkUp: false, busy: false, policy: .queue, device: "d", limit: 2)
            == .reject(CommandError(.queueFull, "d has 2 commands waiting already (limits.max_queued)")))
        #expect(q.admission(of: command(3), linkUp: true, busy: true, policy: .latest, device: "d", limit: 2)
            == .reject(CommandError(.queueFull, "d has 2 commands waiting already (limits.max_queued)")))
        let poll = PendingCommand(payload: .internal(ping(8)), deadline: nil)
        #expect(q.admission(of: poll, linkUp: true, busy: false, policy: .queue, device: "d", limit: 2)
            == .accept(.unchanged, announce: false))
    }

    @Test func admissionFollowsTheOfflinePolicy() {
        var q = CommandQueue()
        let c = command(1)
        #expect(q.admission(of: c, linkUp: false, busy: false, policy: .reject, device: "d")
            == .reject(CommandError(.deviceOffline, "d is not connected")))
        #expect(q.admission(of: c, linkUp: false, busy: false, policy: .queue, device: "d") == .accept(.queuedNow, announce: true))
        #expect(q.admission(of: c, linkUp: false, busy: false, policy: .latest, device: "d") == .accept(.queuedNow, announce: true))
        #expect(q.admission(of: c, linkUp: true, busy: false, policy: .reject, device: "d") == .accept(.atDispatch, announce: false))
        // Busy: only a bypassing command goes out at once.
        #expect(q.admission(of: c, linkUp: true, busy: true, policy: .queue, device: "d") == .accept(.queuedNow, announce: false))
        #expect(q.admission(of: command(2, bypass: true), linkUp: true, busy: true, policy: .queue, device: "d")
            == .accept(.atDispatch, announce: false))
        // Something ahead: it waits (announced only when the busy device holds the one under way).
        q.append(command(3))
        guard case let .send(s) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(s, ping(3), commandTimeout: timeout, now: t0)
        #expect(q.admission(of: c, linkUp: true, busy: false, policy: .queue, device: "d") == .accept(.queuedNow, announce: false))
        #expect(q.admission(of: c, linkUp: true, busy: true, policy: .queue, device: "d") == .accept(.queuedNow, announce: true))
        // A command from the outbox already has its row.
        #expect(q.admission(of: command(4, outbox: 7), linkUp: false, busy: false, policy: .queue, device: "d")
            == .accept(.unchanged, announce: true))
    }

    /// Only BlueZ's return of the previous write ahead: the `queued` row is put off to the end of
    /// the turn, except under `latest` (its store changes the queue) and for a held-back command.
    @Test func admissionPutsOffTheQueuedRowBehindAWriteReturn() {
        var q = CommandQueue()
        q.append(command(1))
        guard case let .send(first) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(first, ping(1), commandTimeout: timeout, now: t0)
        _ = q.answer("ping:1")
        let c = command(2)
        #expect(q.admission(of: c, linkUp: true, busy: false, policy: .queue, device: "d") == .accept(.queuedAtEndOfTurn, announce: false))
        #expect(q.admission(of: c, linkUp: true, busy: false, policy: .latest, device: "d") == .accept(.queuedNow, announce: false))
        #expect(q.admission(of: c, linkUp: true, busy: true, policy: .queue, device: "d") == .accept(.queuedNow, announce: false))
        #expect(q.admission(of: command(3, bypass: true), linkUp: true, busy: true, policy: .queue, device: "d")
            == .accept(.queuedAtEndOfTurn, announce: false))
    }

    @Test func supersededCommandsLeaveInOrder() {
        var q = CommandQueue()
        for n in 1...4 { q.append(command(n, outbox: Int64(10 + n))) }
        let removed = q.remove(outboxIDs: [14, 12])
        #expect(removed.map(\.outboxID) == [12, 14])
        #expect(q.waiting.map(\.outboxID) == [11, 13])
    }

    @Test func keepAliveGoesFirstPollsLast() {
        var q = CommandQueue()
        q.append(command(1))
        q.appendInternal(DeviceRequest(writes: [], read: CharacteristicID("2A19")))
        q.pushInternal(DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [9])]))
        #expect(q.waiting.map(\.isInternal) == [true, false, true])
        if case let .internal(r) = q.waiting[0].payload { #expect(r.writes.first?.value == [9]) }
    }

    @Test func stopTakesEverything() {
        var q = CommandQueue()
        for n in 1...3 { q.append(command(n)) }
        guard case let .send(c) = q.next(busy: false) else { Issue.record("nothing to send"); return }
        _ = q.start(c, ping(1), commandTimeout: timeout, now: t0)
        let (interrupted, waiting) = q.stop()
        #expect(interrupted?.command.transaction == 1)
        #expect(waiting.map(\.transaction) == [2, 3])
        #expect(q.count == 0 && q.inFlight == nil)
    }

    /// A command and its outbox entry: both directions (the deadline through the wall clock).
    @Test func outboxEntryRoundTrip() throws {
        let wallNow = Date(timeIntervalSince1970: 1_000_000)
        var c = PendingCommand(payload: .command(["command": "shutter", "value": true]), outboxID: nil, transaction: "t1",
                               responseTopic: "reply/here", correlationData: [1, 2], deadline: t0 + .seconds(30), attribute: "shutter")
        var entry = c.outboxEntry(device: "cam", .queued, now: t0, wallNow: wallNow)
        #expect(entry.deviceID == "cam" && entry.status == .queued && entry.attribute == "shutter")
        #expect(entry.deadline == wallNow.addingTimeInterval(30) && entry.createdAt == wallNow)
        entry.id = 5
        let back = try #require(PendingCommand(outboxEntry: entry, now: t0 + .seconds(10), wallNow: wallNow.addingTimeInterval(10)))
        #expect(back.outboxID == 5 && back.transaction == "t1" && back.responseTopic == "reply/here" && back.correlationData == [1, 2])
        #expect(back.commandJSON == c.commandJSON && back.attribute == "shutter" && back.deadline == t0 + .seconds(30))
        c.payload = .write(topic: "level", payload: Array("42".utf8))
        let write = try #require(PendingCommand(outboxEntry: c.outboxEntry(device: "cam", .queued, now: t0, wallNow: wallNow),
                                                now: t0, wallNow: wallNow))
        guard case let .write(topic, payload) = write.payload else { Issue.record("not a write"); return }
        #expect(topic == "level" && payload == Array("42".utf8))
        var garbage = entry
        garbage.command = "not json"
        #expect(PendingCommand(outboxEntry: garbage, now: t0, wallNow: wallNow) == nil)
    }
}
