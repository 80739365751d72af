import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import TestSupport
import Testing
@testable import DBus

/// Server side: Properties, ObjectManager, Introspect, checked through a second connection and
/// through independent clients (dbus-send, gdbus).
@Suite(.timeLimit(.minutes(1))) struct ExportTests {
    @Test func propertiesGetGetAllSetAndChanged() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            let changes = SignalCollector(try await client.signals(
                matching: .propertiesChanged(sender: EchoServer.name, path: EchoServer.path, interface: EchoServer.interface)))

            let name = try await client.properties("Get", [.string(EchoServer.interface), .string("Name")])
            #expect(name.body == [.variant(.string("echo"))])
            let all = try await client.properties("GetAll", [.string(EchoServer.interface)])
                .decode(0, as: [String: DBusValue].self)
            #expect(all == ["Powered": .boolean(false), "Name": .string("echo"), "Count": .uint32(0)])  // Secret is write-only

            // Remote Set: stored and announced.
            _ = try await client.properties("Set", [.string(EchoServer.interface), .string("Powered"), .variant(.boolean(true))])
            #expect(server.property(EchoServer.path, interface: EchoServer.interface, "Powered") == .boolean(true))
            // Local set: announced once; unchanged value: silent unless alwaysEmit.
            try server.setProperties(EchoServer.path, interface: EchoServer.interface, ["Name": .string("renamed"), "Count": .uint32(5)])
            try server.setProperty(EchoServer.path, interface: EchoServer.interface, "Count", .uint32(5))
            try server.setProperty(EchoServer.path, interface: EchoServer.interface, "Count", .uint32(5), alwaysEmit: true)
            let got = await changes.wait(count: 3)
            #expect(got.count == 3)
            #expect(got.allSatisfy { $0.signature == "sa{sv}as" && $0.body.first == .string(EchoServer.interface) })
            #expect(try got[0].decode(1, as: [String: DBusValue].self) == ["Powered": .boolean(true)])
            #expect(try got[1].decode(1, as: [String: DBusValue].self) == ["Name": .string("renamed"), "Count": .uint32(5)])
            #expect(try got[2].decode(1, as: [String: DBusValue].self) == ["Count": .uint32(5)])
            // Nothing else came: a marker change sent afterwards is the next one.
            try server.setProperty(EchoServer.path, interface: EchoServer.interface, "Name", .string("marker"))
            let withMarker = await changes.wait(count: 4)
            #expect(withMarker.count == 4)
            #expect(try withMarker.last?.decode(1, as: [String: DBusValue].self) == ["Name": .string("marker")])

            // Refusals, with the D-Bus error names clients expect.
            func remoteName(_ args: [DBusValue], _ method: String = "Set") async -> String? {
                do {
                    _ = try await client.properties(method, args)
                    return nil
                } catch {
                    return error.remoteName
                }
            }
            #expect(await remoteName([.string(EchoServer.interface), .string("Name"), .variant(.string("x"))])
                == DBusErrorName.propertyReadOnly)
            #expect(await remoteName([.string(EchoServer.interface), .string("Powered"), .variant(.string("x"))])
                == DBusErrorName.invalidArgs)
            #expect(await remoteName([.string(EchoServer.interface), .string("Count"), .variant(.uint32(101))])
                == "org.bluez.Error.InvalidArguments")
            #expect(await remoteName([.string(EchoServer.interface), .string("Nope")], "Get") == DBusErrorName.unknownProperty)
            #expect(await remoteName([.string("org.example.None")], "GetAll") == DBusErrorName.unknownInterface)
            #expect(await remoteName([.string(EchoServer.interface), .string("Secret")], "Get") == DBusErrorName.accessDenied)
            #expect(server.property(EchoServer.path, interface: EchoServer.interface, "Count") == .uint32(5))

            // Local misuse is a typed error.
            #expect(throws: DBusError.self) {
                try server.setProperty(EchoServer.path, interface: EchoServer.interface, "Count", .string("5"))
            }
            #expect(throws: DBusError.self) {
                try server.setProperty(EchoServer.path, interface: EchoServer.interface, "Missing", .uint32(1))
            }
        }
    }

    static func adapter() -> DBusInterface {
        DBusInterface("org.bluez.Adapter1", methods: [DBusMethod("StartDiscovery") { _ in [] }],
                      properties: [DBusProperty("Powered", .boolean(true)), DBusProperty("Address", .string("00:11:22:33:44:55"))])
    }

    static func device() -> [DBusInterface] {
        [DBusInterface("org.bluez.Device1", properties: [
            DBusProperty("Address", .string("C0:FF:EE:00:00:01")),
            DBusProperty("RSSI", .int16(-60)),
            DBusProperty("ManufacturerData", [UInt16(0x02F2): DBusValue.bytes([1, 2])].dbusValue),
            DBusProperty("UUIDs", .strings([])),
        ])]
    }

    @Test func objectManagerListsAndAnnounces() async throws {
        try await withBus { bus, loop in
            let server = try await bus.connect(loop: loop)
            defer { server.close() }
            try server.addObjectManager(at: .root)
            try server.export("/org/bluez/hci0", interfaces: [Self.adapter()])
            #expect(try await server.requestName("org.example.Manager") == .primaryOwner)
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            let events = SignalCollector(try await client.signals(matching: .objectManager(sender: "org.example.Manager")))

            let before = try await client.call(destination: "org.example.Manager", path: .root,
                                               interface: "org.freedesktop.DBus.ObjectManager", method: "GetManagedObjects")
            #expect(before.signature == "a{oa{sa{sv}}}")
            let objects = try before.decode(0, as: [DBusObjectPath: [String: [String: DBusValue]]].self)
            #expect(objects == ["/org/bluez/hci0": ["org.bluez.Adapter1": ["Powered": .boolean(true),
                                                                           "Address": .string("00:11:22:33:44:55")]]])

            let dev: DBusObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
            try server.export(dev, interfaces: Self.device())
            try server.export(dev.appending("service0010"), interfaces: [DBusInterface("org.bluez.GattService1",
                properties: [DBusProperty("UUID", .string("0000180f-0000-1000-8000-00805f9b34fb")),
                             DBusProperty("Device", .objectPath(dev))])])
            let after = try await client.call(destination: "org.example.Manager", path: .root,
                                              interface: "org.freedesktop.DBus.ObjectManager", method: "GetManagedObjects")
                .decode(0, as: [DBusObjectPath: [String: [String: DBusValue]]].self)
            #expect(after.count == 3)
            #expect(after[dev]?["org.bluez.Device1"]?["RSSI"] == .int16(-60))
            #expect(try after[dev]?["org.bluez.Device1"]?["ManufacturerData"]?.decode(as: [UInt16: DBusValue].self)[0x02F2]?.bytesValue == [1, 2])

            // Removing the device removes its children first.
            try server.unexportTree(dev)
            let got = await events.wait(count: 4)
            #expect(got.map { $0.member ?? "" } == ["InterfacesAdded", "InterfacesAdded", "InterfacesRemoved", "InterfacesRemoved"])
            #expect(got.allSatisfy { $0.path == .root })
            #expect(got[0].signature == "oa{sa{sv}}")
            #expect(got[0].body.first == .objectPath(dev))
            #expect(try got[0].decode(1, as: [String: [String: DBusValue]].self)["org.bluez.Device1"]?["Address"] == .string("C0:FF:EE:00:00:01"))
            #expect(got[2].signature == "oas")
            #expect(got[2].body == [.objectPath(dev.appending("service0010")), .strings(["org.bluez.GattService1"])])
            #expect(got[3].body == [.objectPath(dev), .strings(["org.bluez.Device1"])])
            let last = try await client.call(destination: "org.example.Manager", path: .root,
                                             interface: "org.freedesktop.DBus.ObjectManager", method: "GetManagedObjects")
                .decode(0, as: [DBusObjectPath: [String: [String: DBusValue]]].self)
            #expect(Array(last.keys) == ["/org/bluez/hci0"])

            #expect(throws: DBusError.self) { try server.export("/org/bluez/hci0", interfaces: [Self.adapter()]) }
            #expect(throws: DBusError.self) {
                try server.export("/x", interfaces: [DBusInterface("org.freedesktop.DBus.Properties")])
            }
        }
    }

    @Test func introspectDescribesInterfacesAndChildren() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            try server.export("/org/example/Echo/child1", interfaces: [DBusInterface("org.example.Child")])
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            let xml: String = try await client.call(destination: EchoServer.name, path: EchoServer.path,
                                                   interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
                .decode(0)
            let doc = try XMLDocument(xmlString: xml)
            let ifaces = try doc.nodes(forXPath: "/node/interface/@name").compactMap(\.stringValue)
            #expect(Set(ifaces) == ["org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Peer",
                                    "org.freedesktop.DBus.Properties", EchoServer.interface])
            let upperArgs = try doc.nodes(forXPath: "/node/interface[@name='org.example.Echo']/method[@name='Upper']/arg")
            #expect(upperArgs.count == 4)
            let powered = try doc.nodes(forXPath: "/node/interface[@name='org.example.Echo']/property[@name='Powered']/@access")
            #expect(powered.first?.stringValue == "readwrite")
            let fd = try doc.nodes(forXPath: "//method[@name='AcquireWrite']/arg[@direction='out']/@type").compactMap(\.stringValue)
            #expect(fd == ["h", "q"])
            let children = try doc.nodes(forXPath: "/node/node/@name").compactMap(\.stringValue)
            #expect(children == ["child1"])
            // Intermediate paths list their children without interfaces of their own.
            let root: String = try await client.call(destination: EchoServer.name, path: "/org",
                                                    interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
                .decode(0)
            let rootDoc = try XMLDocument(xmlString: root)
            #expect(try rootDoc.nodes(forXPath: "/node/node/@name").compactMap(\.stringValue) == ["example"])
            #expect(try rootDoc.nodes(forXPath: "/node/interface[@name='org.freedesktop.DBus.Properties']").isEmpty)
        }
    }

    /// dbus-send (from the dbus package) as an independent client of exported objects.
    @Test func crossCheckWithDBusSend() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            let common = ["--bus=\(bus.address)", "--print-reply", "--dest=\(EchoServer.name)", EchoServer.path.rawValue]
            let upper = try await tool("/usr/bin/dbus-send", common + ["org.example.Echo.Upper", "string:hello wörld", "int32:21"])
            #expect(upper.contains("string \"HELLO WÖRLD\""))
            #expect(upper.contains("int32 42"))
            let get = try await tool("/usr/bin/dbus-send", common + ["org.freedesktop.DBus.Properties.Get",
                                                                     "string:org.example.Echo", "string:Name"])
            #expect(get.contains("variant") && get.contains("string \"echo\""))
            _ = try await tool("/usr/bin/dbus-send", common + ["org.freedesktop.DBus.Properties.Set",
                                                               "string:org.example.Echo", "string:Count", "variant:uint32:7"])
            #expect(server.property(EchoServer.path, interface: EchoServer.interface, "Count") == .uint32(7))
            await #expect(throws: (any Error).self) {
                try await tool("/usr/bin/dbus-send", common + ["org.example.Echo.Fail",
                                                               "string:org.bluez.Error.NotPermitted", "string:Not paired"])
            }
            let echoed = try await tool("/usr/bin/dbus-send", common + ["org.example.Echo.Echo", "variant:uint16:7"])
            #expect(echoed.contains("variant") && echoed.contains("uint16 7"))
        }
    }

    /// gdbus (GLib, Debian package libglib2.0-bin from scripts/setup) as a second independent
    /// client: typed call, introspection, error names.
    @Test func crossCheckWithGDBus() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            let base = ["--address", bus.address, "--dest", EchoServer.name, "--object-path", EchoServer.path.rawValue]
            let echo = try await tool("/usr/bin/gdbus", ["call"] + base + ["--method", "org.example.Echo.Echo",
                                                                            "<{'Powered': <true>, 'RSSI': <int16 -60>}>"])
            #expect(echo.contains("'Powered': <true>") && echo.contains("'RSSI': <int16 -60>"))
            let managed = try await tool("/usr/bin/gdbus", ["call"] + base + ["--method", "org.example.Echo.EchoManaged",
                                                                               "{'/org/bluez/hci0': {'org.bluez.Adapter1': {'Powered': <true>}}}"])
            #expect(managed.contains("objectpath '/org/bluez/hci0'"))
            let intro = try await tool("/usr/bin/gdbus", ["introspect"] + base)
            #expect(intro.contains("interface org.example.Echo"))
            #expect(intro.contains("Upper(in  s text,") || intro.contains("Upper(in s text"))
            #expect(intro.contains("readwrite b Powered"))
            do {
                _ = try await tool("/usr/bin/gdbus", ["call"] + base + ["--method", "org.example.Echo.Fail",
                                                                         "org.bluez.Error.InProgress", "busy"])
                Issue.record("gdbus call did not fail")
            } catch {
                #expect("\(error)".contains("org.bluez.Error.InProgress"))
            }
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct ClientHelperTests {
    @Test func standardInterfaceHelpers() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            try server.addObjectManager(at: .root)
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            #expect(try await client.getProperty(destination: EchoServer.name, path: EchoServer.path,
                                                 interface: EchoServer.interface, name: "Name") == .string("echo"))
            try await client.setProperty(destination: EchoServer.name, path: EchoServer.path,
                                         interface: EchoServer.interface, name: "Count", value: .uint32(9))
            let all = try await client.getAllProperties(destination: EchoServer.name, path: EchoServer.path,
                                                        interface: EchoServer.interface)
            #expect(all["Count"] == .uint32(9))
            let objects = try await client.managedObjects(destination: EchoServer.name)
            #expect(objects[EchoServer.path]?[EchoServer.interface]?["Count"] == .uint32(9))
            #expect(try await client.introspect(destination: EchoServer.name, path: "/").contains("<node name=\"org\"/>"))
            do {
                _ = try await client.call(destination: EchoServer.name, path: EchoServer.path,
                                          interface: "org.example.Missing", method: "Echo")
                Issue.record("no error")
            } catch {
                #expect((error as? DBusError)?.remoteName == DBusErrorName.unknownInterface)
            }
        }
    }

    @Test func remoteObjectHandle() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            let echo = client.object(EchoServer.name, EchoServer.path)
            let changes = SignalCollector(try await echo.propertiesChanged(interface: EchoServer.interface))
            #expect(try await echo.call(EchoServer.interface, "Upper", [.string("ab"), .int32(2)], returning: String.self) == "AB")
            #expect(try await echo.property(EchoServer.interface, "Name") == .string("echo"))
            try await echo.setProperty(EchoServer.interface, "Powered", .boolean(true))
            #expect(try await echo.properties(EchoServer.interface)["Powered"] == .boolean(true))
            let got = await changes.wait(count: 1)
            #expect(try got.first?.decode(1, as: [String: DBusValue].self) == ["Powered": .boolean(true)])
        }
    }

    /// A slow handler does not block the next call to the same object (bluetoothd answers
    /// asynchronously: a second Connect while one is pending is answered at once).
    @Test func slowHandlerDoesNotBlockTheSameObject() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            let order = OrderLog()
            async let slow: Void = {
                _ = try? await client.echo("Sleep", [.uint32(2000)])
                order.append("sleep")
            }()
            // The Sleep call is under way (sent, awaiting its reply) before the next one goes.
            #expect(await eventually { client.box.state.withLock { !$0.calls.isEmpty } })
            _ = try await client.echo("Upper", [.string("a"), .int32(1)])
            order.append("upper")
            await slow
            #expect(order.entries == ["upper", "sleep"])
        }
    }
}

import Synchronization

final class OrderLog: Sendable {
    private let log = Mutex<[String]>([])
    func append(_ s: String) { log.withLock { $0.append(s) } }
    var entries: [String] { log.withLock { $0 } }
}
