import BinaryCoding
import Foundation
import Testing
@testable import BridgeCore

@Suite struct TopicsTests {
    let t = Topics(base: "gatt2mqtt")

    @Test func routesInboundTopics() {
        #expect(t.route("gatt2mqtt/camera/set") == .set(device: "camera"))
        #expect(t.route("gatt2mqtt/camera/set/shutter") == .setAttribute(device: "camera", attribute: "shutter"))
        #expect(t.route("gatt2mqtt/camera/get") == .get(device: "camera"))
        #expect(t.route("gatt2mqtt/hrm/heart_rate/write") == .write(device: "hrm", characteristic: "heart_rate"))
        #expect(t.route("gatt2mqtt/bridge/request/restart") == .bridgeRequest(operation: "restart"))
        #expect(t.route("gatt2mqtt/bridge/request/device/add") == .bridgeRequest(operation: "device/add"))
        #expect(t.route("gatt2mqtt/bridge/request/config/reload") == .bridgeRequest(operation: "config/reload"))
        #expect(t.route("gatt2mqtt/bridge/request/device//add") == nil)
        // Levels are split at the byte "/" (MQTT's separator), names kept whole in UTF-8.
        #expect(t.route("gatt2mqtt/café/set") == .set(device: "café"))
        #expect(t.route("gatt2mqtt/cam\u{301}/set/e\u{301}") == .setAttribute(device: "cam\u{301}", attribute: "e\u{301}"))
        #expect(t.route("gatt2mqtt/cam/\u{301}set") == nil)
    }

    @Test func routesClusterTopics() {
        #expect(t.clusterRoute("gatt2mqtt/bridge/nodes/a/state") == .nodeState("a"))
        #expect(t.clusterRoute("gatt2mqtt/bridge/nodes/b/seen") == .nodeSeen("b"))
        #expect(t.clusterRoute("gatt2mqtt/bridge/owners/cam") == .owner(device: "cam"))
        for topic in ["gatt2mqtt/bridge/owners", "gatt2mqtt/bridge/owners/", "gatt2mqtt/bridge/nodes/a/x", "gatt2mqtt/bridgeowners/cam",
                      "gatt2mqtt/bridge/owners/cam/x", "gatt2mqtt/bridge//owners/cam", "other/bridge/owners/cam"] {
            #expect(t.clusterRoute(topic) == nil, "\(topic)")
        }
    }

    @Test func ignoresOwnOutputAndForeignTopics() {
        for topic in ["gatt2mqtt/camera", "gatt2mqtt/camera/response", "gatt2mqtt/camera/availability",
                      "gatt2mqtt/bridge/state", "gatt2mqtt/bridge/response/x", "other/camera/set",
                      "gatt2mqtt//set", "gatt2mqtt/camera/set/", "gatt2mqttx/camera/set", "gatt2mqtt/a/b/c/d",
                      "gatt2mqtt", "gatt2mqtt/", "gatt2mqtt/bridge", "gatt2mqtt/bridge/request", "gatt2mqtt/bridge/request/"] {
            #expect(t.route(topic) == nil, "\(topic)")
        }
    }

    @Test("topics with more levels than routing keeps: counted, the first four where they lie, an empty level anywhere refused")
    func routesTopicsWithManyLevels() throws {
        #expect(t.route("gatt2mqtt/bridge/request/a/b/c/d") == .bridgeRequest(operation: "a/b/c/d"))
        #expect(t.route("gatt2mqtt/bridge/request/a/b/c//d") == nil)
        for topic in ["gatt2mqtt/a/set/b/c", "gatt2mqtt/a/b/c/d/e/f", "gatt2mqtt/a/b/write/d/e", "gatt2mqtt/cam/set/x/"] {
            #expect(t.route(topic) == nil, "\(topic)")
        }
        #expect(t.clusterRoute("gatt2mqtt/bridge/nodes/a/state/x/y") == nil)
        var topic = "base/l0/l1/l2/l3/l4/l5"
        let levels = try #require(topic.withUTF8 { Topics.levels($0, after: "base") })
        #expect(levels.count == 6)
        #expect((0..<4).map { levels[$0] } == [5..<7, 8..<10, 11..<13, 14..<16])
    }

    @Test func subscriptionsCoverEveryRoute() {
        #expect(t.subscriptions == ["gatt2mqtt/+/set", "gatt2mqtt/+/set/+", "gatt2mqtt/+/get", "gatt2mqtt/+/+/write",
                                    "gatt2mqtt/bridge/request/#"])
        #expect(Topics(base: "home/ble").route("home/ble/cam/set") == .set(device: "cam"))
    }
}

