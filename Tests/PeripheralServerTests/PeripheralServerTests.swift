#if canImport(Glibc)
import Glibc
#endif
import BinaryCoding
import BlueZSimulator
import DeviceSimulators
import Foundation
import GoProCodec
import PeripheralServer
import Reactor
import TestSupport
import Testing

/// A front-end's end of the server's socket: lines out, lines in with a deadline.
final class LineClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        guard connectUnix(fd, path: path) else {
            close(fd)
            throw TestFailure("connect \(path): errno \(errno)")
        }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array((text + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            offset += n
        }
    }

    func sendRaw(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The next line as JSON, or nil at EOF or after `timeout`.
    func next(timeout: Duration = .seconds(5)) -> JSONObject? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                return (try? JSONValue(parsing: line))?.objectValue
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000) + 1
            guard poll(&p, 1, ms) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return nil }
            buffer += chunk[0..<n]
        }
    }

    /// Lines until one with `op` (others, e.g. notifications, are returned alongside).
    func next(op: String, timeout: Duration = .seconds(5)) -> (JSONObject?, [JSONObject]) {
        var skipped: [JSONObject] = []
        let deadline = ContinuousClock.now + timeout
        while let line = next(timeout: deadline - ContinuousClock.now) {
            if line["op"]?.stringValue == op { return (line, skipped) }
            skipped.append(line)
        }
        return (nil, skipped)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A server on a fresh socket path with a GoPro, Rokid glasses, a heart-rate sensor and a thermometer.
final class ServerFixture {
    let loop = EventLoop(name: "peripherals-test")
    let directory: String
    let path: String
    let server: PeripheralServer
    let peripherals: [SimulatedPeripheral]

    init() throws {
        var template = Array("/tmp/g2m-periph-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp") }
        directory = String(cString: made)
        path = directory + "/models.sock"
        let timings = SimulatedDeviceTimings(goproSleepAfter: nil, goproBatteryDrain: nil, rokidBatteryInterval: nil,
                                             heartRateInterval: nil, thermoInterval: nil)
        peripherals = [
            SimulatedPeripheral(SimulatedDeviceSpec(kind: .gopro, address: "C0:FF:EE:00:00:01"), timings: timings, executor: loop),
            SimulatedPeripheral(SimulatedDeviceSpec(kind: .rokid, address: "C0:FF:EE:00:00:02"), timings: timings, executor: loop),
            SimulatedPeripheral(SimulatedDeviceSpec(kind: .hr, address: "C0:FF:EE:00:00:03"), timings: timings, executor: loop),
            SimulatedPeripheral(SimulatedDeviceSpec(kind: .thermo, address: "C0:FF:EE:00:00:04"), timings: timings, executor: loop),
        ]
        server = try PeripheralServer(peripherals: peripherals, socketPath: path, loop: loop)
        try server.start()
    }

    func stop() async {
        await server.stop()
        loop.shutdown()
        rmdir(directory)
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct PeripheralServerTests {
    static let gp72 = GoProCharacteristic.command.uuid
    static let gp73 = GoProCharacteristic.commandResponse.uuid

    @Test func helloDescribesEveryModel() async throws {
        let f = try ServerFixture()
        let client = try LineClient(path: f.path)
        client.send(#"{"op":"hello","id":1}"#)
        let answer = try #require(client.next())
        #expect(answer["op"] == "devices")
        #expect(answer["id"] == 1)
        let devices = try #require(answer["devices"]?.arrayValue)
        #expect(devices.compactMap { $0["address"]?.stringValue }
            == ["C0:FF:EE:00:00:01", "C0:FF:EE:00:00:02", "C0:FF:EE:00:00:03", "C0:FF:EE:00:00:04"])
        #expect(devices.compactMap { $0["kind"]?.stringValue } == ["gopro", "rokid", "hr", "thermo"])
        let gopro = devices[0]
        #expect(gopro["mtu"] == 23)
        #expect(gopro["advertisement"]?["name"] == "GoPro 1234")
        #expect(gopro["advertisement"]?["uuids"] == ["0000fea6-0000-1000-8000-00805f9b34fb"])
        // Schema 2, awake, model 62, command and control, ID hash, media offload (gopro.md §10).
        #expect(gopro["advertisement"]?["manufacturer_data"] == ["754": "02013e0100c0ffee00000100"])
        // AP MAC (4 bytes) and the last 4 serial digits, "1234".
        #expect(gopro["advertisement"]?["service_data"] == ["0000fea6-0000-1000-8000-00805f9b34fb": "ee00000131323334"])
        let command = gopro["services"]?.arrayValue?.first?["characteristics"]?.arrayValue?.first
        #expect(command?["uuid"]?.stringValue == Self.gp72)
        #expect(command?["flags"] == ["write", "encrypt-write"])
        let hr = devices[2]
        #expect(hr["advertisement"]?["service_data"] == ["0000180f-0000-1000-8000-00805f9b34fb": "55"])
        let battery = hr["services"]?.arrayValue?.first?["characteristics"]?.arrayValue?.first
        #expect(battery?["value"] == "55")
        let thermo = devices[3]
        #expect(thermo["advertisement"]?["name"] == "Thermometer")
        #expect(thermo["advertisement"]?["uuids"] == ["0000181a-0000-1000-8000-00805f9b34fb"])
        let ess = thermo["services"]?.arrayValue?.first
        #expect(ess?["uuid"] == "0000181a-0000-1000-8000-00805f9b34fb")
        // 21.50 °C (0x0866) and 45.00 % (0x1194), little-endian.
        #expect(ess?["characteristics"]?.arrayValue?.compactMap { $0["value"]?.stringValue } == ["6608", "9411"])
        #expect(ess?["characteristics"]?.arrayValue?.first?["flags"] == ["read", "notify"])
        await f.stop()
    }

    @Test func thermometerAnswersReadsWithItsReadingAndNotifiesSteps() async throws {
        let f = try ServerFixture()
        let client = try LineClient(path: f.path)
        guard case let .thermometer(sensor) = f.peripherals[3] else { throw TestFailure("not a thermometer") }
        client.send(#"{"op":"link","id":1,"address":"C0:FF:EE:00:00:04","up":true}"#)
        #expect(client.next() == ["op": "result", "id": 1])
        client.send(#"{"op":"subscribe","id":2,"address":"C0:FF:EE:00:00:04","uuid":"2A6E","on":true}"#)
        #expect(client.next() == ["op": "result", "id": 2])
        // One reading: 21.55 °C is notified (subscribed); the humidity changes too, but nobody subscribed it.
        sensor.step()
        #expect(client.next() == ["op": "notify", "address": "C0:FF:EE:00:00:04",
                                  "uuid": "00002a6e-0000-1000-8000-00805f9b34fb", "value": "6b08"])
        client.send(#"{"op":"read","id":3,"address":"C0:FF:EE:00:00:04","uuid":"2A6F"}"#)
        #expect(client.next() == ["op": "result", "id": 3, "value": "ad11"])  // 45.25 %
        client.send(#"{"op":"read","id":4,"address":"C0:FF:EE:00:00:04","uuid":"2A19"}"#)
        #expect(client.next() == ["op": "result", "id": 4, "value": "5c"])  // 92 %
        client.send(#"{"op":"write","id":5,"address":"C0:FF:EE:00:00:04","uuid":"2A6E","value":"0000"}"#)
        #expect(client.next() == ["op": "result", "id": 5, "att_error": 3])
        await f.stop()
    }

    @Test func goProCommandIsAnsweredWithANotificationOnceSubscribed() async throws {
        let f = try ServerFixture()
        let client = try LineClient(path: f.path)
        client.send(#"{"op":"link","id":1,"address":"C0:FF:EE:00:00:01","up":true}"#)
        #expect(client.next()?["op"] == "result")
        // Get Hardware Info (0x3C) in one general packet; not subscribed yet: no notification.
        client.send(#"{"op":"write","id":2,"address":"c0:ff:ee:00:00:01","uuid":"\#(Self.gp72)","value":"013c","response":true}"#)
        let unsubscribed = client.next(op: "result")
        #expect(unsubscribed.0?["id"] == 2)
        #expect(unsubscribed.0?["att_error"] == nil)
        #expect(unsubscribed.1.isEmpty)

        client.send(#"{"op":"subscribe","id":3,"address":"C0:FF:EE:00:00:01","uuid":"\#(Self.gp73)","on":true}"#)
        #expect(client.next()?["id"] == 3)
        client.send(#"{"op":"write","id":4,"address":"C0:FF:EE:00:00:01","uuid":"\#(Self.gp72)","value":"013c"}"#)
        // The model answers inside the write: the notifications (the answer's packets) come
        // before the result.
        let (result, notified) = client.next(op: "result")
        #expect(result == ["op": "result", "id": 4])
        #expect(notified.count == 5 && notified.allSatisfy { $0["op"] == "notify" && $0["uuid"] == .string(Self.gp73) })
        var assembler = GoProAssembler()
        let message = try notified.compactMap { try assembler.append(Hex.decode($0["value"]?.stringValue ?? "")) }.first
        let answer = try GoProResponse(decoding: try #require(message), on: .commandResponse).json
        #expect(answer["name"] == "get_hardware_info" && answer["status"] == 0 && answer["model_name"] == "HERO12 Black")
        guard case let .gopro(camera) = f.peripherals[0] else { throw TestFailure("not a GoPro") }
        #expect(camera.receivedMessages == [[0x3C], [0x3C]])
        await f.stop()
    }

    @Test func readsWritesErrorsAndLinkRules() async throws {
        let f = try ServerFixture()
        let client = try LineClient(path: f.path)
        // No link yet: an error with the id.
        client.send(#"{"op":"read","id":1,"address":"C0:FF:EE:00:00:03","uuid":"2A19"}"#)
        #expect(client.next() == ["op": "error", "id": 1, "message": "C0:FF:EE:00:00:03 has no link"])
        client.send(#"{"op":"link","address":"C0:FF:EE:00:00:03","up":true}"#)  // no id: no answer
        client.send(#"{"op":"read","id":2,"address":"C0:FF:EE:00:00:03","uuid":"2A19"}"#)
        #expect(client.next() == ["op": "result", "id": 2, "value": "55"])
        // The control point refuses anything but 01 with 0x80 (HRS).
        client.send(#"{"op":"write","id":3,"address":"C0:FF:EE:00:00:03","uuid":"2a39","value":"02"}"#)
        #expect(client.next() == ["op": "result", "id": 3, "att_error": 0x80])
        // Not readable: ATT 0x02; a command to a characteristic without write-without-response is dropped.
        client.send(#"{"op":"read","id":4,"address":"C0:FF:EE:00:00:03","uuid":"2A37"}"#)
        #expect(client.next() == ["op": "result", "id": 4, "att_error": 2])
        client.send(#"{"op":"write","id":5,"address":"C0:FF:EE:00:00:03","uuid":"2A39","value":"01","response":false}"#)
        #expect(client.next() == ["op": "result", "id": 5, "dropped": true])
        // The heartbeat of a sensor goes out only while subscribed, and becomes the current value.
        guard case let .heartRate(sensor) = f.peripherals[2] else { throw TestFailure("not a sensor") }
        #expect(sensor.notify("2A37", [0x00, 70]) == false)
        client.send(#"{"op":"subscribe","address":"C0:FF:EE:00:00:03","uuid":"2A37","on":true}"#)
        client.send(#"{"op":"hello","id":6}"#)  // a barrier: the subscription is in once this is answered
        #expect(client.next()?["id"] == 6)
        #expect(sensor.notify("2A37", [0x00, 71]) == true)
        #expect(client.next()?["value"] == "0047")
        client.send(#"{"op":"link","id":7,"address":"C0:FF:EE:00:00:03","up":false}"#)
        #expect(client.next() == ["op": "result", "id": 7])
        #expect(sensor.isLinked == false)
        await f.stop()
    }

    @Test func malformedInputGetsAnErrorAndTheServerKeepsAnswering() async throws {
        let f = try ServerFixture()
        let client = try LineClient(path: f.path)
        client.send("this is not json")
        let error = try #require(client.next())
        #expect(error["op"] == "error")
        #expect(error["message"]?.stringValue?.hasPrefix("invalid JSON at byte 0") == true)
        client.send(#"[1,2]"#)
        #expect(client.next() == ["op": "error", "message": "a request is a JSON object"])
        client.send(#"{"op":"fly","id":9}"#)
        #expect(client.next() == ["op": "error", "id": 9, "message": #"unknown op "fly""#])
        client.send(#"{"op":"write","id":10,"address":"C0:FF:EE:00:00:09","uuid":"2A39","value":"01"}"#)
        #expect(client.next() == ["op": "error", "id": 10, "message": "no device C0:FF:EE:00:00:09"])
        client.send(#"{"op":"link","id":11,"address":"C0:FF:EE:00:00:03","up":true}"#)
        #expect(client.next()?["op"] == "result")
        client.send(#"{"op":"write","id":12,"address":"C0:FF:EE:00:00:03","uuid":"2A39","value":"0x0g"}"#)
        #expect(client.next()?["message"]?.stringValue?.hasPrefix("value: invalid hex") == true)
        // A line over the limit is skipped whole, in pieces.
        client.sendRaw(Array(repeating: UInt8(ascii: "x"), count: PeripheralServer.maxLineLength + 10))
        client.send("")
        #expect(client.next() == ["op": "error", "message": .string("line longer than \(PeripheralServer.maxLineLength) bytes")])
        client.send(#"{"op":"hello"}"#)
        #expect(client.next()?["op"] == "devices")
        await f.stop()
    }

    @Test func oneFrontEndAtATimeAndLinksGoDownWhenItLeaves() async throws {
        let f = try ServerFixture()
        var first: LineClient? = try LineClient(path: f.path)
        first?.send(#"{"op":"link","id":1,"address":"C0:FF:EE:00:00:03","up":true}"#)
        #expect(first?.next()?["op"] == "result")
        let second = try LineClient(path: f.path)
        #expect(second.next() == ["op": "error", "message": "busy: another front-end is connected"])
        #expect(second.next() == nil)  // closed
        guard case let .heartRate(sensor) = f.peripherals[2] else { throw TestFailure("not a sensor") }
        #expect(sensor.isLinked)
        first = nil
        // The server notices the closed socket on its loop; nothing announces it but the state.
        #expect(await eventually { !sensor.isLinked && !f.server.hasClient })
        let third = try LineClient(path: f.path)
        third.send(#"{"op":"hello"}"#)
        #expect(third.next()?["op"] == "devices")
        await f.stop()
        #expect(access(f.path, F_OK) != 0)
    }
}
