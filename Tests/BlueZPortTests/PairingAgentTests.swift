import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import DBus
import TestSupport
import Testing

/// The pairing agent (issue 20 item 5; docs/bluez.md "Pairing agent"): the bridge's agent says
/// yes only for a device whose `Pair` from the bridge is in flight, answers everything else
/// `org.bluez.Error.Rejected`, and the bridge never asks for it to be the default agent — and
/// the emulator gives a `Pair`'s requests to the caller's agent and a pairing a device starts to
/// the default agent (on bluetoothd 5.66 the first agent registered is the default by itself).
@Suite(.serialized, .timeLimit(.minutes(1))) struct PairingAgentTests {
    static let gopro = BlueZCentralPairingTests.address
    /// A nearby device that starts a pairing with the host itself (a keyboard, say).
    static let intruder = "C0:FF:EE:00:00:66"

    static func intruderDevice() -> GenericDevice {
        GenericDevice(address: intruder, advertisement: SimulatedAdvertisement(name: "Keyboard", rssi: -60, uuids: ["1812"]),
                      services: [SimulatedService("180F", characteristics: [SimulatedCharacteristic("2A19", flags: ["read"], value: [90])])])
    }

    /// Calls a method of the agent at `/gatt2mqtt/agent` of `env.client` from another
    /// connection, as bluetoothd does; nil when it succeeded, else the D-Bus error name.
    func ask(_ env: Emulator, _ method: String, _ arguments: [DBusValue]) async -> String? {
        do {
            _ = try await env.simulatorConnection.call(destination: env.client.connection.uniqueName, path: "/gatt2mqtt/agent",
                                                       interface: "org.bluez.Agent1", method: method, arguments: arguments)
            return nil
        } catch {
            if case let .remote(name, _) = error { return name }
            return "\(error)"
        }
    }

    @Test func theBridgePairsThroughItsOwnAgentWithoutAskingToBeTheDefault() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [BlueZCentralPairingTests.encryptedDevice()]) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let link = try await central.connect(address: Self.gopro, notify: [BlueZCentralPairingTests.response], pair: true,
                                                 timeout: .seconds(5))
            #expect(link.pairedOnConnect)
            try await link.write([0x42], to: BlueZCentralPairingTests.command, withResponse: true)
            // Registered for its own pairings; never asked to be the default agent.
            let me = env.client.connection.uniqueName
            #expect(env.simulator.agent(of: me) == "/gatt2mqtt/agent")
            #expect(env.simulator.agentManagerCalls(from: me) == ["RegisterAgent"])
            #expect(!env.client.isPairing(env.simulator.devicePath(Self.gopro)))
            await link.disconnect()
        }
    }

    @Test func everyRequestForADeviceNotBeingPairedIsRejected() async throws {
        try await withEmulator(devices: [BlueZCentralPairingTests.encryptedDevice()]) { env in
            try await env.client.registerPairingAgent()
            let other = DBusValue.objectPath(env.simulator.devicePath(Self.intruder))
            let rejected = BlueZClient.agentRejected
            #expect(await ask(env, "RequestAuthorization", [other]) == rejected)
            #expect(await ask(env, "RequestConfirmation", [other, .uint32(123_456)]) == rejected)
            #expect(await ask(env, "AuthorizeService", [other, .string("00001124-0000-1000-8000-00805f9b34fb")]) == rejected)
            #expect(await ask(env, "RequestPasskey", [other]) == rejected)
            #expect(await ask(env, "RequestPinCode", [other]) == rejected)
            #expect(await ask(env, "DisplayPasskey", [other, .uint32(1), .uint16(0)]) == rejected)
            #expect(await ask(env, "DisplayPinCode", [other, .string("1234")]) == rejected)
            #expect(await ask(env, "Cancel", []) == nil)
        }
    }

    /// While the bridge's Pair of the camera is in flight, a nearby device starts a pairing of
    /// its own: it reaches the bridge's agent (the only agent, so the default one on 5.66), which
    /// refuses it; the camera's pairing goes through.
    @Test func aPairingAnotherDeviceStartsIsRefusedWhileTheBridgePairs() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [BlueZCentralPairingTests.encryptedDevice(), Self.intruderDevice()]) { env in
            try env.simulator.updateFaults(Self.gopro) { $0.replyDelay = .milliseconds(500) }
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let pairing = Task {
                try await central.connect(address: Self.gopro, notify: [BlueZCentralPairingTests.response], pair: true,
                                          timeout: .seconds(10))
            }
            let goproPath = env.simulator.devicePath(Self.gopro)
            #expect(await eventually { env.client.isPairing(goproPath) })
            #expect(env.simulator.defaultAgent == BlueZSimulator.Agent(owner: env.client.connection.uniqueName, path: "/gatt2mqtt/agent"))
            #expect(try await env.simulator.incomingPairing(Self.intruder) == .rejected("org.bluez.Error.Rejected"))
            #expect(env.client.isPairing(goproPath))
            let link = try await pairing.value
            #expect(link.pairedOnConnect)
            let intruder = try await env.client.waitForDevice(Self.intruder, timeout: .seconds(30))
            #expect(!env.client.isPaired(intruder))
            await link.disconnect()
        }
    }

    /// The emulator's model of bluetoothd 5.66: a Pair's requests go to the caller's agent; a
    /// caller with none gets the default agent; a pairing a device starts goes to the default
    /// agent only, and a yes pairs it.
    @Test func emulatorGivesAPairToTheCallersAgentAndAnIncomingPairingToTheDefault() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [BlueZCentralPairingTests.encryptedDevice(), Self.intruderDevice()]) { env in
            // No agent at all: a pairing a device starts is refused without asking anyone.
            #expect(try await env.simulator.incomingPairing(Self.intruder) == .noAgent)
            // Another client's agent, the first registered, is the default by itself, and says no
            // to what it does not pair itself.
            let other = try await BlueZClient.connect(.address(env.bus.address), callTimeout: .seconds(5), loop: env.loop)
            defer { other.close() }
            try await other.registerPairingAgent()
            #expect(env.simulator.defaultAgent == BlueZSimulator.Agent(owner: other.connection.uniqueName, path: "/gatt2mqtt/agent"))
            let gopro = try await discover(env, Self.gopro)
            // This client has no agent: the default one is asked, and refuses.
            await #expect(throws: BlueZError.self) { try await env.client.pair(gopro) }
            #expect(!env.client.isPaired(gopro))
            // With its own agent (queued behind the default), its own agent is asked, and says yes.
            try await env.client.registerPairingAgent()
            #expect(env.simulator.defaultAgent?.owner == other.connection.uniqueName)
            try await env.client.pair(gopro)
            #expect(await eventually { env.client.isPaired(gopro) })
            // A pairing the other device starts goes to the default agent only.
            #expect(try await env.simulator.incomingPairing(Self.intruder) == .rejected("org.bluez.Error.Rejected"))
            // An agent that says yes to everything (what the bridge had) lets it pair.
            let open = try await BlueZClient.connect(.address(env.bus.address), callTimeout: .seconds(5), loop: env.loop)
            defer { open.close() }
            let yes: @Sendable (DBusMethodCall) async throws -> [DBusValue] = { _ in [] }
            try open.connection.export("/open/agent", interfaces: [DBusInterface("org.bluez.Agent1", methods: [
                DBusMethod("RequestAuthorization", in: [DBusArgument("device", .objectPath)], handler: yes),
            ])])
            try await open.registerAgent(path: "/open/agent")
            try await open.call("/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent", [.objectPath("/open/agent")])
            #expect(try await env.simulator.incomingPairing(Self.intruder) == .accepted)
            let intruder = try await env.client.waitForDevice(Self.intruder, timeout: .seconds(30))
            #expect(await eventually { env.client.isPaired(intruder) })
            // Over D-Bus too (gatt2mqtt simulate).
            let outcome = try await tool("/usr/bin/gdbus", ["call", "--address", env.bus.address, "--dest", "org.bluez",
                                                            "--object-path", "/org/gatt2mqtt/Simulator",
                                                            "--method", "org.gatt2mqtt.Simulator1.IncomingPairing", Self.intruder])
            #expect(outcome.contains("accepted"))
        }
    }
}
