import Foundation
import TestSupport
import Testing

/// `gatt2mqtt simulate` (private bus + emulated BlueZ) driven by `gatt2mqtt scan` and `gatt`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BluetoothCLITests {
    /// Starts `gatt2mqtt simulate`, returns its process and bus address; stop it by pid.
    static func simulate(_ extra: [String] = []) async throws -> (Process, String) {
        try await offThePool { try startSimulator(extra) }
    }

    /// Blocks until the simulator printed its bus address (or 10 s).
    private static func startSimulator(_ extra: [String]) throws -> (Process, String) {
        let p = Process()
        p.executableURL = CLI.executable
        p.arguments = ["simulate", "--seconds", "40", "--heart-rate-interval", "0.2"] + extra
        var env = ProcessInfo.processInfo.environment
        env["SWIFT_BACKTRACE"] = "enable=no"
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        var text = ""
        let deadline = Date().addingTimeInterval(10)
        while !text.contains("\n"), Date() < deadline {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        let prefix = "DBUS_SYSTEM_BUS_ADDRESS="
        guard let line = text.split(separator: "\n").first, line.hasPrefix(prefix) else {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            throw CLIError("simulate printed \(text)")
        }
        return (p, String(line.dropFirst(prefix.count)))
    }

    struct CLIError: Error { let text: String; init(_ t: String) { text = t } }

    @Test func scanReadWriteNotifyAgainstTheSimulator() async throws {
        let (sim, bus) = try await Self.simulate()
        defer {
            reap(sim)
        }
        let table = try await CLI.run(["scan", "--bus", bus, "--seconds", "0.5"])
        #expect(table.status == 0)
        #expect(table.stdout.hasPrefix("C0:FF:EE:00:00:01  -55 dBm  Sim HR  "))
        let scan = try await CLI.run(["scan", "--bus", bus, "--seconds", "0.5", "--uuid", "180D", "--json"])
        #expect(scan.status == 0)
        #expect(scan.stdout.contains(#""address":"C0:FF:EE:00:00:01","name":"Sim HR","rssi":-55"#))
        #expect(scan.stdout.contains(#""manufacturer_data":{"65535":"0102"}"#))

        let read = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--read", "2A19"])
        #expect(read.status == 0)
        #expect(read.stdout == "55\n")

        let write = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--write", "2A39", "01"])
        #expect(write.stdout == "ok\n")
        let refused = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--write", "2A39", "02"])
        #expect(refused.status == 1)
        #expect(refused.stderr == "error: C0:FF:EE:00:00:01 2A39: att_error: ATT error 0x80\n")

        let notify = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--listen", "2A37", "--seconds", "1"])
        #expect(notify.status == 0)
        let lines = notify.stdout.split(separator: "\n")
        #expect(lines.count >= 2)
        // `08 bpm kJ kJ`: a measurement with the energy expended (the simulated sensor's heartbeats).
        #expect(lines.allSatisfy { $0.count == 8 && $0.hasPrefix("08") })

        // Combined: subscribe first, then write the control point (which makes the sensor notify),
        // then list the services.
        let combined = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--listen", "2A37",
                                    "--write", "2A39", "01", "--services", "--seconds", "1"])
        #expect(combined.status == 0)
        let out = combined.stdout.split(separator: "\n").map(String.init)
        #expect(out.first == "ok")
        #expect(out.contains { $0.hasPrefix("service 0000180d-0000-1000-8000-00805f9b34fb") })
        #expect(out.contains { $0.hasPrefix("  characteristic 00002a37-0000-1000-8000-00805f9b34fb [") && $0.contains("notify") })
        #expect(out.contains("08000000"), "the control point's notification")

        let missing = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--read", "2A99"])
        #expect(missing.status == 1)
        #expect(missing.stderr.hasPrefix("error: C0:FF:EE:00:00:01 2A99: not_found"))
    }

    /// The emulator and its devices on their event-loop thread serve the tools (docs/bluez.md
    /// "On an event loop"): heart beats alongside a control-point answer, a GoPro's
    /// AcquireNotify answer; SIGTERM ends it cleanly.
    @Test func eventLoopServesTheTools() async throws {
        let (sim, bus) = try await Self.simulate(["--device", "hr@C0:FF:EE:00:00:01",
                                            "--device", "gopro@C0:FF:EE:00:00:05"])
        defer {
            if sim.isRunning { reap(sim, SIGKILL) }
        }
        let read = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--read", "2A19"])
        #expect(read.status == 0)
        #expect(read.stdout == "55\n")
        let refused = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--write", "2A39", "02"])
        #expect(refused.stderr == "error: C0:FF:EE:00:00:01 2A39: att_error: ATT error 0x80\n")
        // Heart beats come from a task on the loop; the control point's answer from the device.
        let combined = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--listen", "2A37",
                                    "--write", "2A39", "01", "--seconds", "1"])
        #expect(combined.status == 0)
        let lines = combined.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "ok")
        #expect(lines.contains("08000000"))
        #expect(lines.filter { $0.count == 8 && $0.hasPrefix("08") && $0 != "08000000" }.count >= 2)
        // The GoPro: pair, subscribe to GP-0075 (AcquireNotify), keep-alive on GP-0074 → `02 5B 00`.
        let gopro = try await CLI.run(["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:05", "--pair", "--listen", "GP-0075",
                                 "--write", "GP-0074", "035B0142", "--seconds", "1"])
        #expect(gopro.status == 0)
        #expect(gopro.stdout.split(separator: "\n").map(String.init) == ["ok", "025b00"])
        kill(sim.processIdentifier, SIGTERM)
        #expect(await sim.exited() == 0)
    }

    @Test func faultFlags() async throws {
        let hr = "C0:FF:EE:00:00:01"
        do {
            let (sim, bus) = try await Self.simulate(["--fault", "\(hr):refuse-connections=true"])
            defer {
                reap(sim)
            }
            let read = try await CLI.run(["gatt", "--bus", bus, "--device", hr, "--read", "2A19"])
            #expect(read.status == 1)
            #expect(read.stderr.contains("connection_failed"), "\(read.stderr)")
        }
        do {
            // The first notification that reaches a subscriber is sent twice.
            let (sim, bus) = try await Self.simulate(["--fault", "\(hr):duplicate-notification=1", "--fault", "\(hr):reply-delay-ms=0"])
            defer {
                reap(sim)
            }
            let notify = try await CLI.run(["gatt", "--bus", bus, "--device", hr, "--listen", "2A37", "--seconds", "1"])
            #expect(notify.status == 0)
            let lines = notify.stdout.split(separator: "\n")
            #expect(lines.count >= 3)
            if lines.count >= 3 {
                #expect(lines[0] == lines[1])
                #expect(lines[1] != lines[2])
            }
        }
        do {
            let (sim, bus) = try await Self.simulate(["--adapter-off"])
            defer {
                reap(sim)
            }
            let scan = try await CLI.run(["scan", "--bus", bus, "--seconds", "0.5"])
            #expect(scan.status == 1)
            #expect(scan.stderr.contains("not_ready"), "\(scan.stderr)")
        }
        let unknown = try await CLI.run(["simulate", "--seconds", "1", "--fault", "\(hr):explode=1"])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("unknown fault \"explode\""), "\(unknown.stderr)")
        let badValue = try await CLI.run(["simulate", "--seconds", "1", "--fault", "\(hr):silent=maybe"])
        #expect(badValue.status != 0)
        #expect(badValue.stderr.contains("expected true or false"))
        let noDevice = try await CLI.run(["simulate", "--seconds", "1", "--fault", "C0:FF:EE:00:00:09:silent=true"])
        #expect(noDevice.status != 0)
        #expect(noDevice.stderr.contains("no simulated device C0:FF:EE:00:00:09"))
        let malformed = try await CLI.run(["simulate", "--seconds", "1", "--fault", "silent=true"])
        #expect(malformed.status != 0)
        #expect(malformed.stderr.contains("expected ADDRESS:NAME=VALUE"))
        let badAuth = try await CLI.run(["simulate", "--seconds", "1", "--rokid-auth", "maybe"])
        #expect(badAuth.status != 0)
        #expect(badAuth.stderr.contains("--rokid-auth maybe: expected refuse, silent, ok, taken"), "\(badAuth.stderr)")
    }

    /// `--rssi ADDRESS=DBM`: the RSSI this emulated adapter receives a device at; bad values named.
    @Test func rssiFlag() async throws {
        let hr = "C0:FF:EE:00:00:01"
        do {
            let (sim, bus) = try await Self.simulate(["--rssi", "c0:ff:ee:00:00:01=-75", "--advertising-interval", "0"])
            defer {
                reap(sim)
            }
            let scan = try await CLI.run(["scan", "--bus", bus, "--seconds", "0.5", "--json"])
            #expect(scan.status == 0)
            #expect(scan.stdout.contains(#""address":"C0:FF:EE:00:00:01","name":"Sim HR","rssi":-75"#), "\(scan.stdout)")
        }
        for (value, message) in [("\(hr)=-128", "--rssi \(hr)=-128: '-128' is not an RSSI: an integer in -127...20 (dBm)"),
                                 ("\(hr)=loud", "--rssi \(hr)=loud: 'loud' is not an RSSI: an integer in -127...20 (dBm)"),
                                 ("C0:FF:EE:00:01=-70", "--rssi C0:FF:EE:00:01=-70: 'C0:FF:EE:00:01' is not an address like C0:FF:EE:00:00:01"),
                                 ("\(hr)", "--rssi \(hr): expected ADDRESS=DBM, e.g. C0:FF:EE:00:00:01=-75"),
                                 ("C0:FF:EE:00:00:09=-70", "--rssi C0:FF:EE:00:00:09=-70: no simulated device C0:FF:EE:00:00:09")] {
            let bad = try await CLI.run(["simulate", "--seconds", "1", "--rssi", value])
            #expect(bad.status != 0)
            #expect(bad.stderr.contains(message), "\(bad.stderr)")
        }
    }

    /// `--adapters hci0,hci1` and `--rssi [ADAPTER/]ADDRESS=DBM`: each adapter receives the device
    /// at its own RSSI (without a prefix: every adapter); bad values named.
    @Test func adaptersFlag() async throws {
        let hr = "C0:FF:EE:00:00:01"
        do {
            let (sim, bus) = try await Self.simulate(["--adapters", "hci0,hci1", "--rssi", "\(hr)=-80", "--rssi", "hci1/\(hr)=-70",
                                                      "--advertising-interval", "0"])
            defer {
                reap(sim)
            }
            for (adapter, rssi) in [("hci0", -80), ("hci1", -70)] {
                let scan = try await CLI.run(["scan", "--bus", bus, "--adapter", adapter, "--seconds", "0.5", "--json"])
                #expect(scan.status == 0)
                #expect(scan.stdout.contains(#""address":"C0:FF:EE:00:00:01","name":"Sim HR","rssi":\#(rssi)"#), "\(adapter): \(scan.stdout)")
            }
        }
        for (arguments, message) in [
            (["--adapters", "hci0,hci0"], "--adapters hci0,hci0: adapter names repeat: hci0,hci0"),
            (["--adapters", "hci0,"], "--adapters hci0,: adapter name \"\": expected letters, digits and _ (e.g. hci1)"),
            (["--adapters", "hci-1"], "--adapters hci-1: adapter name \"hci-1\": expected letters, digits and _ (e.g. hci1)"),
            (["--rssi", "hci1/\(hr)=-70"], "--rssi hci1/\(hr)=-70: no adapter 'hci1' (--adapters hci0)"),
            (["--adapters", "hci0,hci1", "--rssi", "hci1/C0:FF=-70"], "--rssi hci1/C0:FF=-70: 'C0:FF' is not an address like C0:FF:EE:00:00:01"),
        ] {
            let bad = try await CLI.run(["simulate", "--seconds", "1"] + arguments)
            #expect(bad.status != 0)
            #expect(bad.stderr.contains(message), "\(bad.stderr)")
        }
    }

    @Test func badArgumentsAndNoBus() async throws {
        let badUUID = try await CLI.run(["gatt", "--device", "C0:FF:EE:00:00:01", "--read", "xyz"])
        #expect(badUUID.status == 1)
        #expect(badUUID.stderr.contains("xyz"))
        let badHex = try await CLI.run(["gatt", "--device", "C0:FF:EE:00:00:01", "--write", "2A39", "zz"])
        #expect(badHex.status == 1)
        #expect(badHex.stderr == "error: --write value: invalid hex at character 0: unexpected character 'z'\n")
        let noBus = try await CLI.run(["scan", "--bus", "unix:path=/tmp/gatt2mqtt-no-such-bus", "--seconds", "1"])
        #expect(noBus.status == 1)
        #expect(noBus.stderr.hasPrefix("error: cannot reach BlueZ on unix:path=/tmp/gatt2mqtt-no-such-bus"))
    }
}
