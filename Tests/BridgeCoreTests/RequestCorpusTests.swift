import BinaryCoding
import BridgeStore
import Foundation
import TestSupport
import Testing
@testable import BridgeCore

/// Replays the request parsers' fuzz corpus (`Fuzz/Requests/corpus`, and the JSON parser's) through
/// the whole core over fakes, as the body of every `bridge/request/…` action and as a device's
/// `/set`: each gets one answer, `ok` or an `error` that says what is wrong, and the bridge still
/// answers a normal request after all of them (docs/security.md).
@Suite struct RequestCorpusTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func inputs() throws -> [(name: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        for folder in ["Fuzz/Requests/corpus", "Fuzz/JSON/corpus"] {
            let dir = root.appendingPathComponent(folder)
            for f in try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() where !f.hasPrefix(".") {
                out.append((folder + "/" + f, [UInt8](try Data(contentsOf: dir.appendingPathComponent(f)))))
            }
        }
        return out
    }

    /// The actions a stranger can name (restart is answered `error` here: the fakes' bridge has no
    /// supervisor hook), and one that does not exist.
    static let actions = ["info", "devices", "health_check", "options", "scan", "device/add", "device/remove", "device/rename",
                          "device/options", "pair", "unpair", "config/reload", "restart", "nonsense"]

    @Test func everyInputAsEveryRequestGetsOneAnswer() async throws {
        let inputs = try Self.inputs()
        #expect(inputs.count >= 10, "the committed corpus is present")
        let mqtt = FakeMQTT()
        let bridge = try BridgeRequestTests.bridge(try BridgeStore.inMemory(), mqtt, central: BridgeRequestTests.central())
        try await bridge.running {
            for action in Self.actions {
                let topic = "gatt2mqtt/bridge/response/\(action)"
                for (i, input) in inputs.enumerated() {
                    bridge.handle(InboundMessage(topic: "gatt2mqtt/bridge/request/\(action)", payload: input.bytes))
                    let answers = try await mqtt.wait(for: topic, count: i + 1, timeout: .seconds(10))
                    let answer = try JSONValue(parsing: answers[i].payload)
                    let status = answer["status"]?.stringValue
                    #expect(status == "ok" || (status == "error" && answer["error"]?.stringValue?.isEmpty == false),
                            "\(action) ← \(input.name): \(answer.jsonText)")
                }
            }
            // Still answering, and the file's device still there.
            let info = try await BridgeRequestTests.request(bridge, mqtt, "devices", "{}")
            #expect(info["status"] == "ok" && info.jsonText.contains(#""dev""#), "\(info.jsonText)")
        }
    }
}
