import BinaryCoding
import BridgeCore
import Logging
import Synchronization
import TestSupport
import Testing
@testable import BridgeRuntime

/// `bridge/logging`'s bounds (docs/bridge-api.md "The log"): the level, the rate, the broker's
/// backlog, the dropped count, and no feedback loop. End to end: CLITests/ZigbeeShapesTests.
@Suite struct MQTTLogForwarderTests {
    static let topic = "gatt2mqtt/bridge/logging"

    static func line(_ message: String, _ level: Logger.Level = .warning, module: String = "BridgeCore", topic: String? = nil) -> LogLine {
        LogLine(level: level, message: message, namespace: "gatt2mqtt:\(module)", module: module, topic: topic)
    }

    @Test func zigbee2mqttsShapeAtInfoAndAbove() throws {
        let port = FakeMQTT()
        let f = MQTTLogForwarder(port: port, topic: Self.topic, backlog: { (0, true) })
        f.forward(Self.line("below", .debug))
        f.forward(Self.line("notice", .notice))
        f.forward(Self.line("about the logging topic", topic: Self.topic))
        f.forward(Self.line("the client's own", module: "Mosquitto"))
        f.forward(Self.line(String(repeating: "x", count: 5000), .critical))
        let sent = port.messages(Self.topic)
        #expect(sent.count == 2, "\(sent.map(\.text))")
        #expect(sent.first?.text == #"{"level":"info","message":"notice","namespace":"gatt2mqtt:BridgeCore"}"# && sent.first?.qos == 0 && sent.first?.retain == false)
        let long = try #require(try JSONValue(parsing: sent[1].text).objectValue)
        #expect(long["level"] == "error" && (long["message"]?.stringValue?.utf8.count ?? 0) <= MQTTLogForwarder.maxMessage + 3)
        #expect(f.dropped == 0)
    }

    @Test func boundedByRateAndBacklogWithTheDropsCounted() throws {
        let port = FakeMQTT()
        let backlog = Mutex((outstanding: 0, connected: true))
        let f = MQTTLogForwarder(port: port, topic: Self.topic, backlog: { backlog.withLock { $0 } })
        for i in 0..<300 { f.forward(Self.line("line \(i)")) }
        let burst = port.messages(Self.topic).count
        #expect(burst >= Int(MQTTLogForwarder.burst) && burst < 150, "\(burst)")
        #expect(f.dropped == 300 - burst)
        // The broker away, or slow: dropped too.
        backlog.withLock { $0 = (0, false) }
        f.forward(Self.line("away"))
        backlog.withLock { $0 = (MQTTLogForwarder.maxOutstanding + 1, true) }
        f.forward(Self.line("slow"))
        #expect(port.messages(Self.topic).count == burst && f.dropped == 302 - burst)
    }

    @Test func theDropsAreReportedBeforeTheNextLine() async throws {
        let port = FakeMQTT()
        let connected = Mutex(false)
        let f = MQTTLogForwarder(port: port, topic: Self.topic, backlog: { (0, connected.withLock { $0 }) })
        f.forward(Self.line("lost 1"))
        f.forward(Self.line("lost 2"))
        connected.withLock { $0 = true }
        f.forward(Self.line("back"))
        let texts = port.messages(Self.topic).map(\.text)
        #expect(texts.count == 2 && texts[0].contains("2 log line(s) were not published") && texts[1].contains("back"), "\(texts)")
        #expect(f.dropped == 0)
    }

    /// A port that logs while it publishes (as a failing publish would): that line is not
    /// published, so one line cannot become many.
    @Test func noFeedbackLoop() {
        final class LoggingPort: MQTTPort {
            let inner = FakeMQTT()
            let forwarder = Mutex<MQTTLogForwarder?>(nil)
            func send(_ message: OutboundMessage) {
                inner.send(message)
                forwarder.withLock { $0 }?.forward(MQTTLogForwarderTests.line("publish of \(message.topic) failed"))
            }
        }
        let port = LoggingPort()
        let f = MQTTLogForwarder(port: port, topic: Self.topic, backlog: { (0, true) })
        port.forwarder.withLock { $0 = f }
        f.forward(Self.line("one"))
        #expect(port.inner.messages(Self.topic).count == 1 && f.dropped == 1)
    }
}
