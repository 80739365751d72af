import DBus
import Foundation
import Reactor
import Synchronization
import Testing

/// A passive BTHome thermometer on the real stack (issue 23): the model's advertisement, put on
/// Bumble's radio as a non-connectable advertiser (radio.py), reaches a D-Bus client of the real
/// bluetoothd 5.66 as changing `ServiceData`; what bluetoothd emits per advertisement with
/// `DuplicateData: true` (docs/bluez.md behaviour 13), what a Connect to it does, and a GoPro's
/// connect time with and without a discovery running, with the advertisements lost meanwhile.
/// Nested in `RealStackTests` (one VM, one radio, its condition).
extension RealStackTests {
    @Suite struct Advertisers {
        static let bthome = "A4:C1:38:00:00:01"
        static let gopro = RealStackTests.gopro
        static let adapter: DBusObjectPath = "/org/bluez/hci0"
        static func path(_ address: String) -> DBusObjectPath {
            DBusObjectPath("/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_"))
        }

        /// One `PropertiesChanged(Device1)` of the BTHome sensor.
        struct Report: Sendable {
            var at: ContinuousClock.Instant
            var rssi: Bool
            var serviceData: [UInt8]?
            var other: [String]
        }

        final class Reports: Sendable {
            let all = Mutex<[Report]>([])
            func between(_ a: ContinuousClock.Instant, _ b: ContinuousClock.Instant) -> [Report] {
                all.withLock { $0.filter { $0.at >= a && $0.at <= b } }
            }
        }

