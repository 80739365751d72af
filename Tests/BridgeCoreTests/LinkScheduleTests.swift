import Testing
@testable import BridgeCore

/// The link's timing on its own, driven by instants passed in.
@Suite struct LinkScheduleTests {
    let t0 = BridgeInstant.now
    let read = DeviceRequest(writes: [], read: CharacteristicID("2A19"))
    let other = DeviceRequest(writes: [], read: CharacteristicID("2A1A"))

    func due(_ s: inout LinkSchedule, at t: Duration, _ polls: [(interval: Duration, request: DeviceRequest)]) -> [CharacteristicID?] {
        var out: [CharacteristicID?] = []
        s.duePolls(at: t0 + t, polls) { out.append($0.read) }
        return out
    }

    func ka(_ s: inout LinkSchedule, _ at: BridgeInstant) -> Bool { s.keepAliveDue(at: at, interval: .seconds(3)) }

    @Test func pollsRunAtLinkUpThenEveryInterval() {
        var s = LinkSchedule(now: t0)
        let polls = [(interval: Duration.milliseconds(50), request: read), (interval: Duration.milliseconds(120), request: other)]
        #expect(due(&s, at: .zero, polls).isEmpty, "nothing while the link is down")
        s.up(at: t0, keepAlive: nil, polls: 2)
        #expect(due(&s, at: .zero, polls) == [read.read, other.read])
        #expect(due(&s, at: .milliseconds(49), polls).isEmpty)
        #expect(due(&s, at: .milliseconds(50), polls) == [read.read])
        #expect(due(&s, at: .milliseconds(100), polls) == [read.read])
        #expect(due(&s, at: .milliseconds(120), polls) == [other.read])
        s.down()
        #expect(due(&s, at: .seconds(10), polls).isEmpty)
        s.up(at: t0 + .seconds(20), keepAlive: nil, polls: 2)
        #expect(due(&s, at: .seconds(20), polls) == [read.read, other.read], "a connect re-reads")
    }

    @Test func keepAliveIsDueOneIntervalAfterLinkUpAndAfterEachOne() {
        var s = LinkSchedule(now: t0)
        s.up(at: t0, keepAlive: .seconds(3), polls: 0)
        #expect(!ka(&s, t0 + .milliseconds(2999)))
        #expect(ka(&s, t0 + .seconds(3)))
        let twice = ka(&s, t0 + .seconds(3))
        #expect(!twice, "once per interval")
        #expect(ka(&s, t0 + .seconds(6)))
        s.down()
        #expect(!ka(&s, t0 + .seconds(60)))
        var none = LinkSchedule(now: t0)
        none.up(at: t0, keepAlive: nil, polls: 0)
        let unarmed = ka(&none, t0 + .seconds(60))
        #expect(!unarmed, "no keep-alive armed")
    }

    @Test func silenceCountsFromTheLastGoodExchange() {
        var s = LinkSchedule(now: t0)
        s.up(at: t0, keepAlive: nil, polls: 0)
        #expect(!s.silent(at: t0 + .seconds(10), timeout: .seconds(10)))
        #expect(s.silent(at: t0 + .milliseconds(10_001), timeout: .seconds(10)))
        s.heard(at: t0 + .seconds(8))
        #expect(!s.silent(at: t0 + .seconds(18), timeout: .seconds(10)))
        #expect(s.silent(at: t0 + .milliseconds(18_001), timeout: .seconds(10)))
    }

    @Test func backoffDoublesUpToItsMaximumAndResets() {
        var b = Backoff(min: .milliseconds(100), max: .milliseconds(500))
        var waits: [Duration] = []
        for jitter in [1, 1, 0.5, 1, 1] { waits.append(b.next(jitter: jitter)) }
        // 400 × 0.5 for the third.
        #expect(waits == [.milliseconds(100), .milliseconds(200), .milliseconds(200), .milliseconds(500), .milliseconds(500)])
        b.reset()
        let after = b.next(jitter: 1)
        #expect(after == .milliseconds(100))
    }
}
