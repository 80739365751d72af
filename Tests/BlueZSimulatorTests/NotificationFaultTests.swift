import BlueZ
import BlueZSimulator
import DBus
import DeviceSimulators
import GoProCodec
import Synchronization
import TestSupport
import Testing

/// The `DropNotification` / `DuplicateNotification` faults, through both notification paths,
/// and what the GoPro assembler makes of a lost or repeated packet (spec gopro.md §3).
@Suite(.serialized, .timeLimit(.minutes(1))) struct NotificationFaultTests {
    @Test(arguments: [NotifyMethod.acquireNotify, .startNotify])
    func dropAndDuplicateTheNthValue(method: NotifyMethod) async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let stream = try await env.client.notifications(try env.client.characteristic(echoNotify, on: device), using: method)
            try env.simulator.updateFaults(echoAddress) { $0.dropNotification = 2 }
            for v: UInt8 in 1...3 { #expect(device0.notify(echoNotify, [v])) }
            // Counting starts again when faults are set: the 1st value is doubled.
            try env.simulator.updateFaults(echoAddress) {
                $0.dropNotification = nil
                $0.duplicateNotification = 1
            }
            for v: UInt8 in 4...5 { #expect(device0.notify(echoNotify, [v])) }
            #expect(await collect(stream, count: 5) == [[1], [3], [4], [4], [5]])
        }
    }

    @Test func faultsOverTheControlInterface() async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let stream = try await env.client.notifications(try env.client.characteristic(echoNotify, on: device))
            _ = try await env.client.connection.call(
                destination: "org.bluez", path: BlueZSimulator.controlPath, interface: "org.gatt2mqtt.Simulator1",
                method: "SetFaults", arguments: [.string(echoAddress),
                                                 .properties(["DropNotification": .uint32(1), "DuplicateNotification": .uint32(2)])])
            for v: UInt8 in 1...3 { #expect(device0.notify(echoNotify, [v])) }
            #expect(await collect(stream, count: 3) == [[2], [2], [3]])
            await #expect(throws: DBusError.self) {
                _ = try await env.client.connection.call(
                    destination: "org.bluez", path: BlueZSimulator.controlPath, interface: "org.gatt2mqtt.Simulator1",
                    method: "SetFaults", arguments: [.string(echoAddress), .properties(["DropNotification": .string("2")])])
            }
        }
    }

    /// What one status query (0x13) gave: decoded messages and assembler errors.
    struct Outcome {
        var messages: [[UInt8]] = []
        var errors: [GoProError] = []
    }

    @Test(arguments: [NotifyMethod.automatic, .startNotify])
    func goProStatusResponseWithALostOrRepeatedPacket(method: NotifyMethod) async throws {
        let camera = SimulatedGoPro(address: "C0:FF:EE:00:00:0A", encrypted: false)  // pairing is covered elsewhere
        // An 89-byte answer (statuses 8, 10, 13, 20…29, 70, 96, 113, 114, asked for by id) is 5 packets: extended-13 start (18 bytes) + 4 continuations 0x80…0x83 (19 each).
        for id: UInt8 in 20...29 { camera.setStatus(id, [id, 0, 0, 1]) }
        try await withEmulator(devices: [camera]) { env in
            let device = try await discover(env, camera.address)
            try await env.client.connect(device)
            let query = try env.client.characteristic("GP-0076", on: device)
            let response = try env.client.characteristic("GP-0077", on: device)
            let stream = try await env.client.notifications(response, using: method)
            let packets = Collected<[UInt8]>()
            let reader = Task { for await p in stream { packets.items.withLock { $0.append(p) } } }
            defer { reader.cancel() }
            var assembler = GoProAssembler()
            var consumed = 0

            /// The test's own value after each answer (never fed to the assembler).
            let marker: [UInt8] = [0xFF, 0xEE]
            /// Sends the query and feeds the `expected` packets that arrive to the assembler.
            func ask(expecting expected: Int) async throws -> Outcome {
                // The camera sends its whole answer while handling the write, before the write
                // is answered; a marker notified afterwards on the same characteristic arrives
                // after every packet of it (one path, in order). Waiting for the marker, not
                // for a while, is how the test knows that nothing more than expected arrives.
                try await env.client.write([0x12, 0x13, 8, 10, 13] + Array(20...29) + [70, 96, 113, 114], to: query)
                #expect(env.simulator.notify(camera.address, characteristic: GoProCharacteristic.queryResponse.uuid, marker))
                #expect(await eventually { packets.items.withLock { $0[consumed...].contains(marker) } })
                let items = packets.items.withLock { $0 }
                let upTo = items[consumed...].firstIndex(of: marker) ?? items.endIndex
                let new = Array(items[consumed..<upTo])
                consumed = min(upTo + 1, items.endIndex)
                #expect(new.count == expected)
                var out = Outcome()
                for p in new {
                    do {
                        if let m = try assembler.append(p) { out.messages.append(m) }
                    } catch {
                        out.errors.append(error)
                    }
                }
                return out
            }
            func decodes(_ o: Outcome) -> Bool {
                guard o.errors.isEmpty, o.messages.count == 1,
                      case let .query(q)? = try? GoProResponse(decoding: o.messages[0], on: .queryResponse) else { return false }
                return q.queryID == 0x13 && q.status == 0 && q.entries.count == 17
            }

            let clean = try await ask(expecting: 5)
            #expect(decodes(clean))
            #expect(assembler.senderIsCounting)

            // The first continuation (2nd value) is lost: gap, the rest are strays, no message.
            try env.simulator.updateFaults(camera.address) { $0.dropNotification = 2 }
            let lost = try await ask(expecting: 4)
            #expect(lost.messages.isEmpty)
            #expect(lost.errors.first == .continuationGap(expected: 0, received: 1))
            #expect(lost.errors.dropFirst().allSatisfy { if case .strayContinuation = $0 { true } else { false } })
            #expect(decodes(try await ask(expecting: 5)))  // resynchronised on the next start packet

            // The first continuation is sent twice: caught by the counter (the camera counts).
            try env.simulator.updateFaults(camera.address) {
                $0.dropNotification = nil
                $0.duplicateNotification = 2
            }
            let doubled = try await ask(expecting: 6)
            #expect(doubled.messages.isEmpty)
            #expect(doubled.errors.first == .continuationDuplicate(counter: 0))
            #expect(decodes(try await ask(expecting: 5)))

            // A later continuation twice (0x81 after 0x81).
            try env.simulator.updateFaults(camera.address) { $0.duplicateNotification = 3 }
            let later = try await ask(expecting: 6)
            #expect(later.messages.isEmpty)
            #expect(later.errors.first == .continuationDuplicate(counter: 1))
            #expect(decodes(try await ask(expecting: 5)))
        }
    }
}
