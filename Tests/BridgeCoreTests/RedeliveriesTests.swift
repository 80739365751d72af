@testable import BridgeCore
import Testing

/// A QoS 1 command the broker delivers again after a reconnect is not acted on twice.
struct RedeliveriesTests {
    static let t0 = BridgeInstant.now

    func message(_ id: Int?, _ payload: String = #"{"control":"01"}"#, topic: String = "gatt2mqtt/heart/set") -> InboundMessage {
        InboundMessage(topic: topic, payload: Array(payload.utf8), packetID: id)
    }

    @Test func theSamePacketAgainIsARedeliveryOnlyWithTheSameTopicAndPayloadWithinTheWindow() {
        var r = Redeliveries()
        let first = r.isRedelivery(message(7), at: Self.t0)
        let again = r.isRedelivery(message(7), at: Self.t0 + .seconds(9))
        let next = r.isRedelivery(message(8), at: Self.t0 + .seconds(9))
        let otherPayload = r.isRedelivery(message(7, #"{"control":"02"}"#), at: Self.t0 + .seconds(9))
        let otherTopic = r.isRedelivery(message(7, topic: "gatt2mqtt/strap/set"), at: Self.t0 + .seconds(9))
        #expect(!first && again, "the broker's second delivery")
        #expect(!next && !otherPayload && !otherTopic, "the next packet, another payload, another topic")
        // QoS 0 (no packet id): every message is new.
        let q0 = (r.isRedelivery(message(nil), at: Self.t0), r.isRedelivery(message(nil), at: Self.t0))
        #expect(!q0.0 && !q0.1)
        // Past the window the number may come back for a new message.
        let later = r.isRedelivery(message(7), at: Self.t0 + Redeliveries.window + .seconds(10))
        #expect(!later)
    }

    @Test func theOldestAreForgottenPastTheCapacity() {
        var r = Redeliveries()
        for id in 0..<(r.capacity + 10) { _ = r.isRedelivery(message(id), at: Self.t0) }
        let oldest = r.isRedelivery(message(0), at: Self.t0)
        let newest = r.isRedelivery(message(r.capacity + 9), at: Self.t0)
        #expect(!oldest, "forgotten: over capacity")
        #expect(newest, "the newest is remembered")
    }

    /// The cache is bounded in bytes (`limits.redelivery_cache`): digests, so a message's size
    /// does not count; a budget of 0 remembers nothing.
    @Test func theBudgetBoundsHowManyAreRememberedWhateverTheirSize() {
        var r = Redeliveries(budget: 10 * Redeliveries.entryBytes)
        #expect(r.capacity == 10)
        let big = String(repeating: "x", count: 1 << 20)
        for id in 0..<20 { _ = r.isRedelivery(message(id, big), at: Self.t0) }
        #expect(r.count == 10)
        let newest = r.isRedelivery(message(19, big), at: Self.t0)
        let longer = r.isRedelivery(message(19, big + "y"), at: Self.t0)
        #expect(newest, "the newest is remembered")
        #expect(!longer, "another payload of another length is not it")
        var none = Redeliveries(budget: 0)
        let twice = (none.isRedelivery(message(1), at: Self.t0), none.isRedelivery(message(1), at: Self.t0))
        #expect(!twice.0 && !twice.1)
        #expect(Redeliveries().capacity == 1024 * 1024 / Redeliveries.entryBytes, "1 MiB by default")
    }
}