        /// Waits until `condition` holds (checked every 50 ms) or `timeout`; whether it held.
        static func until(_ timeout: Duration, _ condition: () async -> Bool) async -> Bool {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if await condition() { return true }
                try? await Task.sleep(for: .milliseconds(50))
            }
            return await condition()
        }

        static func bool(_ c: DBusConnection, _ address: String, _ name: String) async -> Bool? {
            guard case let .boolean(b)? = try? await c.object("org.bluez", path(address)).property("org.bluez.Device1", name) else { return nil }
            return b
        }

        static func ms(_ d: Duration) -> Int64 { d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000 }

        /// Connect → ServicesResolved true; the time it took (and when Connect answered, in
        /// `linked`). Then Disconnect → Connected false.
        static func connectOnce(_ c: DBusConnection, _ address: String, linked: inout Duration) async throws -> Duration {
            let device = c.object("org.bluez", path(address))
            let started = ContinuousClock.now
            _ = try await device.call("org.bluez.Device1", "Connect", timeout: .seconds(60))
            linked = ContinuousClock.now - started
            let resolved = await until(.seconds(60)) { await bool(c, address, "ServicesResolved") == true }
            let took = ContinuousClock.now - started
            try #require(resolved, "\(address) never resolved its services")
            _ = try await device.call("org.bluez.Device1", "Disconnect", timeout: .seconds(30))
            _ = await until(.seconds(30)) { await bool(c, address, "Connected") == false }
            return took
        }

        @Test func bthomeServiceDataReachesBluetoothdAndConnectsBesideADiscovery() async throws {
            let stack = try RealStack(devices: ["bthome@\(Self.bthome)", "gopro@\(Self.gopro)"],
                                      modelOptions: ["--advertise-interval", "1", "--gopro-sleep-after", "0"])
            defer { stack.stop() }
            let c = try await DBusConnection.connect(.system, timeout: .seconds(10), loop: stack.loop)
            defer { c.close() }
            let reports = Reports()
            let stream = try await c.signals(matching: DBusMatchRule(
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: Self.path(Self.bthome),
                arguments: [0: "org.bluez.Device1"]))
            let reader = Task {
                do {
                    for try await m in stream {
                        guard let changed = try? m.decode(1, as: [String: DBusValue].self) else { continue }
                        let data = changed["ServiceData"]?.unwrapped.propertiesValue?.values.first?.bytesValue
                        let report = Report(at: .now, rssi: changed["RSSI"] != nil, serviceData: data,
                                            other: changed.keys.filter { $0 != "RSSI" && $0 != "ServiceData" }.sorted())
                        reports.all.withLock { $0.append(report) }
                    }
                } catch {}
            }
            defer { reader.cancel() }
            // Adapter1 Discovering changes (does a connect stop the discovery?).
            let discovering = Mutex<[(ContinuousClock.Instant, Bool)]>([])
            let adapterStream = try await c.signals(matching: DBusMatchRule(
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: Self.adapter,
                arguments: [0: "org.bluez.Adapter1"]))
            let adapterReader = Task {
                do {
                    for try await m in adapterStream {
                        guard let changed = try? m.decode(1, as: [String: DBusValue].self),
                              case let .boolean(on)? = changed["Discovering"]?.unwrapped else { continue }
                        discovering.withLock { $0.append((.now, on)) }
                    }
                } catch {}
            }
            defer { adapterReader.cancel() }
            let adapter = c.object("org.bluez", Self.adapter)
            _ = try await adapter.call("org.bluez.Adapter1", "SetDiscoveryFilter",
                                       [.properties(["Transport": .string("le"), "DuplicateData": .boolean(true)])])
            _ = try await adapter.call("org.bluez.Adapter1", "StartDiscovery")

            // The sensor's readings: three different packet ids within 20 s (one a second).
            let found = await Self.until(.seconds(30)) {
                Set(reports.all.withLock { $0.compactMap { $0.serviceData?.count ?? 0 > 2 ? $0.serviceData![2] : nil } }).count >= 3
            }
            #expect(found, "BTHome service data never changed; reports: \(reports.all.withLock { $0.count })")
            // What bluetoothd emits per advertisement (DuplicateData): 10 s of reports.
            let windowStart = ContinuousClock.now
            try await Task.sleep(for: .seconds(10))
            let window = reports.between(windowStart, .now)
            let withData = window.filter { $0.serviceData != nil }
            var repeats = 0
            for (a, b) in zip(withData, withData.dropFirst()) where a.serviceData == b.serviceData { repeats += 1 }
            RealStackFigures.record("passive BTHome: PropertiesChanged in 10 s", count: window.count)
            RealStackFigures.record("passive BTHome: of them with RSSI", count: window.filter(\.rssi).count)
            RealStackFigures.record("passive BTHome: of them with ServiceData", count: withData.count)
            RealStackFigures.record("passive BTHome: ServiceData equal to the previous one", count: repeats)
            print("real-stack figure: passive BTHome: other properties: \(Set(window.flatMap(\.other)).sorted())")
            #expect(window.count >= 5)

            // A Connect to the non-connectable sensor.
            let attempt = ContinuousClock.now
            var error = "none"
            do { _ = try await c.object("org.bluez", Self.path(Self.bthome)).call("org.bluez.Device1", "Connect", timeout: .seconds(90)) } catch let e {
                error = "\(e)"
            }
            RealStackFigures.record("Connect to the passive BTHome sensor, until it failed", ContinuousClock.now - attempt)
            print("real-stack figure: Connect to the passive BTHome sensor: \(error)")
            #expect(error != "none", "Connect to a non-connectable advertiser succeeded")

            // The GoPro: 3 connects with the discovery running (advertisements lost meanwhile),
            // then 3 without.
            let goproSeen = await Self.until(.seconds(30)) { await Self.bool(c, Self.gopro, "Connected") != nil }
            try #require(goproSeen, "GoPro never found")
            let rate = Double(window.count) / 10
            for round in 1...3 {
                let from = ContinuousClock.now
                var linked = Duration.zero
                let took = try await Self.connectOnce(c, Self.gopro, linked: &linked)
                let during = reports.between(from, from + took).map(\.at)
                let heard = during.count
                // The longest silence of the sensor from the Connect call to ServicesResolved.
                var gap = (length: Duration.zero, at: Duration.zero), last = from
                for t in during + [from + took] {
                    if t - last > gap.length { gap = (t - last, last - from) }
                    last = t
                }
                print("real-stack figure: Connect answered at +\(Self.ms(linked)) ms; longest silence of the sensor \(Self.ms(gap.length)) ms from +\(Self.ms(gap.at)) ms")
                RealStackFigures.record("GoPro connect with discovery running (\(round))", took)
                let flips = discovering.withLock { $0.filter { $0.0 >= from }.map { "\($0.1) at +\(($0.0 - from).components.seconds * 1000 + ($0.0 - from).components.attoseconds / 1_000_000_000_000_000) ms" } }
                print("real-stack figure: Discovering changes since that connect began: \(flips)")
                let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
                print("real-stack figure: BTHome reports during that connect: \(heard), expected at \(String(format: "%.1f", rate))/s: \(String(format: "%.0f", rate * seconds))")
                try await Task.sleep(for: .seconds(2))
            }
            _ = try await adapter.call("org.bluez.Adapter1", "StopDiscovery")
            for round in 1...3 {
                var linked = Duration.zero
                let took = try await Self.connectOnce(c, Self.gopro, linked: &linked)
                RealStackFigures.record("GoPro connect without discovery (\(round))", took)
                try await Task.sleep(for: .seconds(2))
            }
        }
    }
}
