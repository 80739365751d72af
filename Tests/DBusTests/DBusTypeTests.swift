import CDBus
import Testing
@testable import DBus

@Suite struct DBusTypeTests {
    @Test func parsesBlueZSignatures() throws {
        #expect(try DBusType(signature: "a{oa{sa{sv}}}")
            == .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .properties)))
        #expect(try DBusType(signature: "a{qv}") == .dictionary(key: .uint16, value: .variant))
        #expect(try DBusType(signature: "a{say}") == .dictionary(key: .string, value: .array(.byte)))
        #expect(try DBusType(signature: "(ia(sv)h)") == .struct([.int32, .array(.struct([.string, .variant])), .unixFD]))
        #expect(try DBusType.parse(signature: "ybnqiuxtdsogh").map(\.signature).joined() == "ybnqiuxtdsogh")
        #expect(try DBusType.parse(signature: "").isEmpty)
        for sig in ["a{oa{sa{sv}}}", "a(yy)", "aav", "(a{sv}as)"] {
            #expect(try DBusType(signature: sig).signature == sig)
        }
    }

    @Test func rejectsBadSignaturesWithOffset() {
        let cases: [(String, Int)] = [
            ("a", 1), ("(", 0), ("()", 1), ("a{vs}", 2), ("{sv}", 0), ("a{s}", 3), ("a{sss}", 4),
            ("z", 0), ("i)", 1), ("a{sv", 4),
        ]
        for (sig, offset) in cases {
            #expect(throws: DBusError.self, "\(sig)") { try DBusType.parse(signature: sig) }
            do {
                _ = try DBusType.parse(signature: sig)
            } catch {
                guard case let .invalidSignature(s, o, _) = error else {
                    Issue.record("\(sig): \(error)")
                    continue
                }
                #expect(s == sig)
                #expect(o == offset, "\(sig)")
            }
        }
        #expect(throws: DBusError.self) { try DBusType.parse(signature: String(repeating: "a", count: 33) + "y") }
        #expect(throws: DBusError.self) { try DBusType.parse(signature: String(repeating: "i", count: 256)) }
        #expect(throws: DBusError.self) { try DBusType(signature: "ii") }
    }

    @Test func validateCatchesWhatLibdbusWouldAbortOn() {
        #expect(throws: DBusError.self) { try DBusValue.array(element: .string, [.int32(1)]).validate() }
        #expect(throws: DBusError.self) { try DBusValue.string("a\0b").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("/a//b").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("/a/").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("a").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("/a-b").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("//").validate() }
        #expect(throws: DBusError.self) { try DBusValue.objectPath("/a/é").validate() }
        #expect(throws: DBusError.self) { try DBusValue.string("NUL at the end\0").validate() }
        #expect(throws: Never.self) { try DBusValue.string("").validate() }
        #expect(throws: DBusError.self) { try DBusValue.struct([]).validate() }
        #expect(throws: DBusError.self) { try DBusValue.signature("a{").validate() }
        #expect(throws: DBusError.self) {
            try DBusValue.dictionary(key: .string, value: .variant, [DBusDictEntry(.string("k"), .int32(1))]).validate()
        }
        #expect(throws: DBusError.self) {
            try DBusValue.dictionary(key: .variant, value: .variant, []).validate()
        }
        var deep = DBusValue.int32(0)
        for _ in 0..<70 { deep = .variant(deep) }
        #expect(throws: DBusError.self) { try deep.validate() }
        #expect(throws: Never.self) { try DBusValue.objectPath("/org/bluez/hci0/dev_C0_FF_EE_00_00_01").validate() }
        #expect(throws: Never.self) { try DBusValue.objectPath("/").validate() }
        #expect(throws: Never.self) { try DBusValue.array(element: .properties, []).validate() }
        // Byte arrays (every GATT write) and the common dictionaries take a short path: same verdicts.
        #expect(throws: Never.self) { try DBusValue.bytes([0, 1, 0xFF]).validate() }
        #expect(throws: DBusError.self) { try DBusValue.array(element: .byte, [.byte(1), .int32(2)]).validate() }
        #expect(throws: Never.self) { try DBusValue.array(element: .array(.byte), [.bytes([1]), .bytes([])]).validate() }
        #expect(throws: DBusError.self) { try DBusValue.array(element: .array(.byte), [.bytes([1]), .string("x")]).validate() }
        #expect(throws: Never.self) { try DBusValue.properties(["type": .string("request"), "offset": .uint16(0)]).validate() }
        #expect(throws: Never.self) {
            try DBusValue.dictionary(key: .string, value: .array(.string), [DBusDictEntry(.string("k"), .array(element: .string, [.string("v")]))]).validate()
        }
        #expect(throws: DBusError.self) {
            try DBusValue.dictionary(key: .array(.byte), value: .string, []).validate()
        }
        #expect(throws: DBusError.self) {
            try DBusValue.dictionary(key: .string, value: .struct([]), []).validate()
        }
    }

    @Test func emptyContainersKeepTheirSignature() {
        #expect(DBusValue.array(element: .string, []).signature == "as")
        #expect(DBusValue.dictionary(key: .uint16, value: .variant, []).signature == "a{qv}")
        #expect([String: DBusValue]().dbusValue.signature == "a{sv}")
        #expect([DBusObjectPath: [String: [String: DBusValue]]]().dbusValue.signature == "a{oa{sa{sv}}}")
    }

    @Test func convenienceDecoding() throws {
        let props: [String: DBusValue] = ["Powered": .boolean(true), "RSSI": .int16(-60), "UUIDs": .strings(["180f"])]
        let wire = props.dbusValue
        #expect(wire.signature == "a{sv}")
        let back = try wire.decode(as: [String: DBusValue].self)
        #expect(back == props)
        #expect(back["RSSI"]?.integerValue == -60)
        #expect(try back["UUIDs"]?.decode(as: [String].self) == ["180f"])
        #expect(try DBusValue.variant(.string("x")).decode(as: String.self) == "x")
        #expect(throws: DBusError.typeMismatch(expected: "s", actual: "i")) { try DBusValue.int32(1).decode(as: String.self) }
        #expect(throws: DBusError.typeMismatch(expected: "a{sv}", actual: "a{ss}")) {
            try DBusValue.dictionary(key: .string, value: .string, []).decode(as: [String: DBusValue].self)
        }
        let manufacturer: [UInt16: DBusValue] = [0x02F2: .bytes([1, 2])]
        #expect(manufacturer.dbusValue.signature == "a{qv}")
        #expect(try manufacturer.dbusValue.decode(as: [UInt16: DBusValue].self)[0x02F2]?.bytesValue == [1, 2])
        #expect(throws: DBusError.self) { try [DBusValue]().decode(0, as: String.self) }
    }

    @Test func matchRulesQuoteAndMatch() {
        let rule = DBusMatchRule(sender: "org.bluez", interface: "org.freedesktop.DBus.Properties",
                                 member: "PropertiesChanged", path: "/org/bluez/hci0", arguments: [0: "it's"])
        #expect(rule.ruleString == "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path='/org/bluez/hci0',arg0='it'\\''s'")
        var m = DBusMessage(kind: .signal)
        m.sender = ":1.7"
        m.interface = "org.freedesktop.DBus.Properties"
        m.member = "PropertiesChanged"
        m.path = "/org/bluez/hci0"
        m.body = [.string("it's")]
        #expect(rule.matches(m, senderOwner: ":1.7"))
        #expect(!rule.matches(m, senderOwner: ":1.8"))
        let ns = DBusMatchRule(pathNamespace: "/org/bluez")
        #expect(ns.matches(m, senderOwner: nil))
        m.path = "/org/bluezz"
        #expect(!ns.matches(m, senderOwner: nil))
        #expect(DBusMatchRule(pathNamespace: "/").matches(m, senderOwner: nil))
    }
}

