@testable import BridgeCore
import Testing

/// A QoS 1 command the broker delivers again after a reconnect is not acted on twice.
struct RedeliveriesTests {
    static let t0 = ContinuousClock.now

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
        for id in 0..<(Redeliveries.capacity + 10) { _ = r.isRedelivery(message(id), at: Self.t0) }
        let oldest = r.isRedelivery(message(0), at: Self.t0)
        let newest = r.isRedelivery(message(Redeliveries.capacity + 9), at: Self.t0)
        #expect(!oldest, "forgotten: over capacity")
        #expect(newest, "the newest is remembered")
    }
}
