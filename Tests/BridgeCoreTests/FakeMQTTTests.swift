import BridgeCore
import TestSupport
import Testing

/// The core tests' MQTT double waits on events, not by polling: a wait ends when the message is
/// sent, at its deadline, or when its task is cancelled.
@Suite struct FakeMQTTTests {
    static func message(_ topic: String, _ text: String) -> OutboundMessage {
        OutboundMessage(topic: topic, payload: Array(text.utf8), qos: 1, retain: false)
    }

    @Test func aWaitForWhatWasSentReturnsAtOnce() async throws {
        let mqtt = FakeMQTT()
        mqtt.send(Self.message("a", "1"))
        mqtt.send(Self.message("b", "2"))
        let got = try await mqtt.wait(for: "a", timeout: .zero)
        #expect(got.map(\.text) == ["1"])
    }

    @Test func aWaitEndsWhenTheMessageIsSent() async throws {
        let mqtt = FakeMQTT()
        let start = ContinuousClock.now
        // Ended by the message, not by the deadline: long before it (a loaded CI machine stalled
        // a test process for 12 s, so "soon" is not measured in seconds).
        async let waited = mqtt.wait(for: "a", count: 2, timeout: .seconds(300))
        #expect(await eventually { mqtt.waiting == 1 }, "the wait is suspended before anything is sent")
        mqtt.send(Self.message("a", "1"))
        mqtt.send(Self.message("b", "x"))
        mqtt.send(Self.message("a", "2"))
        #expect(try await waited.map(\.text) == ["1", "2"])
        #expect(ContinuousClock.now - start < .seconds(150))
    }

    @Test func aWaitEndsAtItsDeadlineNamingWhatItHas() async throws {
        let mqtt = FakeMQTT()
        mqtt.send(Self.message("b", "x"))
        let error = await #expect(throws: WaitTimeout.self) { try await mqtt.wait(for: "a", timeout: .milliseconds(20)) }
        #expect(error?.description.contains("on a; have: [\"b x\"]") == true, "\(String(describing: error))")
    }

    @Test func aCancelledWaitEnds() async throws {
        let mqtt = FakeMQTT()
        let waiting = Task { try await mqtt.wait(for: "a", timeout: .seconds(30)) }
        waiting.cancel()
        await #expect(throws: WaitTimeout.self) { try await waiting.value }
    }

    @Test func manyWaitersEachEndOnTheirOwnElement() async throws {
        let log = WaitableLog<Int>()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for n in 0..<50 {
                group.addTask {
                    let got = await log.wait(timeout: .seconds(30)) { $0.contains(n) }
                    return try #require(got).count
                }
            }
            #expect(await eventually { log.waiting == 50 }, "every wait is suspended before anything is appended")
            for n in 0..<50 { log.append(n) }
            for try await count in group { #expect(count >= 1) }
        }
        #expect(log.elements == Array(0..<50))
    }
}
