import Foundation
import TestSupport
import Testing

/// `gatt2mqtt simulate --device bthome@…` (and the other passive kinds, the encrypted ones with
/// `#KEY`): the kinds parse, the
/// advertisement's data changes every `--advertise-interval` and reaches `gatt2mqtt scan`, and
/// bad kinds and intervals are named.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SimulateAdvertiserCLITests {
    @Test func advertiserKindsParseAndTheirDataChanges() async throws {
        let (sim, bus) = try await BluetoothCLITests.simulate([
            "--device", "bthome@A4:C1:38:00:00:01", "--device", "atc@A4:C1:38:00:00:02", "--device", "pvvx@A4:C1:38:00:00:03",
            "--device", "ruuvi@C0:FF:EE:00:00:04", "--device", "govee@A4:C1:38:00:00:05",
            "--device", "bthome-encrypted@A4:C1:38:00:00:06", "--device", "xiaomi@A4:C1:38:00:00:07#00112233445566778899aabbccddeeff",
            "--advertise-interval", "0.2", "--advertising-interval", "0.05",
        ])
        defer { reap(sim) }
        let first = try await CLI.run(["scan", "--bus", bus, "--seconds", "0.5", "--json"])
        #expect(first.status == 0)
        for (address, data) in [("A4:C1:38:00:00:01", #""service_data":{"0000fcd2-0000-1000-8000-00805f9b34fb":"4000"#),
                                ("A4:C1:38:00:00:02", #""service_data":{"0000181a-0000-1000-8000-00805f9b34fb":"a4c138000002"#),
                                ("A4:C1:38:00:00:03", #""service_data":{"0000181a-0000-1000-8000-00805f9b34fb":"03000038c1a4"#),
                                ("C0:FF:EE:00:00:04", #""manufacturer_data":{"1177":"05"#),
                                ("A4:C1:38:00:00:05", #""manufacturer_data":{"60552":"00"#),
                                // Encrypted: BTHome's device information 0x41; MiBeacon's frame control 0x5858, product 0x055B.
                                ("A4:C1:38:00:00:06", #""service_data":{"0000fcd2-0000-1000-8000-00805f9b34fb":"41"#),
                                ("A4:C1:38:00:00:07", #""service_data":{"0000fe95-0000-1000-8000-00805f9b34fb":"58585b05"#)] {
            let line = first.stdout.split(separator: "\n").first { $0.contains(#""address":"\#(address)""#) }
            #expect(line?.contains(data) == true, "\(address): \(first.stdout)")
        }
        // The BTHome packet id (its third byte) moves on between two scans.
        func packet(_ out: String) -> Substring? {
            guard let line = out.split(separator: "\n").first(where: { $0.contains("A4:C1:38:00:00:01") }),
                  let range = line.range(of: "fb\":\"4000") else { return nil }
            return line[range.upperBound...].prefix(2)
        }
        let later = try await CLI.run(["scan", "--bus", bus, "--seconds", "0.5", "--json"])
        #expect(packet(first.stdout) != nil)
        #expect(packet(later.stdout) != nil && packet(later.stdout) != packet(first.stdout), "\(first.stdout)\n\(later.stdout)")
    }

    @Test func badKindsAndIntervalsAreNamed() async throws {
        for (arguments, message) in [
            (["--device", "miflora@A4:C1:38:00:00:01"], "--device miflora@A4:C1:38:00:00:01: expected KIND@ADDRESS with KIND one of gopro, rokid, hr, thermo, bthome, atc, pvvx, ruuvi, govee, bthome-encrypted, xiaomi"),
            (["--device", "xiaomi@A4:C1:38:00:00:01#0011"], "or KIND@ADDRESS#KEY with KIND one of bthome-encrypted, xiaomi and KEY 32 hex digits"),
            (["--device", "bthome@A4:C1:38:00:00:01#00112233445566778899aabbccddeeff"], "or KIND@ADDRESS#KEY with KIND one of bthome-encrypted, xiaomi"),
            (["--device", "bthome@A4:C1:38"], "--device bthome@A4:C1:38: expected KIND@ADDRESS"),
            (["--device", "bthome@A4:C1:38:00:00:01", "--advertise-interval", "-1"], "advertise-interval"),
        ] {
            let bad = try await CLI.run(["simulate", "--seconds", "1"] + arguments)
            #expect(bad.status != 0)
            #expect(bad.stderr.contains(message), "\(bad.stderr)")
        }
    }
}
