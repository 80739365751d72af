import BinaryCoding
import BridgeCore
import Foundation
import Logging
import Synchronization

/// `<base>/bridge/logging` (docs/bridge-api.md "bridge/logging"): the bridge's log lines at
/// `info` and above as zigbee2mqtt publishes them, `{"level","message","namespace"}` (QoS 0, not
/// retained), through the bridge's MQTT port. Bounded: at most ``rate`` lines a second (bursts
/// of ``burst``), each message cut at ``maxMessage`` bytes; a line is dropped, and counted, when
/// the budget is spent, when the broker is away or slow (more than ``maxOutstanding`` messages
/// unacknowledged), or when it is logged while a line is being published (what publishing logs
/// is never published: no feedback loop); nor is a line about the logging topic itself, nor one
/// of the MQTT client (module `Mosquitto`, libmosquitto's lines included). The
/// next line published is preceded by a warning that says how many were dropped.
final class MQTTLogForwarder: Sendable {
    static let rate = 20.0
    static let burst = 100.0
    static let maxMessage = 2048
    static let maxOutstanding = 1000

    let port: any MQTTPort
    let topic: String
    /// How many messages the client has not had acknowledged, and whether it is connected.
    let backlog: @Sendable () -> (outstanding: Int, connected: Bool)

    /// The budget and the count of lines dropped since the last one published, one value behind one lock.
    struct State {
        var tokens = MQTTLogForwarder.burst
        var refilled = ContinuousClock.now
        var dropped = 0
        var publishing = false
    }
    let state = Mutex(State())

    init(port: any MQTTPort, topic: String, backlog: @escaping @Sendable () -> (outstanding: Int, connected: Bool)) {
        self.port = port
        self.topic = topic
        self.backlog = backlog
    }

    /// How many lines were dropped and not reported yet.
    var dropped: Int { state.withLock { $0.dropped } }

    func forward(_ line: LogLine) {
        // The MQTT client's own lines (libmosquitto's included) are about publishing: never published.
        guard line.level >= .info, line.topic != topic, line.module != "Mosquitto" else { return }
        let (outstanding, connected) = backlog()
        let now = ContinuousClock.now
        let dropped: Int? = state.withLock { s in
            let elapsed = Double((now - s.refilled).components.attoseconds) / 1e18 + Double((now - s.refilled).components.seconds)
            s.tokens = min(Self.burst, s.tokens + max(0, elapsed) * Self.rate)
            s.refilled = now
            guard !s.publishing, connected, outstanding <= Self.maxOutstanding, s.tokens >= 1 else {
                s.dropped += 1
                return nil
            }
            s.tokens -= 1
            s.publishing = true
            defer { s.dropped = 0 }
            return s.dropped
        }
        guard let dropped else { return }
        defer { state.withLock { $0.publishing = false } }
        if dropped > 0 {
            publish(.warning, "\(dropped) log line(s) were not published on bridge/logging (rate limit, or the broker slow or away)",
                    namespace: "gatt2mqtt:logging")
        }
        publish(line.level, line.message, namespace: line.namespace)
    }

    func publish(_ level: Logger.Level, _ message: String, namespace: String) {
        var text = message
        if text.utf8.count > Self.maxMessage {
            text = String(decoding: text.utf8.prefix(Self.maxMessage), as: UTF8.self) + "…"
        }
        let body: JSONValue = ["level": .string(Self.levelName(level)), "message": .string(text), "namespace": .string(namespace)]
        port.send(OutboundMessage(topic: topic, json: body, qos: 0, retain: false))
    }

    /// zigbee2mqtt's level names: `info`, `warning`, `error` (notice is info, critical is error).
    static func levelName(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: return "debug"
        case .info, .notice: return "info"
        case .warning: return "warning"
        case .error, .critical: return "error"
        }
    }
}
