#if canImport(Glibc)
import Glibc
#endif
import BinaryCoding
import BlueZSimulator
import DeviceSimulators
import PeripheralServer
import Reactor
import TestSupport
import Testing

/// A passive advertiser served to the radio front-end: described as not connectable, and each
/// new reading pushed as an `advertise` line (docs/bluez.md "The radio front-end protocol").
@Suite(.serialized, .timeLimit(.minutes(1))) struct PeripheralServerAdvertiserTests {
    @Test func advertiserIsNotConnectableAndPushesEachNewAdvertisement() async throws {
        let loop = EventLoop(name: "peripherals-adv-test")
        defer { loop.shutdown() }
        let dir = try TemporaryDirectory()
        let path = dir.path + "/models.sock"
        let peripherals = [SimulatedPeripheral(SimulatedDeviceSpec(kind: .bthome, address: "A4:C1:38:00:00:01"), executor: loop),
                           SimulatedPeripheral(SimulatedDeviceSpec(kind: .hr, address: "C0:FF:EE:00:00:03"), executor: loop)]
        let server = try PeripheralServer(peripherals: peripherals, socketPath: path, loop: loop)
        try server.start()
        let client = try LineClient(path: path)
        client.send(#"{"op":"hello","id":1}"#)
        let devices = try #require(client.next()?["devices"]?.arrayValue)
        #expect(devices.map { $0["connectable"] } == [false, true])
        #expect(devices[0]["kind"] == "bthome")
        #expect(devices[0]["services"] == [])
        // 40 00 00: BTHome v2, packet id 0, then battery 92 %, 21.50 °C, 45.00 %.
        #expect(devices[0]["advertisement"]?["service_data"] == ["0000fcd2-0000-1000-8000-00805f9b34fb": "400000015c026608039411"])
        guard case let .advertiser(_, sensor) = peripherals[0] else { throw TestFailure("not an advertiser") }
        let task = Task(executorPreference: loop) {
            await SimulatedPeripheral.advertising(peripherals, every: .milliseconds(20)) { server.advertisementChanged($0.address) }
        }
        defer { task.cancel() }
        let (pushed, _) = client.next(op: "advertise")
        #expect(pushed?["address"] == "A4:C1:38:00:00:01")
        let data = try #require(pushed?["advertisement"]?["service_data"]?["0000fcd2-0000-1000-8000-00805f9b34fb"]?.stringValue)
        #expect(data.hasPrefix("400001") || sensor.frame.counter > 1, "\(data)")  // packet id 1 (or later, if it stepped again)
        #expect(data != "400000015c026608039411")
        #expect(!server.advertisementChanged("C0:FF:EE:00:00:99"))
        await server.stop()
    }
}
