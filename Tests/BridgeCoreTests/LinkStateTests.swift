import Testing
@testable import BridgeCore

/// The link's state machine on its own: waiters are numbers, the link a stub, instants passed in.
@Suite struct LinkStateTests {
    let t0 = BridgeInstant.now

    /// A link that is never used: the machine only holds it.
    final class StubLink: BLELink {
        var notifications: AsyncStream<GATTNotification> { AsyncStream { $0.finish() } }
        var mtu: Int { 23 }
        func write(_ value: [UInt8], to characteristic: CharacteristicID, withResponse: Bool) async throws(BLEError) {}
        func read(_ characteristic: CharacteristicID) async throws(BLEError) -> [UInt8] { [] }
        func disconnect() async {}
    }

    func isDown(_ m: LinkStateMachine<Int>, lastError: BLEError?) -> Bool {
        if case let .down(e) = m.state { return e == lastError }
        return false
    }

    @Test func upResumesTheWaitersAndLossGoesDown() {
        var m = LinkStateMachine<Int>(owned: true)
        guard case .connecting = m.state else { Issue.record("not connecting at start"); return }
        let first = m.wait(1, until: t0 + .seconds(5)), second = m.wait(2, until: t0 + .seconds(9))
        #expect(first == nil && second == nil)
        guard case let .takeLink(resumed) = m.linkUp(StubLink()) else { Issue.record("link not taken"); return }
        #expect(resumed == [1, 2] && m.waiters.isEmpty)
        #expect(m.isUp && m.available && m.link != nil)
        let atOnce = m.wait(3, until: t0)
        #expect(atOnce == .up, "up: answered at once")
        let lost = m.linkLost()
        #expect(lost && isDown(m, lastError: nil) && !m.available)
        let again = m.linkLost()
        #expect(!again, "already down")
    }

    @Test func waitersTimeOutWithTheLastConnectError() {
        var m = LinkStateMachine<Int>(owned: true)
        _ = m.wait(1, until: t0 + .seconds(1))
        _ = m.wait(2, until: t0 + .seconds(3))
        let none = m.expire(at: t0)
        #expect(none.isEmpty)
        let first = m.expire(at: t0 + .seconds(1))
        #expect(first.map { $0.waiter } == [1] && first.map { $0.answer } == [.timedOut(nil)])
        let error = BLEError(.notFound, "no such device")
        m.connectFailed(error)
        #expect(isDown(m, lastError: error))
        let second = m.expire(at: t0 + .seconds(10))
        #expect(second.map { $0.waiter } == [2] && second.map { $0.answer } == [.timedOut(error)])
        // A link up clears the error.
        _ = m.linkUp(StubLink())
        _ = m.linkLost()
        #expect(isDown(m, lastError: nil))
    }

    @Test func availabilityFollowsSilenceAndNotifications() {
        var m = LinkStateMachine<Int>(owned: true)
        let (heardDown, silentDown) = (m.heard(), m.silent())
        #expect(!heardDown && !silentDown, "no link: nothing to publish")
        _ = m.linkUp(StubLink())
        let heardOnline = m.heard()
        #expect(!heardOnline, "already online")
        let wentOffline = m.silent()
        #expect(wentOffline && !m.available)
        let silentOffline = m.silent()
        #expect(!silentOffline, "already offline")
        let cameBack = m.heard()
        #expect(cameBack && m.available)
    }

    @Test func handoverClosesTheLinkAndRefusesNewOnes() {
        var m = LinkStateMachine<Int>(owned: true)
        _ = m.linkUp(StubLink())
        let closed = m.lost()
        #expect(closed != nil && !m.isOwned && !m.isUp)
        let news = m.linkLost()
        #expect(!news, "the loop's link-down after a handover is not news")
        guard case .disconnect = m.linkUp(StubLink()) else { Issue.record("a link while not owned was kept"); return }
        m.connectFailed(BLEError(.failed, "x"))
        guard case .notOwned = m.state else { Issue.record("left notOwned"); return }
        m.gained()
        guard case .connecting = m.state else { Issue.record("not connecting after gaining the device"); return }
        var away = LinkStateMachine<Int>(owned: false)
        let none = away.lost()
        #expect(none == nil && !away.isOwned)
    }

    @Test func stopAnswersTheWaiters() {
        var m = LinkStateMachine<Int>(owned: true)
        _ = m.wait(1, until: t0 + .seconds(5))
        let (link, resumed) = m.stop()
        #expect(link == nil && resumed == [1])
        let late = m.wait(2, until: t0 + .seconds(5))
        #expect(late == .stopped)
        #expect(!m.isOwned)
        guard case .disconnect = m.linkUp(StubLink()) else { Issue.record("a link after the stop was kept"); return }
    }
}