@Suite struct CommandLifecycleTests {
    @Test func parsesObjectAndArrayPayloadsWithTransactions() throws {
        let one = try parseSetPayload(Array(#"{"command":"set_shutter","value":true,"transaction":"t-1"}"#.utf8))
        #expect(one == [InboundCommand(body: ["command": "set_shutter", "value": true], transaction: "t-1")])
        let many = try parseSetPayload(Array(#"[{"command":"sleep"},{"setting":"video_resolution","value":"4K","transaction":7}]"#.utf8))
        #expect(many.count == 2 && many[0].transaction == nil && many[1].transaction == 7)
    }

    @Test func malformedPayloadsGetStableCodes() {
        func code(_ s: String) -> ErrorCode? {
            do { _ = try parseSetPayload(Array(s.utf8)); return nil } catch { return error.code }
        }
        #expect(code("{nope") == .invalidJSON)
        #expect(code("42") == .invalidValue)
        #expect(code("[]") == .invalidValue)
        #expect(code(#"{"transaction":"x"}"#) == .unknownCommand)
        #expect(code(#"[{"command":"a"}, 3]"#) == .invalidValue)
    }

    @Test func shortcutValues() {
        #expect(parseShortcutValue(Array("ON".utf8)) == true)
        #expect(parseShortcutValue(Array("off\n".utf8)) == false)
        #expect(parseShortcutValue(Array("8".utf8)) == 8)
        #expect(parseShortcutValue(Array("4K".utf8)) == "4K")
        #expect(parseShortcutValue(Array(#""video""#.utf8)) == "video")
    }

    @Test func responseJSONShape() {
        let r = CommandResponse(transaction: "t-1", status: .error, command: ["command": "set_brightness", "value": 99],
                                error: CommandError(.invalidValue, "value: 99 is out of range 0…15"))
        #expect(r.json.jsonText == #"{"transaction":"t-1","status":"error","command":{"command":"set_brightness","value":99},"error":{"code":"invalid_value","message":"value: 99 is out of range 0…15"}}"#)
        #expect(CommandResponse(transaction: nil, status: .ok).json.jsonText == #"{"status":"ok"}"#)
        #expect(CommandStatus.expired.isTerminal && !CommandStatus.sent.isTerminal)
    }

    /// The response written member by member (`jsonBytes`, what is published) is the text of the
    /// object `json` builds, byte for byte, with every combination of members and text to escape.
    @Test func responseBytesAreTheObjectsText() {
        let transactions: [JSONValue?] = [nil, "t-1", 42, "quote \" back\\slash\nnewline \u{01} ü"]
        let commands: [JSONValue?] = [nil, ["command": "set_shutter", "value": true], ["a": ["b": [1, 2.5, nil]]], [:]]
        let data: [JSONValue?] = [nil, ["status": 0], .array([]), "plain"]
        let errors: [CommandError?] = [nil, CommandError(.invalidValue, "value: \"x\" is not one of {\"a\"}\t…")]
        let nodes: [String?] = [nil, "pi-kitchen", ""]
        var checked = 0
        for t in transactions { for c in commands { for d in data { for e in errors { for n in nodes {
            for status in [CommandStatus.ok, .error, .queued] {
                var r = CommandResponse(transaction: t, status: status, command: c, data: d, error: e)
                r.node = n
                #expect(r.jsonBytes == Array(r.json.jsonText.utf8), "\(r)")
                // With the transaction's and command's texts made before (a command's, for the outbox).
                let texts = PendingCommand.Texts(transaction: t?.jsonText, command: c?.jsonText)
                #expect(r.jsonBytes(texts: texts) == r.jsonBytes, "\(r)")
                checked += 1
            }
        } } } } }
        #expect(checked == 4 * 4 * 4 * 2 * 3 * 3)
    }

    /// A command's texts are made once, from what it came with; its outbox entry stores them and
    /// its responses carry the same bytes.
    @Test func aCommandsTextsAreItsTransactionAndCommandAsJSON() {
        let cmd = PendingCommand(payload: .command(["command": "set_shutter", "value": true]), transaction: ["id": "quote \" x"],
                                 deadline: nil)
        #expect(cmd.texts.command == #"{"command":"set_shutter","value":true}"#)
        #expect(cmd.texts.transaction == #"{"id":"quote \" x"}"#)
        let entry = cmd.outboxEntry(device: "cam", .sent, now: BridgeInstant(sinceOrigin: .zero), wallNow: Date())
        #expect(entry.command == cmd.texts.command && entry.transaction == cmd.texts.transaction)
        var write = PendingCommand(payload: .write(topic: "raw", payload: Array("a\"b".utf8)), deadline: nil)
        #expect(write.texts.command == #"{"write":"raw","payload":"a\"b"}"#)
        #expect(write.texts.transaction == nil)
        write.payload = .write(topic: "other", payload: [0x31])  // a new payload, new texts
        #expect(write.texts.command == #"{"write":"other","payload":"1"}"#)
        #expect(PendingCommand(payload: .internal(DeviceRequest(writes: [])), deadline: nil).texts.command == nil)
    }
}