/// A path checked once (`init(validating:)`, or read from a message) is not checked again when
/// marshalled; one wrapped unchecked still is. Whether it was checked is not part of its value.
@Suite struct ObjectPathCheckTests {
    @Test func checkedPathsAreKnownValidAndCompareByText() throws {
        let unchecked = DBusObjectPath("/org/bluez/hci0")
        let validated = try DBusObjectPath(validating: "/org/bluez/hci0")
        let received = DBusObjectPath(received: "/org/bluez/hci0")
        #expect(!unchecked.isChecked && validated.isChecked && received.isChecked)
        #expect(unchecked == validated && validated == received)
        #expect(Set([unchecked, validated, received]).count == 1)
        #expect(unchecked.isKnownValid, "an unchecked valid path passes its check")
        for bad in ["", "org", "/a//b", "/a/", "/a-b", "/é"] {
            #expect(!DBusObjectPath(bad).isKnownValid, "\(bad)")
            #expect(throws: DBusError.self) { try DBusObjectPath(validating: bad) }
        }
    }

    @Test func pathsReadFromAMessageComeBackChecked() throws {
        let value = DBusValue.array(element: .objectPath, [.objectPath("/a/b"), .objectPath("/")])
        let msg = try MessageBuilder.methodCall(destination: nil, path: "/x", interface: nil, member: "M", arguments: [value])
        defer { dbus_message_unref(msg) }
        let decoded = try DBusMessage(copying: msg)
        #expect(decoded.path?.isChecked == true)
        guard case let .array(_, items)? = decoded.body.first else { Issue.record("no array"); return }
        #expect(items.allSatisfy { if case let .objectPath(p) = $0 { p.isChecked } else { false } })
        #expect(items == [.objectPath("/a/b"), .objectPath("/")])
    }
}
